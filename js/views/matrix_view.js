// Token × token matrices of one layer (the rollout view): a cell per pair, with options to leave
// out special tokens and to normalise rows.
import { ATTENTION_RGB, attentionShade } from "../drawing/colors.js";
import { el, placeTooltip, pointerIn, sizeCanvas, tokenCaption } from "../drawing/dom.js";
import { gridCellAt } from "../drawing/grid.js";
import { layerText } from "../drawing/labels.js";
import { BAR_HEIGHT, BAR_WIDTH, colorBar, colorBarScene, formatValue, renderColorBar } from "../drawing/legend.js";
import { createScene, drawScene, imageMethods } from "../drawing/scene.js";
import { textWidth, wrapText } from "../drawing/svg.js";

const MATRIX_CELL_MAX = 28;
const MATRIX_SIZE = 460;

/** Cell size in px of an n × n matrix: about MATRIX_SIZE wide, 4 to MATRIX_CELL_MAX px a cell. */
export function matrixCell(n) {
  return Math.max(4, Math.min(MATRIX_CELL_MAX, Math.floor(MATRIX_SIZE / Math.max(n, 1))));
}

const defaultLayerLabel = layerText;

// Rollout opens without [CLS] / [SEP]: they soak up most of it, and kept they leave one dark
// column and the rest a pale wash. The view's box shows them again (the widget's rollout_choice).
export const LEAVE_OUT_SPECIAL = true;

/** The reader's choice as the view and its picture draw it: {layer, dropSpecial, rowNorm} from
 * `choice` (the widget's rollout_choice: {layer, leave_out_special, rows_to_1}, each optional), a
 * layer outside the `nLayers` shown falling back to the last. */
export function matrixChoice(choice = {}, nLayers = 1) {
  const layer = Number.isInteger(choice.layer) && choice.layer >= 0 && choice.layer < nLayers ? choice.layer : nLayers - 1;
  return { layer, dropSpecial: choice.leave_out_special ?? LEAVE_OUT_SPECIAL, rowNorm: choice.rows_to_1 ?? false };
}

/** The names of the special tokens a matrix may leave out, as its box and captions say them: "[CLS] / [SEP]". */
export function specialNames(state) {
  return [...new Set((state.special ?? []).map((i) => state.tokens[i]))].join(" / ");
}

/**
 * The matrices as shown: without the special tokens' rows and columns (dropSpecial) and with
 * each row rescaled to sum to 1 (rowNorm). → {tokens, notes, values, shape, changes}, changes
 * saying what differs from the plain matrix ("without [CLS] / [SEP]", "each row to 1"), for captions.
 */
export function matrixShown(state, { dropSpecial = false, rowNorm = false } = {}) {
  const [nLayers, n] = state.shape;
  const special = new Set(dropSpecial ? state.special ?? [] : []);
  const keep = [...Array(n).keys()].filter((i) => !special.has(i));
  const notes = state.notes ?? [];
  const changes = [...(special.size ? [`without ${specialNames(state)}`] : []), ...(rowNorm ? ["each row to 1"] : [])];
  if (!special.size && !rowNorm) return { tokens: state.tokens, notes, values: state.values, shape: state.shape, changes };
  const m = keep.length;
  const values = new Float32Array(nLayers * m * m);
  for (let l = 0; l < nLayers; l++) {
    keep.forEach((row, r) => {
      let sum = 0;
      keep.forEach((col, c) => { sum += values[(l * m + r) * m + c] = state.values[(l * n + row) * n + col]; });
      if (rowNorm && sum > 0) for (let c = 0; c < m; c++) values[(l * m + r) * m + c] /= sum;
    });
  }
  return { tokens: keep.map((i) => state.tokens[i]), notes: keep.map((i) => notes[i] ?? ""), values, shape: [nLayers, m, m], changes };
}

function layerMax(values, layer, n) {
  let max = 1e-9;
  for (let i = layer * n * n; i < (layer + 1) * n * n; i++) max = Math.max(max, values[i]);
  return max;
}

/** The matrix's colour bar: 0 to the shown layer's largest value. */
export function matrixBar(shown, layer, label = "value") {
  const [, n] = shown.shape;
  return colorBar(`${label} (colour ÷ this layer's largest)`, 0, layerMax(shown.values, layer, n), attentionShade, { digits: 3 });
}

/**
 * One layer of the matrices (one blue, relative to the layer's largest value), one geometry for the
 * screen's canvas (labels: false, the cells alone) and for images (labels: title, the tokens
 * left of the rows and, turned, above the columns, at the cells' pitch, and the colour bar).
 * `state` is what matrixShown returns, with the view's title and layerLabel.
 */
export function matrixScene(state, layer, { title = "", labels = true } = {}) {
  const [, n] = state.shape;
  const cell = matrixCell(n);
  const labelWidth = Math.max(40, ...state.tokens.map((t) => textWidth(t, 11))) + 8;
  const width = Math.max(labelWidth + n * cell + 8, 6 + BAR_WIDTH + 8);
  // What the matrix shows (its layer, the tokens left out, rows rescaled), under the title,
  // wrapped to the picture's width: a short sentence's matrix is narrow.
  const what = labels ? wrapText([(state.layerLabel ?? defaultLayerLabel)(layer), ...(state.changes ?? [])].join(" · "), width - 12, 11) : [];
  const [left, top] = labels ? [labelWidth, 30 + what.length * 15 + labelWidth] : [0, 0];
  const s = createScene(labels ? width : n * cell, top + n * cell + (labels ? 16 + BAR_HEIGHT : 0), { background: labels });
  if (labels) {
    s.text(6, 12, title, { role: "title" });
    what.forEach((line, i) => { s.text(6, 28 + i * 15, line, { size: 11, role: "subtitle" }); });
    state.tokens.forEach((token, i) => {
      s.text(left - 4, top + (i + 0.5) * cell, token, { anchor: "end", size: 11, role: "row-label" });
      s.text(left + (i + 0.5) * cell, top - 4, token, { size: 11, rotate: -90, role: "col-label" });
    });
  }
  // One raster, a pixel a cell (the blue of attentionShade): 512 tokens are 262k cells, too many
  // rects for an image or a picture.
  const base = layer * n * n;
  const max = layerMax(state.values, layer, n);
  const rgba = new Uint8ClampedArray(n * n * 4);
  for (let i = 0; i < n * n; i++) {
    const v = state.values[base + i];
    if (v > 0) rgba.set([...ATTENTION_RGB, Math.round(255 * Math.min(1, v / max))], i * 4);
  }
  s.raster(left, top, n * cell, n * cell, n, n, rgba);
  if (labels) colorBarScene(s, 6, top + n * cell + 10, matrixBar(state, layer, state.valueLabel));
  return s.scene;
}

/**
 * createMatrixView(container) → {update(state), destroy()}: one token × token matrix per layer.
 * state: {title, tokens, values: Float32Array(L·n·n), shape: [L, n, n], choice?: the widget's
 *         rollout_choice (matrixChoice: the layer, last by default, and the boxes), layerLabel?,
 *         special?: [token indices the view may leave out], valueLabel?}
 * Colours are relative to the largest value of the shown layer, so each layer uses the full scale.
 * Hover says "row token ← column token: value" (row i takes that much from column j).
 */
/** The matrix as an image from its state alone: the state's layer, special tokens and rows as its
 * choice says (matrixChoice); maxTokens: its first rows and columns only (a picture of a long input
 * keeps its size). */
export function matrixImage(fullState, { maxTokens = Infinity, ...options } = {}) {
  const [nLayers, n] = fullState.shape;
  let state = fullState;
  if (n > maxTokens) {
    const values = new Float32Array(nLayers * maxTokens * maxTokens);
    for (let l = 0; l < nLayers; l++) {
      for (let r = 0; r < maxTokens; r++) {
        const from = (l * n + r) * n;
        values.set(fullState.values.subarray(from, from + maxTokens), (l * maxTokens + r) * maxTokens);
      }
    }
    state = { ...fullState, values, shape: [nLayers, maxTokens, maxTokens], tokens: fullState.tokens.slice(0, maxTokens),
      notes: (fullState.notes ?? []).slice(0, maxTokens), special: (fullState.special ?? []).filter((i) => i < maxTokens),
      layerLabel: (l) => `${(fullState.layerLabel ?? defaultLayerLabel)(l)} (the first ${maxTokens} of ${n.toLocaleString("en")} tokens)` };
  }
  const { layer, dropSpecial, rowNorm } = matrixChoice(state.choice, nLayers);
  return matrixScene({ ...state, ...matrixShown(state, { dropSpecial, rowNorm }) }, layer, options);
}

/** options.lead(bar): puts the view's own controls first in the options row (the rollout view's mode);
 * options.onChoice(choice): the reader chose a layer or ticked a box (the widget keeps it as
 * rollout_choice, {layer, leave_out_special, rows_to_1}, and sends it back as state.choice). */
export function createMatrixView(container, { lead = undefined, onChoice = undefined } = {}) {
  const root = el("div", "attnscope-matrix-view", container);
  const title = el("div", "attnscope-matrix-title", root);
  const bar = el("div", "attnscope-matrix-options", root);
  lead?.(bar);
  // Why there is no matrix (the kernel's {error}), in place of it; the lead controls stay, to choose another.
  const message = el("div", "attnscope-status attnscope-matrix-message", root);
  message.hidden = true;
  const select = el("select", "attnscope-matrix-layer", bar);
  select.setAttribute("aria-label", "Layer");
  const option = (className, text, checked) => {
    const label = el("label", "attnscope-control", bar);
    const box = el("input", className, label);
    box.type = "checkbox";
    box.checked = checked;
    el("span", "", label).textContent = text;
    box.addEventListener("change", chosen);
    return box;
  };
  const dropBox = option("attnscope-matrix-drop-special", "Leave out [CLS] / [SEP]", LEAVE_OUT_SPECIAL);
  const normBox = option("attnscope-matrix-row-norm", "Each row to 1", false);
  const legend = el("div", "attnscope-legends", root);
  const legendBar = el("div", "", legend);
  const grid = el("div", "attnscope-matrix-grid", root);
  const topLabels = el("div", "attnscope-matrix-top", grid);
  const leftLabels = el("div", "attnscope-matrix-left", grid);
  const canvas = el("canvas", "attnscope-matrix", grid);
  const tooltip = el("div", "attnscope-tooltip", root);
  tooltip.hidden = true;
  let state = null;
  let shown = null;
  let layer = null;

  let derived = null; // matrixShown's answer, recomputed only when the data or an option changes
  let derivedFrom = [];
  function draw() {
    const from = [state.values, state.tokens, state.notes, dropBox.checked, normBox.checked];
    if (from.some((part, i) => part !== derivedFrom[i])) {
      derived = matrixShown(state, { dropSpecial: dropBox.checked, rowNorm: normBox.checked });
      derivedFrom = from;
    }
    shown = { ...state, ...derived };
    const [, n] = shown.shape;
    const cell = matrixCell(n);
    const ctx = sizeCanvas(canvas, n * cell, n * cell);
    if (ctx) drawScene(ctx, matrixScene(shown, layer, { labels: false }));
    for (const labels of [topLabels, leftLabels]) {
      labels.replaceChildren();
      shown.tokens.forEach((token, i) => {
        const label = el("span", "", labels);
        label.textContent = token;
        if (shown.notes[i]) label.title = shown.notes[i];
        label.style[labels === topLabels ? "width" : "height"] = `${cell}px`;
      });
    }
    renderColorBar(legendBar, matrixBar(shown, layer, state.valueLabel));
    canvas.dataset.n = String(n);
    canvas.dataset.layer = String(layer);
    select.value = String(layer);
  }

  // Drawn at once; the widget keeps the choice for the picture and the saved page.
  function chosen() {
    layer = Number(select.value);
    draw();
    onChoice?.({ layer, leave_out_special: dropBox.checked, rows_to_1: normBox.checked });
  }
  select.addEventListener("change", chosen);
  canvas.addEventListener("mousemove", (event) => {
    if (!shown) return;
    const [x, y] = pointerIn(canvas, event);
    const [, n] = shown.shape;
    const hit = gridCellAt(x, y, matrixCell(n), n, n);
    if (!hit) { tooltip.hidden = true; return; }
    const value = shown.values[layer * n * n + hit.row * n + hit.col];
    const caption = (i) => tokenCaption(shown.tokens[i], shown.notes[i]);
    tooltip.textContent = `${caption(hit.row)} (row) ← ${caption(hit.col)} (column): ${formatValue(value, 3)}`;
    placeTooltip(tooltip, canvas, x, y);
  });
  canvas.addEventListener("mouseleave", () => { tooltip.hidden = true; });

  const drawn = [title, select, dropBox.parentElement, normBox.parentElement, legend, grid];
  function showMatrix(shown) {
    message.hidden = shown;
    for (const node of drawn) node.style.display = shown ? "" : "none";
  }

  return {
    /** Says why there is no matrix, in its place (textContent: never HTML). */
    say(text) {
      message.textContent = text;
      showMatrix(false);
      state = null;
      shown = null;
    },
    update(next) {
      if (state === next) return;
      showMatrix(true);
      const [nLayers] = next.shape;
      const label = next.layerLabel ?? defaultLayerLabel;
      select.replaceChildren(); // rebuilt each time: the labels may change with the same count
      for (let i = 0; i < nLayers; i++) {
        const choice = el("option", "", select);
        choice.value = String(i);
        choice.textContent = label(i);
      }
      const choice = matrixChoice(next.choice, nLayers); // the widget's (rollout_choice)
      layer = choice.layer;
      dropBox.checked = choice.dropSpecial;
      normBox.checked = choice.rowNorm;
      title.textContent = next.title;
      // The box keeps the reader's choice; it names the model's own special tokens (<s> / </s> too).
      dropBox.parentElement.hidden = !next.special?.length;
      if (next.special?.length) dropBox.nextElementSibling.textContent = `Leave out ${specialNames(next)}`;
      state = next;
      draw();
    },
    ...imageMethods(({ title: heading = "" } = {}) => {
      if (!state) throw new Error("nothing drawn yet");
      return matrixScene(shown, layer, { title: heading });
    }),
    destroy() { root.remove(); },
  };
}
