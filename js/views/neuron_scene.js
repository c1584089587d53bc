// The neuron view's layout, shared by the screen's table (neuron_view.js) and its images
// (neuronScene): which columns it has, their titles, widths and colour scales. Rows are key
// tokens j; row 0, the query's, holds q in the key column and, past the softmax, the head's
// output o = Σ_j α_j v_j in the α·v column (at the top: in view with any number of keys). Blue is negative, orange positive,
// intensity the magnitude relative to the column's largest (as BertViz's neuron view).
// Signed values (q, k, q × k, scores, v, α·v) on colors.js's diverging scale.
import { divergingColor, maxAbs, signedPixel } from "../drawing/colors.js";
import { BAR_HEIGHT, BAR_WIDTH, colorBar, colorBarScene } from "../drawing/legend.js";
import { createScene } from "../drawing/scene.js";
import { textWidth } from "../drawing/svg.js";

export const ROW_HEIGHT = 20;
const NUMBER_WIDTH = 70; // a column of numbers (scores)
const BAR_COLUMN = 60; // the longest bar of the softmax, ‖f‖ and α‖f‖ columns
const GAP = 16;
// What key j passes (Kobayashi et al. 2020): value, then the head's slice of the output projection.
// Its formula is said in the view's hint under the table: in the title it took 180 px, and the
// table ran past JupyterLab's 948 px output, its key tokens cut ("becau").
const NORM_TITLE = "‖f(x)‖";
// A bars column: its longest bar, the number after it and their gap.
const BARS_WIDTH = 108;

/** Cell width in px so that a vector of d values is about `budget` px wide (`least`..8 px). */
export function cellWidth(d, budget = 320, least = 2) {
  return Math.max(least, Math.min(8, Math.floor(budget / Math.max(d, 1))));
}


/** Whether the numbers go past the softmax: the run captured the head's values (not cross-attention's). */
export const hasValues = (data) => Boolean(data.values && data.weighted && data.output);

/** The softmax column's title: α, and the share a sink logit keeps out of the row (gpt-oss). */
export const softmaxTitle = (data) => (data.sinkShare > 0 ? `softmax α (sink ${data.sinkShare.toFixed(3)})` : "softmax α");

/** @typedef {{key: string, title: string, kind: string, width: number, digits?: number, fixedScale?: number}} NeuronColumn */

/** A column's width: what it draws, or its title where that is wider (a title is never cut). */
const titled = (column) => ({ ...column, width: Math.max(column.width, textWidth(column.title, 11) + 8) });

/** The columns with vector cells `w` px wide: {key, title, kind, width}, in order. */
function columnsAt(data, past, w) {
  /** @type {(key: string, title: string) => NeuronColumn} */
  const matrix = (key, title) => ({ key, title, kind: "matrix", width: data.d * w });
  /** @type {NeuronColumn[]} */
  const columns = [
    matrix("keys", `q, k (d = ${data.d})`),
    matrix("products", "q × k"),
    { key: "scores", title: data.scoreLabel ?? "q·k / √d", kind: "scores", width: NUMBER_WIDTH },
    { key: "softmax", title: softmaxTitle(data), kind: "bars", width: BARS_WIDTH, digits: 3, fixedScale: 1 },
  ];
  if (past) columns.push(matrix("values", "v (values)"), matrix("weighted", "α·v"));
  if (past && data.norms) {
    columns.push(
      { key: "norms", title: NORM_TITLE, kind: "bars", width: BARS_WIDTH, digits: 2 },
      { key: "weightedNorms", title: "α‖f(x)‖", kind: "bars", width: BARS_WIDTH, digits: 3 },
    );
  }
  return columns.map(titled);
}

/**
 * The columns after the query tokens, in order: {key, title, kind, width}. kind "matrix": a row
 * of d cells a key (values: data[key], n × d); "scores": numbers on their colour; "bars": a bar
 * a key, as long as its share of the column's largest (fixedScale: of that), and its number.
 * Their vector cells are the widest (1..8 px) at which every column, title and gap fits
 * `available` px (a slide is ~1,230 px wide; JupyterLab's output at 1400 × 1000 is 948).
 * @returns {NeuronColumn[]}
 */
export function neuronColumns(data, available = Infinity) {
  const past = hasValues(data);
  const widest = past ? cellWidth(data.d, 150, 1) : cellWidth(data.d);
  const room = (columns) => columns.reduce((sum, c) => sum + c.width + GAP, 0);
  for (let w = widest; w > 1 && Number.isFinite(available) && available > 0; w--) {
    const columns = columnsAt(data, past, w);
    if (room(columns) <= available) return columns;
  }
  return columnsAt(data, past, Number.isFinite(available) && available > 0 ? 1 : widest);
}

/** Each colour scale of the view: blue below 0, orange above, full at the column's largest |value|. */
export function neuronBars(data) {
  const bar = (label, values) => {
    const scale = maxAbs(values);
    return colorBar(label, -scale, scale, (t) => divergingColor((2 * t - 1) * scale, scale));
  };
  const bars = [bar("q", data.query), bar("k", data.keys), bar("q × k", data.products), bar(data.scoreLabel ?? "q·k / √d", data.scores)];
  if (hasValues(data)) bars.push(bar("v", data.values), bar("α·v", data.weighted), bar("o = Σ α·v", data.output));
  return bars;
}

/** A bar column's number: fixed digits, or 3 significant ones where those would read 0.000. */
export function barNumber(value, digits) {
  if (!Number.isFinite(value)) return "–";
  return value !== 0 && Math.abs(value) < 10 ** -digits ? value.toPrecision(2) : value.toFixed(digits);
}

/** The state cut to its first `max` key rows (and query tokens): a picture of a long input keeps its size. */
function firstKeys(state, max) {
  const keyTokens = state.keyTokens ?? state.tokens;
  if (keyTokens.length <= max && state.tokens.length <= max) return state;
  const { data } = state;
  const [n, d] = [Math.min(keyTokens.length, max), data.d];
  const cut = (values, per) => (values ? values.subarray(0, n * per) : values);
  return {
    ...state,
    tokens: state.tokens.slice(0, max),
    keyTokens: state.keyTokens ? state.keyTokens.slice(0, n) : null,
    cut: [Math.min(state.tokens.length, max), Math.max(state.tokens.length, keyTokens.length)],
    // o stays the whole sum: the rows cut from the picture are still in it.
    data: { ...data, keys: cut(data.keys, d), products: cut(data.products, d), scores: cut(data.scores, 1), softmax: cut(data.softmax, 1),
      values: cut(data.values, d), weighted: cut(data.weighted, d), norms: cut(data.norms, 1), weightedNorms: cut(data.weightedNorms, 1) },
  };
}

/**
 * The computation as an image, in the screen's rows: a title row, the row of q (beside "q →"),
 * then one row per key token j, where query token j stands too (as in the view's table); o sits
 * in q's row, in the α·v column.
 */
export function neuronScene(fullState, { title = "", maxTokens = Infinity } = {}) {
  const state = firstKeys(fullState, maxTokens);
  const { data } = state;
  const keyTokens = state.keyTokens ?? state.tokens;
  const n = keyTokens.length;
  const { d } = data;
  const past = hasValues(data);
  const leftWidth = Math.max(40, ...state.tokens.map((t) => textWidth(t))) + 12;
  const top = 50;
  const rowY = (row) => top + (row + 0.5) * ROW_HEIGHT; // row 0: q; row j + 1: key j and query token j
  const columns = neuronColumns(data);
  let x = leftWidth;
  const at = new Map(columns.map((c) => { const here = x; x += c.width + GAP; return [c.key, { ...c, x: here }]; }));
  const xTokens = x;
  const rows = Math.max(state.tokens.length, n) + 1;
  const bars = neuronBars(data);
  const width = Math.max(xTokens + Math.max(40, ...keyTokens.map((t) => textWidth(t))) + 8, 6 + bars.length * (BAR_WIDTH + 16));
  const s = createScene(width, top + rows * ROW_HEIGHT + 16 + BAR_HEIGHT);
  const cut = state.cut ? ` (the first ${state.cut[0]} of ${state.cut[1].toLocaleString("en")} tokens)` : "";
  s.text(6, 12, `${title}${title ? " · " : ""}head ${state.head}, query "${fullState.tokens[state.query]}"${cut}`, { role: "title" });
  for (const c of at.values()) s.text(c.x, 34, c.title, { size: 11, role: "column-title" });
  s.text(leftWidth - 6, rowY(0), "q →", { anchor: "end", size: 11 });
  state.tokens.forEach((t, i) => {
    s.text(leftWidth - 6, rowY(i + 1), t, { anchor: "end", color: i === state.query ? "#d62728" : null, role: "query-token" });
  });
  // One raster a matrix (a pixel a value, a row ROW_HEIGHT pixels with the 2 px gap left
  // clear), not a rect a value: 20 tokens × 64 values are 2,560 rects, too many for a picture.
  const matrix = (values, count, column, firstRow) => {
    const scale = maxAbs(values);
    const rgba = new Uint8ClampedArray(d * count * ROW_HEIGHT * 4);
    for (let r = 0; r < count; r++) {
      for (let k = 0; k < d; k++) {
        const pixel = signedPixel(values[r * d + k], scale);
        if (!pixel) continue;
        for (let y = r * ROW_HEIGHT; y < (r + 1) * ROW_HEIGHT - 2; y++) rgba.set(pixel, (y * d + k) * 4);
      }
    }
    s.raster(column.x, top + firstRow * ROW_HEIGHT, column.width, count * ROW_HEIGHT, d, count * ROW_HEIGHT, rgba);
  };
  matrix(data.query, 1, at.get("keys"), 0);
  for (const c of at.values()) if (c.kind === "matrix") matrix(data[c.key], n, c, 1);
  if (past) {
    const o = at.get("weighted");
    // o in the query's row, beside q: in view however many keys there are.
    matrix(data.output, 1, o, 0);
    s.text(o.x - 6, rowY(0), "o = Σ α·v →", { anchor: "end", size: 11, role: "output-label" });
  }
  const scoreScale = maxAbs(data.scores);
  for (const c of at.values()) {
    if (c.kind === "matrix") continue;
    const values = data[c.key];
    const scale = c.fixedScale ?? maxAbs(values);
    for (let j = 0; j < n; j++) {
      const y = rowY(j + 1);
      if (c.kind === "scores") {
        const masked = !Number.isFinite(values[j]);
        s.rect(c.x, y - ROW_HEIGHT / 2, c.width - 10, ROW_HEIGHT - 2, divergingColor(values[j], scoreScale));
        s.text(c.x + 4, y, masked ? "masked" : values[j].toFixed(2), { size: 11, role: "score" });
      } else {
        s.rect(c.x, y - ROW_HEIGHT / 2, Math.max(1, scale > 0 ? (values[j] / scale) * BAR_COLUMN : 0), ROW_HEIGHT - 2, "rgba(31,119,180,0.35)");
        s.text(c.x + 4, y, barNumber(values[j], c.digits), { size: 11, role: c.key === "softmax" ? "softmax" : c.key });
      }
    }
  }
  keyTokens.forEach((t, j) => { s.text(xTokens, rowY(j + 1), t, { role: "key-token" }); });
  bars.forEach((bar, i) => { colorBarScene(s, 6 + i * (BAR_WIDTH + 16), top + rows * ROW_HEIGHT + 12, bar); });
  return s.scene;
}
