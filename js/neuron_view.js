// The neuron view: how one query token's attention is computed, for a layer and head.
// Rows are key tokens j: the key vector k_j, the element-wise product q × k_j, the scaled dot
// product q·k_j and the softmax. The query vector q sits above the key column. Blue is
// negative, orange positive, intensity the magnitude (as BertViz's neuron view).
import { el, sizeCanvas, tokenText } from "./dom.js";
import { BAR_HEIGHT, BAR_WIDTH, colorBar, colorBarScene, renderColorBar } from "./legend.js";
import { createScene, imageMethods } from "./scene.js";
import { textWidth } from "./svg.js";
import { declared, imaged, keyTokens, layerTitle, shown } from "./view_adapter.js";

export const ROW_HEIGHT = 20;
const NEGATIVE = [31, 119, 180];
const POSITIVE = [255, 127, 14];

/** Cell width in px so that a vector of d values is about 320 px wide (2..8 px). */
export function cellWidth(d) {
  return Math.max(2, Math.min(8, Math.floor(320 / Math.max(d, 1))));
}

/** rgba() for a signed value, relative to the largest magnitude `scale`. */
export function divergingColor(value, scale) {
  if (!Number.isFinite(value) || scale <= 0) return "rgba(0,0,0,0)";
  const [r, g, b] = value < 0 ? NEGATIVE : POSITIVE;
  return `rgba(${r},${g},${b},${Math.min(1, Math.abs(value) / scale).toFixed(3)})`;
}

export function maxAbs(values) {
  let m = 0;
  for (const v of values) if (Number.isFinite(v) && Math.abs(v) > m) m = Math.abs(v);
  return m;
}

// One pixel per value in an offscreen image, scaled up without smoothing: a 512 × 64 matrix is
// one drawImage instead of 32k fillRect calls with as many colour strings.
function paintMatrix(canvas, values, rows, d) {
  const w = cellWidth(d);
  const ctx = sizeCanvas(canvas, d * w, rows * ROW_HEIGHT);
  if (!ctx || typeof OffscreenCanvas === "undefined") return;
  const scale = maxAbs(values);
  const image = new ImageData(d, rows);
  const pixels = image.data;
  for (let i = 0; i < rows * d; i++) {
    const v = values[i];
    if (!Number.isFinite(v) || scale <= 0) continue;
    const [r, g, b] = v < 0 ? NEGATIVE : POSITIVE;
    pixels[4 * i] = r;
    pixels[4 * i + 1] = g;
    pixels[4 * i + 2] = b;
    pixels[4 * i + 3] = Math.round(Math.min(1, Math.abs(v) / scale) * 255);
  }
  const offscreen = new OffscreenCanvas(d, rows);
  offscreen.getContext("2d").putImageData(image, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(offscreen, 0, 0, d * w, rows * ROW_HEIGHT);
}

/** Each column's colour scale: blue below 0, orange above, full at the column's largest |value|. */
export function neuronBars(data) {
  const bar = (label, values) => {
    const scale = maxAbs(values);
    return colorBar(label, -scale, scale, (t) => divergingColor((2 * t - 1) * scale, scale));
  };
  return [bar("q", data.query), bar("k", data.keys), bar("q × k", data.products), bar(data.scoreLabel ?? "q·k / √d", data.scores)];
}

/** The state cut to its first `max` key rows (and query tokens): a picture of a long input keeps its size. */
function firstKeys(state, max) {
  const keyTokens = state.keyTokens ?? state.tokens;
  if (keyTokens.length <= max && state.tokens.length <= max) return state;
  const { data } = state;
  const [n, d] = [Math.min(keyTokens.length, max), data.d];
  return {
    ...state,
    tokens: state.tokens.slice(0, max),
    keyTokens: state.keyTokens ? state.keyTokens.slice(0, n) : null,
    cut: [Math.min(state.tokens.length, max), Math.max(state.tokens.length, keyTokens.length)],
    data: { ...data, keys: data.keys.subarray(0, n * d), products: data.products.subarray(0, n * d),
      scores: data.scores.subarray(0, n), softmax: data.softmax.subarray(0, n) },
  };
}

/**
 * The computation as an image, in the screen's rows: a title row, the row of q (beside "q →"),
 * then one row per key token j, where query token j stands too (as in the view's table).
 */
export function neuronScene(fullState, { title = "", maxTokens = Infinity } = {}) {
  const state = firstKeys(fullState, maxTokens);
  const { data } = state;
  const keyTokens = state.keyTokens ?? state.tokens;
  const n = keyTokens.length;
  const { d } = data;
  const w = cellWidth(d);
  const leftWidth = Math.max(40, ...state.tokens.map((t) => textWidth(t))) + 12;
  const top = 50;
  const rowY = (row) => top + (row + 0.5) * ROW_HEIGHT; // row 0: q; row j + 1: key j and query token j
  const xKeys = leftWidth;
  const xProducts = xKeys + d * w + 16;
  const xScores = xProducts + d * w + 16;
  const xSoftmax = xScores + 70;
  const xTokens = xSoftmax + 70;
  const rows = Math.max(state.tokens.length, n) + 1;
  const bars = neuronBars(data);
  const width = Math.max(xTokens + Math.max(40, ...keyTokens.map((t) => textWidth(t))) + 8, 6 + bars.length * (BAR_WIDTH + 16));
  const s = createScene(width, top + rows * ROW_HEIGHT + 16 + BAR_HEIGHT);
  const cut = state.cut ? ` (the first ${state.cut[0]} of ${state.cut[1].toLocaleString("en")} tokens)` : "";
  s.text(6, 12, `${title}${title ? " · " : ""}head ${state.head}, query "${fullState.tokens[state.query]}"${cut}`, { role: "title" });
  for (const [x, label] of [[xKeys, `q, k (d = ${d})`], [xProducts, "q × k"], [xScores, data.scoreLabel ?? "q·k / √d"], [xSoftmax, "softmax"]]) {
    s.text(x, 34, label, { size: 11, role: "column-title" });
  }
  s.text(leftWidth - 6, rowY(0), "q →", { anchor: "end", size: 11 });
  state.tokens.forEach((t, i) => {
    s.text(leftWidth - 6, rowY(i + 1), t, { anchor: "end", color: i === state.query ? "#d62728" : null, role: "query-token" });
  });
  // One raster a matrix (a pixel a value, a row ROW_HEIGHT pixels with the 2 px gap left
  // clear), not a rect a value: 20 tokens × 64 values are 2,560 rects, too many for a picture.
  const matrix = (values, count, x, firstRow) => {
    const scale = maxAbs(values);
    const rgba = new Uint8ClampedArray(d * count * ROW_HEIGHT * 4);
    for (let r = 0; r < count; r++) {
      for (let k = 0; k < d; k++) {
        const v = values[r * d + k];
        if (!Number.isFinite(v) || v === 0 || scale <= 0) continue;
        const [red, green, blue] = v < 0 ? NEGATIVE : POSITIVE;
        const alpha = Math.round(255 * Math.min(1, Math.abs(v) / scale));
        for (let y = r * ROW_HEIGHT; y < (r + 1) * ROW_HEIGHT - 2; y++) rgba.set([red, green, blue, alpha], (y * d + k) * 4);
      }
    }
    s.raster(x, top + firstRow * ROW_HEIGHT, d * w, count * ROW_HEIGHT, d, count * ROW_HEIGHT, rgba);
  };
  matrix(data.query, 1, xKeys, 0);
  matrix(data.keys, n, xKeys, 1);
  matrix(data.products, n, xProducts, 1);
  const scoreScale = maxAbs(data.scores);
  for (let j = 0; j < n; j++) {
    const y = rowY(j + 1);
    const masked = !Number.isFinite(data.scores[j]);
    s.rect(xScores, y - ROW_HEIGHT / 2, 60, ROW_HEIGHT - 2, divergingColor(data.scores[j], scoreScale));
    s.text(xScores + 4, y, masked ? "masked" : data.scores[j].toFixed(2), { size: 11, role: "score" });
    s.rect(xSoftmax, y - ROW_HEIGHT / 2, Math.max(1, data.softmax[j] * 60), ROW_HEIGHT - 2, "rgba(31,119,180,0.35)");
    s.text(xSoftmax + 4, y, data.softmax[j].toFixed(3), { size: 11, role: "softmax" });
    s.text(xTokens, y, keyTokens[j], { role: "key-token" });
  }
  bars.forEach((bar, i) => { colorBarScene(s, 6 + i * (BAR_WIDTH + 16), top + rows * ROW_HEIGHT + 12, bar); });
  return s.scene;
}

/**
 * createNeuronView(container, {onQuery(i), onHead(h)}) → {update(state), destroy()}
 * state: {tokens, tokenNotes?, keyTokens?, keyNotes?, nHeads, head, query, causal?, data: null | {query, keys, products, scores, softmax, d}, message}
 * keyTokens: the key rows when keys are other tokens (cross-attention); default tokens.
 */
export function createNeuronView(container, callbacks = {}) {
  const root = el("div", "attnscope-neuron-view", container);
  const controls = el("div", "attnscope-neuron-controls", root);
  const headLabel = el("label", "attnscope-control", controls);
  el("span", "", headLabel).textContent = "Head";
  const headSelect = el("select", "attnscope-neuron-head", headLabel);
  const hint = el("span", "attnscope-hint", controls);
  hint.textContent = "Click a token on the left to make it the query.";
  const message = el("div", "attnscope-status", root);

  const legends = el("div", "attnscope-legends", root);
  const table = el("div", "attnscope-neuron-table", root);
  table.style.setProperty("--as-row", `${ROW_HEIGHT}px`); // the rows where neuronScene puts them
  table.hidden = true; // until numbers arrive: an empty table would flash (and look finished)
  const queries = el("div", "attnscope-tokens attnscope-left attnscope-neuron-queries", table);
  const keyColumn = el("div", "attnscope-neuron-col", table);
  const keyTitle = el("div", "attnscope-neuron-title", keyColumn);
  const queryCanvas = el("canvas", "attnscope-neuron-q", keyColumn);
  const keysCanvas = el("canvas", "attnscope-neuron-keys", keyColumn);
  // Each column: a title row, a row beside q (empty), then one row per key token.
  const column = (className, title) => {
    const col = el("div", className, table);
    el("div", "attnscope-neuron-title", col).textContent = title;
    el("div", "attnscope-neuron-spacer", col);
    return col;
  };
  const productsCanvas = el("canvas", "attnscope-neuron-products", column("attnscope-neuron-col", "q × k"));
  const scoresColumn = column("attnscope-neuron-col attnscope-neuron-numbers", "q·k / √d");
  const scores = el("div", "", scoresColumn);
  const softmax = el("div", "", column("attnscope-neuron-col attnscope-neuron-numbers attnscope-neuron-softmax", "softmax"));
  const keyTokenRows = el("div", "", column("attnscope-tokens attnscope-right", "key"));

  headSelect.addEventListener("change", () => callbacks.onHead?.(Number(headSelect.value)));
  let state = null;

  function fillTokens() {
    queries.replaceChildren();
    const title = el("div", "attnscope-neuron-title", queries);
    title.textContent = "query";
    el("div", "attnscope-neuron-spacer attnscope-neuron-title", queries).textContent = "q →";
    keyTokenRows.replaceChildren();
    state.tokens.forEach((token, i) => {
      const row = el("div", "attnscope-token attnscope-clickable", queries);
      row.dataset.index = String(i);
      tokenText(row, token, state.tokenNotes?.[i]);
      row.addEventListener("click", () => callbacks.onQuery?.(i));
    });
    (state.keyTokens ?? state.tokens).forEach((token, i) => {
      const keyRow = el("div", "attnscope-token", keyTokenRows);
      keyRow.dataset.index = String(i);
      tokenText(keyRow, token, (state.keyTokens ? state.keyNotes : state.tokenNotes)?.[i]);
    });
  }

  return {
    update(next) {
      const tokensChanged = !state || state.tokens !== next.tokens || state.keyTokens !== next.keyTokens
        || state.tokenNotes !== next.tokenNotes || state.keyNotes !== next.keyNotes;
      state = next;
      if (headSelect.options.length !== next.nHeads) {
        headSelect.replaceChildren();
        for (let h = 0; h < next.nHeads; h++) {
          const option = el("option", "", headSelect);
          option.value = String(h);
          option.textContent = String(h);
        }
      }
      headSelect.value = String(next.head);
      if (tokensChanged) fillTokens();
      for (const row of queries.querySelectorAll(".attnscope-token")) {
        row.classList.toggle("attnscope-selected", Number(row.dataset.index) === next.query);
      }
      message.textContent = next.message ?? "";
      const data = next.data;
      table.hidden = legends.hidden = !data;
      // Where the message says why there are no numbers, no head or token can be chosen either.
      controls.hidden = !data && Boolean(next.message);
      if (!data) return;
      legends.replaceChildren();
      for (const bar of neuronBars(data)) renderColorBar(el("div", "", legends), bar);
      const n = (next.keyTokens ?? next.tokens).length;
      keyTitle.textContent = `k (d = ${data.d})`;
      // T5 adds a position bias and does not scale; GPT-2 may scale by layer: the kernel says.
      scoresColumn.firstChild.textContent = data.scoreLabel ?? "q·k / √d";
      paintMatrix(queryCanvas, data.query, 1, data.d);
      paintMatrix(keysCanvas, data.keys, n, data.d);
      paintMatrix(productsCanvas, data.products, n, data.d);
      // One row of numbers a key, kept from query to query (another query rewrites their text and
      // colours, not 1,000 new elements for the page to lay out).
      if (scores.children.length !== n) {
        scores.replaceChildren();
        softmax.replaceChildren();
        for (let j = 0; j < n; j++) {
          el("div", "attnscope-neuron-number", scores);
          const p = el("div", "attnscope-neuron-number", softmax);
          el("span", "attnscope-softmax-bar", p);
          el("span", "", p);
        }
      }
      const scoreScale = maxAbs(data.scores);
      for (let j = 0; j < n; j++) {
        const score = /** @type {HTMLElement} */ (scores.children[j]);
        const masked = !Number.isFinite(data.scores[j]);
        score.textContent = masked ? "masked" : data.scores[j].toFixed(2);
        score.style.background = divergingColor(data.scores[j], scoreScale);
        const [bar, value] = /** @type {HTMLElement[]} */ ([...softmax.children[j].children]);
        bar.style.width = `${Math.round(data.softmax[j] * 60)}px`;
        value.textContent = data.softmax[j].toFixed(3);
      }
      root.dataset.query = String(next.query);
      root.dataset.head = String(next.head);
    },
    /** The drawn computation as an image: scene, toSvg, toPng. */
    ...imageMethods((options) => {
      if (!state?.data) throw new Error("the neuron view has no numbers to draw yet");
      return neuronScene(state, options);
    }),
    destroy() { root.remove(); },
  };
}

function neuronState({ get, neuronData }) {
  const base = { tokens: get("tokens"), tokenNotes: get("token_notes"), keyTokens: keyTokens(get),
    keyNotes: get("key_token_notes"), nHeads: get("n_heads"),
    head: get("neuron_head"), query: get("neuron_query") };
  let message = "";
  if (get("word_level")) message = "The neuron view is per token: switch off Words to see it.";
  else if (get("neuron_unavailable")) message = get("neuron_unavailable"); // the kernel says why
  const data = message ? null : neuronData();
  if (data?.error) message = data.error;
  if (!data && !message) return "loading…";
  return { ...base, data: message ? null : data, message };
}

/** @type {import("./view_adapter.js").ViewAdapter} */
export const adapter = {
  ...declared("neuron"),
  create(body, { setTraits }) {
    return createNeuronView(body, {
      onQuery: (query) => setTraits({ neuron_query: query }),
      onHead: (h) => setTraits({ neuron_head: h }),
    });
  },
  draw: (view, context) => shown(view, neuronState(context)),
  picture(context, options) {
    const state = neuronState(context);
    // Why there are no numbers is the picture's line, as it is the tab's.
    return typeof state !== "string" && state.message ? state.message : imaged(state, neuronScene, options);
  },
  title: layerTitle,
  shows: ["notice", "part", "masked"],
};
