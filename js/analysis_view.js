// Analysis views: layer × head heatmaps (head statistics, importance, syntax accuracy), the head
// clustering scatter (MDS of Jensen–Shannon distances) and token × token matrices (rollout).
// They take plain data; heads are labelled "layer-head", counted from 0 (labels.js).
import { interpolateBlues, interpolateViridis } from "d3-scale-chromatic";
import { ATTENTION_RGB, attentionShade } from "./colors.js";
import { el, placeTooltip, pointerIn, sizeCanvas, tokenCaption } from "./dom.js";
import { BEHAVIOURS } from "./contract.js";
import { createGrid, gridCellAt, gridSceneLabels } from "./grid.js";
import { headLabel, layerText } from "./labels.js";
import { BAR_HEIGHT, BAR_WIDTH, colorBar, colorBarScene, renderColorBar } from "./legend.js";
import { createScene, drawScene, imageMethods } from "./scene.js";
import { textWidth, wrapText } from "./svg.js";

export const HEATMAP_CELL = 28;
const SCATTER_SIZE = 420; // px a side of the plot when the view's width is not known
const SCATTER_MAX_SIDE = 640;
const SCATTER_MIN_SIDE = 160; // a flat layout still gets some height
const SCATTER_PAD = 16;
const POINT_RADIUS = 5;
const LEGEND_PITCH = 18;
const FAR_COLOR = "#888";
const FAR_NOTE = "far out: drawn on the edge";
const MATRIX_CELL_MAX = 28;
const MATRIX_SIZE = 460;

// One colour per behaviour that analysis.BEHAVIOURS names (through js/contract.js), in its order;
// "other" grey.
const BEHAVIOUR_PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
export const BEHAVIOUR_COLORS = Object.fromEntries(
  BEHAVIOURS.map((name, i) => [name, name === "other" ? "#9e9e9e" : BEHAVIOUR_PALETTE[i % BEHAVIOUR_PALETTE.length]]),
);

/** The head under heatmap coordinates (x, y): {layer, head}, or null outside the grid. */
export function cellAt(x, y, cellSize, nLayers, nHeads) {
  const cell = gridCellAt(x, y, cellSize, nLayers, nHeads);
  return cell && { layer: cell.row, head: cell.col };
}

function format(value, digits) {
  if (Number.isNaN(value)) return "n/a";
  if (!Number.isFinite(value)) return value > 0 ? "∞" : "−∞";
  return value.toFixed(digits);
}

/** A measure's top of scale: its declared max, or its largest finite value. */
const maxOf = (m) => m.max ?? Math.max(1e-9, ...Array.from(m.values).filter(Number.isFinite));

/** The heatmap as an image from its state alone, on the measure the state names. */
export function heatmapImage(state, options) {
  const measure = state.measures.find((m) => m.key === state.measure) ?? state.measures[0];
  return heatmapScene(state, measure, Math.max(maxOf(measure), 1e-9), options);
}

/** The heatmap's colour bar: viridis from 0 to the measure's largest value. */
export function heatmapBar(measure, max) {
  return colorBar(measure.label, 0, max, interpolateViridis);
}

/**
 * The heatmap's cells (viridis from 0 to `max`, grey where a value is missing), one geometry for
 * the screen's canvas (labels: false) and for images (labels: the title and the grid's labels).
 */
export function heatmapScene(state, measure, max, { title = "", labels = true } = {}) {
  const { nLayers, nHeads } = state;
  const [left, top] = labels ? [64, 48] : [0, 0];
  const width = labels ? Math.max(left + nHeads * HEATMAP_CELL + 8, 6 + BAR_WIDTH + 8) : nHeads * HEATMAP_CELL;
  const s = createScene(width, top + nLayers * HEATMAP_CELL + (labels ? 16 + BAR_HEIGHT : 0), { background: labels });
  if (labels) {
    s.text(6, 12, `${title}${title ? " · " : ""}${measure.label} (0 to ${format(max, 2)})`, { role: "title" });
    gridSceneLabels(s, {
      left, top, cell: HEATMAP_CELL, columnY: 36,
      columnTexts: Array.from({ length: nHeads }, (_, h) => String(h)),
      rowTexts: Array.from({ length: nLayers }, (_, l) => layerText(l)),
    });
  }
  for (let l = 0; l < nLayers; l++) {
    for (let h = 0; h < nHeads; h++) {
      const value = measure.values[l * nHeads + h];
      // Missing (NaN) is grey; ±∞ is the scale's end it lies beyond.
      const fill = Number.isNaN(value) ? "#bbb" : interpolateViridis(Math.min(1, Math.max(0, value / max)));
      s.rect(left + h * HEATMAP_CELL, top + l * HEATMAP_CELL, HEATMAP_CELL - 1, HEATMAP_CELL - 1, fill);
    }
  }
  if (labels) colorBarScene(s, 6, top + nLayers * HEATMAP_CELL + 10, heatmapBar(measure, max));
  return s.scene;
}

/**
 * createHeadMapView(container, {onOpenHead(layer, head)}) → {update(state), destroy()}
 * state: {nLayers, nHeads, measures: [{key, label, values: Float32Array(L·H), max?}], measure}
 */
export function createHeadMapView(container, callbacks = {}) {
  const root = el("div", "attnscope-headmap-view", container);
  const select = el("select", "attnscope-measure", root);
  select.setAttribute("aria-label", "Measure");
  const grid = createGrid(root, HEATMAP_CELL, {
    frame: "attnscope-headmap-grid", columns: "attnscope-headmap-columns", rows: "attnscope-headmap-rows", canvas: "attnscope-headmap",
  });
  const { canvas } = grid;
  const legend = el("div", "attnscope-legend", root);
  const tooltip = el("div", "attnscope-tooltip", root);
  tooltip.hidden = true;
  let state = null;
  let chosen = null;

  const current = () => state.measures.find((m) => m.key === chosen) ?? state.measures[0];

  function draw() {
    const measure = current();
    if (!measure) return;
    const { nLayers, nHeads } = state;
    const max = Math.max(maxOf(measure), 1e-9);
    const ctx = sizeCanvas(canvas, nHeads * HEATMAP_CELL, nLayers * HEATMAP_CELL);
    if (ctx) drawScene(ctx, heatmapScene(state, measure, max, { labels: false }));
    canvas.dataset.cells = String(nLayers * nHeads);
    canvas.dataset.measure = measure.key;
    select.value = measure.key;
    renderColorBar(legend, heatmapBar(measure, max));
  }

  select.addEventListener("change", () => { chosen = select.value; draw(); });
  canvas.addEventListener("mousemove", (event) => {
    if (!state) return;
    const [x, y] = pointerIn(canvas, event);
    const cell = cellAt(x, y, HEATMAP_CELL, state.nLayers, state.nHeads);
    if (!cell) { tooltip.hidden = true; return; }
    const measure = current();
    const value = measure.values[cell.layer * state.nHeads + cell.head];
    tooltip.textContent = `${headLabel(cell.layer, cell.head)} · ${measure.label}: ${format(value, 3)}`;
    placeTooltip(tooltip, canvas, x, y);
  });
  canvas.addEventListener("mouseleave", () => { tooltip.hidden = true; });
  canvas.addEventListener("click", (event) => {
    if (!state) return;
    const [x, y] = pointerIn(canvas, event);
    const cell = cellAt(x, y, HEATMAP_CELL, state.nLayers, state.nHeads);
    if (cell) callbacks.onOpenHead?.(cell.layer, cell.head);
  });

  return {
    update(next) {
      if (state === next) return;
      const keys = next.measures.map((m) => m.key);
      const sameMeasures = state && state.measures.length === keys.length && state.measures.every((m, i) => m.key === keys[i]);
      if (!sameMeasures || !keys.includes(chosen)) chosen = keys.includes(next.measure) ? next.measure : keys[0];
      if (state?.measure !== next.measure && keys.includes(next.measure) && sameMeasures) chosen = next.measure;
      state = next;
      select.replaceChildren();
      for (const m of next.measures) {
        const option = el("option", "", select);
        option.value = m.key;
        option.textContent = m.label;
      }
      grid.label(Array.from({ length: next.nHeads }, (_, h) => String(h)), Array.from({ length: next.nLayers }, (_, l) => layerText(l)));
      draw();
    },
    ...imageMethods(({ title = "" } = {}) => {
      if (!state) throw new Error("nothing drawn yet");
      const measure = current();
      return heatmapScene(state, measure, Math.max(maxOf(measure), 1e-9), { title });
    }),
    destroy() { root.remove(); },
  };
}

/**
 * The part of one axis the scatter shows, [lo, hi] of the sorted `values`: all of them, less a few
 * heads alone at either end past a gap wider than a third of the rest's span (a quarter of the
 * axis). MDS puts a head unlike every other far out; fitted whole, that one head would squeeze the
 * others into a corner of a mostly empty plot. At most one head in 20 at each end is left out, and
 * none of fewer than 10: a group far out is a cluster, shown as it is.
 */
export function axisExtent(values) {
  const v = Float64Array.from(values).sort();
  let [lo, hi] = [0, v.length - 1];
  if (v.length >= 10) {
    const most = Math.max(1, Math.floor(v.length / 20));
    while (v.length - 1 - hi < most && v[hi] - v[hi - 1] > (v[hi - 1] - v[lo]) / 3) hi--;
    while (lo < most && v[lo + 1] - v[lo] > (v[hi] - v[lo + 1]) / 3) lo++;
  }
  return [v[lo], v[hi]];
}

/**
 * Where the scatter draws each point: one scale on both axes (MDS distances read the same in every
 * direction), as large as fits maxWidth × maxHeight less `pad` each side, and the plot sized to the
 * points' extent (axisExtent), not forced square. A point outside the extent is drawn on the
 * plot's edge, `off` giving the way it lies: [dx, dy] per point, each −1, 0 or 1.
 * → {width, height, xy: Float32Array(2n), off: Int8Array(2n), far: number (points off the extent)}
 */
export function scatterLayout(points, maxWidth, maxHeight = maxWidth, pad = SCATTER_PAD) {
  const n = Math.floor(points.length / 2);
  const [x0, x1] = axisExtent(Array.from({ length: n }, (_, i) => points[2 * i]));
  const [y0, y1] = axisExtent(Array.from({ length: n }, (_, i) => points[2 * i + 1]));
  const fits = (room, span) => (span > 0 ? (room - 2 * pad) / span : Infinity);
  const scale = Math.min(fits(maxWidth, x1 - x0), fits(maxHeight, y1 - y0));
  const k = Number.isFinite(scale) ? scale : 0; // all equal: centred
  const side = (span, max) => Math.min(max, Math.max(SCATTER_MIN_SIDE, span * k + 2 * pad));
  const width = side(x1 - x0, maxWidth);
  const height = side(y1 - y0, maxHeight);
  const xy = new Float32Array(2 * n);
  const off = new Int8Array(2 * n);
  let far = 0;
  for (let i = 0; i < n; i++) {
    const [x, y] = [points[2 * i], points[2 * i + 1]];
    off[2 * i] = x < x0 ? -1 : x > x1 ? 1 : 0;
    off[2 * i + 1] = y < y0 ? -1 : y > y1 ? 1 : 0;
    if (off[2 * i] || off[2 * i + 1]) far++;
    xy[2 * i] = width / 2 + (Math.min(x1, Math.max(x0, x)) - (x0 + x1) / 2) * k;
    xy[2 * i + 1] = height / 2 + (Math.min(y1, Math.max(y0, y)) - (y0 + y1) / 2) * k;
  }
  return { width, height, xy, off, far };
}

/** Index of the screen point nearest to (px, py) within radius, or -1. */
export function nearestPoint(px, py, screenPoints, radius) {
  let best = -1;
  let bestDistance = radius * radius;
  for (let i = 0; i < screenPoints.length / 2; i++) {
    const dx = screenPoints[2 * i] - px;
    const dy = screenPoints[2 * i + 1] - py;
    const d = dx * dx + dy * dy;
    if (d <= bestDistance) { best = i; bestDistance = d; }
  }
  return best;
}

const layerColor = (layer, nLayers) => interpolateViridis(nLayers > 1 ? layer / (nLayers - 1) : 0.5);

/** The colour of head `index` (layer-major) when points are coloured by "behaviour" or "layer". */
function scatterColor(state, colorBy, index) {
  if (colorBy === "behaviour" && state.behaviours) return BEHAVIOUR_COLORS[state.behaviours[index]] ?? BEHAVIOUR_COLORS.other;
  return layerColor(Math.floor(index / state.nHeads), state.nLayers);
}

/** The scatter's legend: [[name, colour]] of the behaviours present, or of every layer. */
export function scatterLegend(state, colorBy) {
  if (colorBy === "behaviour" && state.behaviours) {
    return Object.entries(BEHAVIOUR_COLORS).filter(([name]) => state.behaviours.includes(name));
  }
  return Array.from({ length: state.nLayers }, (_, l) => [layerText(l), layerColor(l, state.nLayers)]);
}

/** A short arrow from beside the point (x, y) outwards along (dx, dy): the head lies further that way. */
function farArrow(s, x, y, dx, dy) {
  const length = Math.hypot(dx, dy);
  const [ux, uy] = [dx / length, dy / length];
  const [from, to] = [POINT_RADIUS + 2, POINT_RADIUS + 10];
  const [tx, ty] = [x + ux * to, y + uy * to];
  s.segment(x + ux * from, y + uy * from, tx, ty, FAR_COLOR, 1.5);
  for (const turn of [0.5, -0.5]) { // the head: two strokes back from the tip
    const [c, d] = [Math.cos(Math.PI - turn), Math.sin(Math.PI - turn)];
    s.segment(tx, ty, tx + 4 * (ux * c - uy * d), ty + 4 * (ux * d + uy * c), FAR_COLOR, 1.5);
  }
}

/**
 * The scatter's geometry for a view `state.width` px wide (without one, a SCATTER_SIZE plot): the
 * legend's entries (scatterLegend's, and the arrow of heads far out, its colour null) and width,
 * and the points' layout (scatterLayout) in the room left of the legend, 240 to 640 px a side.
 * → {layout, legend: [[name, colour | null]], legendWidth}
 */
export function scatterPlan(state, colorBy) {
  const far = scatterLayout(state.points, SCATTER_MAX_SIDE).far; // which heads lie far out does not depend on the size
  const legend = [...scatterLegend(state, colorBy), ...(far ? [[FAR_NOTE, null]] : [])];
  const legendWidth = 24 + Math.max(0, ...legend.map(([name]) => textWidth(name, 11))) + 8;
  const room = state.width ? Math.floor(state.width) - legendWidth - 8 : SCATTER_SIZE;
  const side = Math.max(240, Math.min(SCATTER_MAX_SIDE, room));
  return { layout: scatterLayout(state.points, side, side), legend, legendWidth };
}

/**
 * The scatter: its points (scatterPlan) and, right of them, the legend of its colours (and of the
 * arrows of heads far out): one scene for the screen's canvas (labels: false) and for images
 * (labels: the title above).
 */
export function scatterScene(state, colorBy, { title = "", labels = true } = {}) {
  const { layout, legend, legendWidth } = scatterPlan(state, colorBy);
  const top = labels ? 24 : 0;
  const s = createScene(layout.width + legendWidth, top + Math.max(layout.height, 16 + legend.length * LEGEND_PITCH), { background: labels });
  if (labels) s.text(6, 12, title, { role: "title" });
  const { xy, off } = layout;
  for (let i = 0; i < xy.length / 2; i++) {
    const [x, y] = [xy[2 * i], top + xy[2 * i + 1]];
    s.circle(x, y, POINT_RADIUS, scatterColor(state, colorBy, i), "point");
    if (off[2 * i] || off[2 * i + 1]) farArrow(s, x, y, off[2 * i], off[2 * i + 1]);
  }
  const x = layout.width + 14;
  legend.forEach(([name, color], i) => {
    const y = top + 16 + i * LEGEND_PITCH;
    if (color) s.circle(x, y, 5, color, "legend");
    else farArrow(s, x - POINT_RADIUS - 6, y, 1, 0);
    s.text(x + 10, y, name, { size: 11, role: "legend" });
  });
  return s.scene;
}

function drawMap(canvas, values, shape, layer, head, size) {
  const [, nHeads, s] = shape;
  const ctx = sizeCanvas(canvas, size, size);
  if (!ctx) return;
  const base = (layer * nHeads + head) * s * s;
  const cell = size / s;
  for (let row = 0; row < s; row++) {
    for (let col = 0; col < s; col++) {
      ctx.fillStyle = interpolateBlues(values[base + row * s + col]);
      ctx.fillRect(col * cell, row * cell, Math.ceil(cell), Math.ceil(cell));
    }
  }
}

/**
 * createHeadScatterView(container, {onOpenHead(layer, head)}) → {update(state), destroy()}
 * state: {nLayers, nHeads, points: Float32Array(L·H·2), behaviours: [string] | null,
 *         colorBy: "layer" | "behaviour", thumbnails: {values, shape: [L, H, S, S]} | null}
 */
export function createHeadScatterView(container, callbacks = {}) {
  const root = el("div", "attnscope-scatter-view", container);
  const select = el("select", "attnscope-color-by", root);
  select.setAttribute("aria-label", "Colour by");
  for (const [value, text] of [["behaviour", "Colour by behaviour"], ["layer", "Colour by layer"]]) {
    const option = el("option", "", select);
    option.value = value;
    option.textContent = text;
  }
  const canvas = el("canvas", "attnscope-scatter", root);
  const tooltip = el("div", "attnscope-tooltip", root);
  const tooltipText = el("div", "", tooltip);
  const tooltipMap = el("canvas", "attnscope-tooltip-map", tooltip);
  tooltip.hidden = true;
  let state = null;
  let colorBy = null;
  let layout = null;

  function draw() {
    const scene = scatterScene(state, colorBy, { labels: false });
    const plan = scatterPlan(state, colorBy);
    layout = plan.layout;
    const ctx = sizeCanvas(canvas, scene.width, scene.height);
    // The legend's text is drawn on the canvas: it follows the widget's theme.
    if (ctx) drawScene(ctx, scene, { dark: root.closest(".attnscope-dark") !== null });
    canvas.setAttribute("aria-label", `Heads laid out by their distances; colours: ${plan.legend.map(([name]) => name).join(", ")}`);
    canvas.dataset.points = String(layout.xy.length / 2);
    canvas.dataset.positions = Array.from(layout.xy, (v) => v.toFixed(1)).join(","); // x,y of each head's point
    canvas.dataset.colorBy = colorBy;
    select.value = colorBy;
  }

  function pointUnder(event) {
    const [x, y] = pointerIn(canvas, event);
    return { index: nearestPoint(x, y, layout.xy, POINT_RADIUS + 3), x, y };
  }

  select.addEventListener("change", () => { colorBy = select.value; draw(); });
  canvas.addEventListener("mousemove", (event) => {
    if (!state) return;
    const { index, x, y } = pointUnder(event);
    if (index < 0) { tooltip.hidden = true; return; }
    const layer = Math.floor(index / state.nHeads);
    const head = index % state.nHeads;
    const behaviour = state.behaviours ? ` · ${state.behaviours[index]}` : "";
    const far = layout.off[2 * index] || layout.off[2 * index + 1] ? ` · ${FAR_NOTE}` : "";
    tooltipText.textContent = `${headLabel(layer, head)}${behaviour}${far}`;
    tooltipMap.hidden = !state.thumbnails;
    if (state.thumbnails) drawMap(tooltipMap, state.thumbnails.values, state.thumbnails.shape, layer, head, 96);
    placeTooltip(tooltip, canvas, x, y);
  });
  canvas.addEventListener("mouseleave", () => { tooltip.hidden = true; });
  canvas.addEventListener("click", (event) => {
    if (!state) return;
    const { index } = pointUnder(event);
    if (index >= 0) callbacks.onOpenHead?.(Math.floor(index / state.nHeads), index % state.nHeads);
  });

  return {
    update(next) {
      if (state === next) return;
      state = next;
      if (colorBy === null || (colorBy === "behaviour" && !next.behaviours)) colorBy = next.behaviours ? next.colorBy ?? "behaviour" : "layer";
      select.options[0].disabled = !next.behaviours;
      draw();
    },
    ...imageMethods(({ title = "" } = {}) => {
      if (!state) throw new Error("nothing drawn yet");
      return scatterScene(state, colorBy, { title });
    }),
    destroy() { root.remove(); },
  };
}

/** Cell size in px of an n × n matrix: about MATRIX_SIZE wide, 4 to MATRIX_CELL_MAX px a cell. */
export function matrixCell(n) {
  return Math.max(4, Math.min(MATRIX_CELL_MAX, Math.floor(MATRIX_SIZE / Math.max(n, 1))));
}

const defaultLayerLabel = layerText;

// Rollout opens without [CLS] / [SEP]: they soak up most of it, and kept they leave one dark
// column and the rest a pale wash. The view's box shows them again; pictures follow the default.
export const LEAVE_OUT_SPECIAL = true;

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
 * state: {title, tokens, values: Float32Array(L·n·n), shape: [L, n, n], layer, layerLabel?,
 *         special?: [token indices the view may leave out], valueLabel?}
 * Colours are relative to the largest value of the shown layer, so each layer uses the full scale.
 * Hover says "row token ← column token: value" (row i takes that much from column j).
 */
/** The matrix as an image from its state alone: the state's layer, the special tokens left out
 * as the view opens (LEAVE_OUT_SPECIAL), rows not rescaled; maxTokens: its first rows and columns
 * only (a picture of a long input keeps its size). */
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
  const shown = { ...state, ...matrixShown(state, { dropSpecial: LEAVE_OUT_SPECIAL }) };
  const layer = Math.min(Math.max(0, state.layer ?? shown.shape[0] - 1), shown.shape[0] - 1);
  return matrixScene(shown, layer, options);
}

export function createMatrixView(container) {
  const root = el("div", "attnscope-matrix-view", container);
  const title = el("div", "attnscope-matrix-title", root);
  const bar = el("div", "attnscope-matrix-options", root);
  const select = el("select", "attnscope-matrix-layer", bar);
  select.setAttribute("aria-label", "Layer");
  const option = (className, text, checked) => {
    const label = el("label", "attnscope-control", bar);
    const box = el("input", className, label);
    box.type = "checkbox";
    box.checked = checked;
    el("span", "", label).textContent = text;
    box.addEventListener("change", draw);
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

  select.addEventListener("change", () => { layer = Number(select.value); draw(); });
  canvas.addEventListener("mousemove", (event) => {
    if (!shown) return;
    const [x, y] = pointerIn(canvas, event);
    const [, n] = shown.shape;
    const hit = gridCellAt(x, y, matrixCell(n), n, n);
    if (!hit) { tooltip.hidden = true; return; }
    const value = shown.values[layer * n * n + hit.row * n + hit.col];
    const caption = (i) => tokenCaption(shown.tokens[i], shown.notes[i]);
    tooltip.textContent = `${caption(hit.row)} (row) ← ${caption(hit.col)} (column): ${format(value, 3)}`;
    placeTooltip(tooltip, canvas, x, y);
  });
  canvas.addEventListener("mouseleave", () => { tooltip.hidden = true; });

  return {
    update(next) {
      if (state === next) return;
      const [nLayers] = next.shape;
      const label = next.layerLabel ?? defaultLayerLabel;
      select.replaceChildren(); // rebuilt each time: the labels may change with the same count
      for (let i = 0; i < nLayers; i++) {
        const choice = el("option", "", select);
        choice.value = String(i);
        choice.textContent = label(i);
      }
      // The view's own choice wins once made; a new shape falls back to the given layer.
      if (layer === null || layer >= nLayers) layer = Math.min(Math.max(0, next.layer ?? nLayers - 1), nLayers - 1);
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
