// The neuron view: how one query token's attention is computed, for a layer and head, and what
// it carries past the softmax (issue 47). Rows are key tokens j: the key vector k_j, the
// element-wise product q × k_j, the scaled dot product q·k_j, the softmax α_j; then the value
// vector v_j, α_j·v_j (and above, in q's row, the head's output o = Σ_j α_j v_j), ‖f(x_j)‖ and α_j‖f(x_j)‖.
// The numbers come from neuron_maths.js; the columns, their titles and scales from neuron_scene.js,
// which draws the same layout as an image.
import { el, sizeCanvas, tokenText } from "../drawing/dom.js";
import { renderColorBar } from "../drawing/legend.js";
import { divergingColor, maxAbs, signedPixel } from "../drawing/colors.js";
import { barNumber, hasValues, neuronBars, neuronColumns, neuronScene, ROW_HEIGHT } from "./neuron_scene.js";
import { textWidth } from "../drawing/svg.js";
import { imageMethods } from "../drawing/scene.js";
import { declared, imaged, keyTokens, layerTitle, shown } from "./view_adapter.js";

export { divergingColor, maxAbs } from "../drawing/colors.js";
export { cellWidth, neuronScene, ROW_HEIGHT } from "./neuron_scene.js";

// One pixel per value in an offscreen image, scaled up without smoothing: a 512 × 64 matrix is
// one drawImage instead of 32k fillRect calls with as many colour strings.
function paintMatrix(canvas, values, rows, d, width) {
  const ctx = sizeCanvas(canvas, width, rows * ROW_HEIGHT);
  canvas.dataset.rows = String(rows);
  if (!ctx || typeof OffscreenCanvas === "undefined") return;
  const scale = maxAbs(values);
  const image = new ImageData(d, rows);
  for (let i = 0; i < rows * d; i++) {
    const pixel = signedPixel(values[i], scale);
    if (pixel) image.data.set(pixel, 4 * i);
  }
  const offscreen = new OffscreenCanvas(d, rows);
  offscreen.getContext("2d").putImageData(image, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(offscreen, 0, 0, width, rows * ROW_HEIGHT);
}

const PAST_SOFTMAX_HINT = "v: the head's value vectors (with grouped-query attention, those of the key-value head it reads); "
  + "o: the head's output for the query, before the output projection; ‖f(x)‖ = ‖(xW_V + b_V)W_O^h‖: what each key "
  + "passes through the head (Kobayashi et al. 2020), α‖f(x)‖ its weighted share.";

/**
 * createNeuronView(container, {onQuery(i), onHead(h)}) → {update(state), destroy()}
 * state: {tokens, tokenNotes?, keyTokens?, keyNotes?, nHeads, head, query, causal?, data: null | {d, query,
 *   keys, products, scores, softmax, values?, weighted?, output?, norms?, weightedNorms?, sinkShare?, scoreLabel?}, message}
 * (neuron_maths.js's numbers; without values the view stops at the softmax).
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
  const pastHint = el("div", "attnscope-hint attnscope-neuron-past", root);
  pastHint.textContent = PAST_SOFTMAX_HINT;

  const legends = el("div", "attnscope-legends", root);
  const table = el("div", "attnscope-neuron-table", root);
  table.style.setProperty("--as-row", `${ROW_HEIGHT}px`); // the rows where neuronScene puts them
  table.hidden = true; // until numbers arrive: an empty table would flash (and look finished)
  const queries = el("div", "attnscope-tokens attnscope-left attnscope-neuron-queries", table);
  const numberColumns = el("div", "attnscope-neuron-columns", table);
  const keyTokenRows = el("div", "attnscope-tokens attnscope-right", table);
  let columns = []; // {spec, title, canvas?, extra?, rows?}: the drawn columns of neuronColumns(data)
  let available = Infinity; // px the columns may take (neuronColumns)
  let layout = "";

  headSelect.addEventListener("change", () => callbacks.onHead?.(Number(headSelect.value)));
  let state = null;

  // Each column: a title row, the query's row (q, o and o's label, else empty), one row per key. Rebuilt only when the columns change (values arrive, d,
  // the number of keys); another query rewrites their numbers and pixels in place.
  function buildColumns(data, n) {
    numberColumns.replaceChildren();
    columns = neuronColumns(data, available).map((spec) => {
      const classes = { scores: "attnscope-neuron-numbers", softmax: "attnscope-neuron-numbers attnscope-neuron-softmax",
        norms: "attnscope-neuron-numbers attnscope-neuron-norms", weightedNorms: "attnscope-neuron-numbers attnscope-neuron-weighted-norms" };
      const col = el("div", `attnscope-neuron-col attnscope-neuron-${spec.key} ${classes[spec.key] ?? ""}`.trim(), numberColumns);
      col.style.minWidth = `${spec.width}px`;
      const title = el("div", "attnscope-neuron-title", col);
      const column = { spec, title };
      // The query's row: q in the key column, o in the α·v column (its label in v's).
      if (spec.key === "keys") column.query = el("canvas", "attnscope-neuron-q", col);
      else if (spec.key === "weighted") column.output = el("canvas", "attnscope-neuron-output", col);
      else if (spec.key === "values") el("div", "attnscope-neuron-title attnscope-neuron-output-label", col).textContent = "o = Σ α·v →";
      else el("div", "attnscope-neuron-spacer", col);
      if (spec.kind === "matrix") column.canvas = el("canvas", `attnscope-neuron-${spec.key}`, col);
      else column.rows = Array.from({ length: n }, () => {
        const row = el("div", "attnscope-neuron-number", col);
        if (spec.kind === "bars") el("span", "attnscope-softmax-bar", row);
        return el("span", "", row);
      });
      return column;
    });
  }

  function fillColumns(data, n) {
    for (const { spec, title, query, canvas, rows, output } of columns) {
      title.textContent = spec.title;
      if (query) paintMatrix(query, data.query, 1, data.d, spec.width);
      if (canvas) paintMatrix(canvas, data[spec.key], n, data.d, spec.width);
      if (output) {
        paintMatrix(output, data.output, 1, data.d, spec.width);
        output.title = `o = Σ_j α_j v_j: ${Array.from(data.output, (v) => v.toFixed(3)).join(", ")}`;
      }
      if (!rows) continue;
      const values = data[spec.key];
      const scale = spec.fixedScale ?? maxAbs(values);
      rows.forEach((value, j) => {
        const row = /** @type {HTMLElement} */ (value.parentElement);
        if (spec.kind === "scores") {
          const masked = !Number.isFinite(values[j]);
          value.textContent = masked ? "masked" : values[j].toFixed(2);
          row.style.background = divergingColor(values[j], maxAbs(values));
          return;
        }
        /** @type {HTMLElement} */ (row.firstChild).style.width = `${Math.round(scale > 0 ? (values[j] / scale) * 60 : 0)}px`;
        value.textContent = barNumber(values[j], spec.digits);
      });
    }
  }

  function fillTokens() {
    queries.replaceChildren();
    const title = el("div", "attnscope-neuron-title", queries);
    title.textContent = "query";
    el("div", "attnscope-neuron-spacer attnscope-neuron-title", queries).textContent = "q →";
    keyTokenRows.replaceChildren();
    el("div", "attnscope-neuron-title", keyTokenRows).textContent = "key";
    el("div", "attnscope-neuron-spacer", keyTokenRows);
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
      pastHint.hidden = !data || !hasValues(data);
      // Where the message says why there are no numbers, no head or token can be chosen either.
      controls.hidden = !data && Boolean(next.message);
      if (!data) return;
      legends.replaceChildren();
      for (const bar of neuronBars(data)) renderColorBar(el("div", "", legends), bar);
      const n = (next.keyTokens ?? next.tokens).length;
      // The room the columns have: the view's width less the two token columns (a slide is narrower).
      const tokenWidth = (tokens) => Math.max(40, ...tokens.map((t) => textWidth(t))) + 16;
      available = next.width > 0 ? next.width - tokenWidth(next.tokens) - tokenWidth(next.keyTokens ?? next.tokens) - 64 : Infinity;
      const specs = neuronColumns(data, available);
      const shape = [n, ...specs.map((c) => `${c.key}:${c.width}`)].join(",");
      if (shape !== layout) buildColumns(data, n);
      layout = shape;
      fillColumns(data, n);
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

function neuronState({ get, neuronData, width = 0 }) {
  const base = { width, tokens: get("tokens"), tokenNotes: get("token_notes"), keyTokens: keyTokens(get),
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
