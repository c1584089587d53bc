// The analysis view's layer × head heatmaps (head statistics, importance, syntax accuracy, sinks):
// a cell per head, coloured by the chosen measure; a click opens the head. Plain data in;
// heads are labelled "layer-head", counted from 0 (labels.js).
import { interpolateViridis, schemeTableau10 } from "d3-scale-chromatic";
import { divergingColor, maxAbs } from "../drawing/colors.js";
import { el, placeTooltip, pointerIn, sizeCanvas } from "../drawing/dom.js";
import { createGrid, gridCellAt, gridSceneLabels } from "../drawing/grid.js";
import { headLabel, layerText } from "../drawing/labels.js";
import {
  BAR_HEIGHT, BAR_WIDTH, colorBar, colorBarScene, formatValue, KEY_PITCH, keyLayout, keyMinWidth, keyScene, renderColorBar, renderKey,
} from "../drawing/legend.js";
import { createScene, drawScene, imageMethods } from "../drawing/scene.js";

export const HEATMAP_CELL = 28;
// A tall map (a 30-layer decoder) on screen: its cells shrink to this, no less, so that the map and
// its colour key fit the widget's one screen (28 px rows made 30 layers 984 px, past the view's
// height: the last layers and the key were out of sight below).
export const LEAST_CELL = 14;
/** A column's label: the head's number, or the analysis's own column (a layout of layers × kinds
 * of token: state.columns = [{label, name}]). */
const columnTexts = (state) => (state.columns ? state.columns.map((c) => c.label)
  : Array.from({ length: state.nHeads }, (_, h) => String(h)));
const cellName = (state, layer, col) => (state.columns ? `${layerText(layer)} · ${state.columns[col].name}` : headLabel(layer, col));

/** The head under heatmap coordinates (x, y): {layer, head}, or null outside the grid. */
export function cellAt(x, y, cellSize, nLayers, nHeads) {
  const cell = gridCellAt(x, y, cellSize, nLayers, nHeads);
  return cell && { layer: cell.row, head: cell.col };
}

/** Whether a measure holds a value below 0 (a loss change, a Δ log p): drawn on a scale about 0,
 * blue below and orange above (colors.js), where viridis from 0 drew every negative as 0. */
export const isSigned = (m) => !m.categories && Array.from(m.values).some((v) => Number.isFinite(v) && v < 0);
/** A measure's top of scale: its declared max, or its largest finite value; a signed one's is its
 * largest magnitude (a kernel's max is the largest value, and a larger fall would be cut). */
const maxOf = (m) => (isSigned(m) ? Math.max(1e-9, m.max ?? 0, maxAbs(m.values))
  : m.max ?? Math.max(1e-9, ...Array.from(m.values).filter(Number.isFinite)));
/** An unsigned measure's bottom of scale: its declared min (steps count from 1), else 0. */
const lowOf = (m) => m.min ?? 0;

/** The heatmap as an image from its state alone, on the measure the state names. */
export function heatmapImage(state, options) {
  const measure = state.measures.find((m) => m.key === state.measure) ?? state.measures[0];
  return heatmapScene(state, measure, Math.max(maxOf(measure), 1e-9), options);
}

// A measure of categories (a head's role): values are indices into measure.categories, a first
// category named "none" light grey, the others Tableau's ten colours. Only "none" is grey: the
// patterns' first class, "heterogeneous", is a class, and grey it read as no pattern.
const NONE_COLOR = "#e4e4e4";
/** The colour of category `index` of a categorical measure whose categories are `categories`. */
export function categoryColor(index, categories = ["none"]) {
  const grey = categories[0] === "none";
  return grey && index === 0 ? NONE_COLOR : schemeTableau10[(index - (grey ? 1 : 0)) % schemeTableau10.length];
}
/** A categorical measure's legend: [[name, colour]] of the categories its heads have. */
export function categoryLegend(measure) {
  // includes, not a Set of the values: in the kernel's QuickJS a Set of 4 or more numbers read
  // from a Float32Array finds none but 0 (has(1) is false), and the picture kept one entry.
  return measure.categories.flatMap((name, i) => (measure.values.includes(i) ? [[name, categoryColor(i, measure.categories)]] : []));
}
// Decimals a measure's numbers are written with: none for one of integers (a step, a count).
const digitsOf = (measure, digits) => (measure.integer ? 0 : digits);
const cellValueText = (measure, value) => (measure.categories ? measure.categories[value] ?? "missing" : formatValue(value, digitsOf(measure, 3)));

/** The heatmap's colour bar: viridis from the measure's min (0 unless declared) to its largest
 * value; a signed measure's from −max to max about 0. */
export function heatmapBar(measure, max) {
  if (isSigned(measure)) {
    return colorBar(measure.label, -max, max, (t) => divergingColor((2 * t - 1) * max, max), { digits: digitsOf(measure, 2) });
  }
  return colorBar(measure.label, lowOf(measure), max, interpolateViridis, { digits: digitsOf(measure, 2) });
}

/** A cell's colour: its category's, viridis from min to `max`, or about 0 for a signed measure. */
function cellColor(measure, value, max, signed) {
  if (measure.categories) return categoryColor(value, measure.categories);
  const low = lowOf(measure);
  return signed ? divergingColor(value, max) : interpolateViridis(Math.min(1, Math.max(0, (value - low) / Math.max(max - low, 1e-9))));
}

/**
 * The heatmap's cells (viridis from 0 to `max`, grey where a value is missing), one geometry for
 * the screen's canvas (labels: false) and for images (labels: the title and the grid's labels).
 */
export function heatmapScene(state, measure, max, { title = "", labels = true, cell = HEATMAP_CELL } = {}) {
  const { nLayers, nHeads } = state;
  const [left, top] = labels ? [64, 48] : [0, 0];
  const key = labels && measure.categories ? categoryLegend(measure) : null;
  // A key wraps to the map's width (or its widest entry's); a colour bar keeps its own.
  const width = !labels ? nHeads * cell
    : Math.max(left + nHeads * cell + 8, 6 + BAR_WIDTH + 8, key ? 12 + keyMinWidth(key) : 0);
  const legendHeight = !labels ? 0 : key ? 14 + keyLayout(key, width - 12).rows * KEY_PITCH : 16 + BAR_HEIGHT;
  const s = createScene(width, top + nLayers * cell + legendHeight, { background: labels });
  const signed = isSigned(measure);
  if (labels) {
    const highest = formatValue(max, digitsOf(measure, 2));
    const lowest = lowOf(measure) === 0 ? "0" : formatValue(lowOf(measure), digitsOf(measure, 2));
    const range = measure.categories ? "" : signed ? ` (−${highest} to ${highest})` : ` (${lowest} to ${highest})`;
    s.text(6, 12, `${title}${title ? " · " : ""}${measure.label}${range}`, { role: "title" });
    gridSceneLabels(s, {
      left, top, cell, columnY: 36,
      columnTexts: columnTexts(state),
      rowTexts: Array.from({ length: nLayers }, (_, l) => layerText(l)),
    });
  }
  for (let l = 0; l < nLayers; l++) {
    for (let h = 0; h < nHeads; h++) {
      const value = measure.values[l * nHeads + h];
      // Missing (NaN) is grey; ±∞ is the scale's end it lies beyond.
      const fill = Number.isNaN(value) ? "#bbb" : cellColor(measure, value, max, signed);
      s.rect(left + h * cell, top + l * cell, cell - 1, cell - 1, fill);
    }
  }
  if (key) keyScene(s, 6, top + nLayers * cell + 8, key, width - 12);
  else if (labels) colorBarScene(s, 6, top + nLayers * cell + 10, heatmapBar(measure, max));
  return s.scene;
}

/**
 * createHeadMapView(container, {onOpenHead(layer, head), onMeasure(key)}) → {update(state), destroy()}
 * state: {nLayers, nHeads, measures: [{key, label, values: Float32Array(L·H), max?, min?, categories?, integer?}], measure,
 *         columns?: [{label, name}] (the columns are these, not heads: nHeads of them, none opens)}
 * (categories: the names of a categorical measure's values, 0, 1, ...; the first is "none";
 * integer: its values are whole numbers, written without decimals)
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
  let chosen = null; // state.measure, or the reader's since (its onMeasure not yet come back)
  let cell = HEATMAP_CELL;

  const current = () => state.measures.find((m) => m.key === chosen) ?? state.measures[0];

  /** The row pitch that lets the whole map and its key fit the scrolling body's height, between
   * LEAST_CELL and HEATMAP_CELL (28 where nothing is laid out yet: hidden, or no body). */
  function fittingCell() {
    const body = root.closest(".attnscope-body");
    if (!state || !body?.clientHeight) return cell;
    const rest = body.scrollHeight - state.nLayers * cell; // what the body holds beside the map's rows
    return Math.max(LEAST_CELL, Math.min(HEATMAP_CELL, Math.floor((body.clientHeight - rest) / state.nLayers)));
  }

  function refit() {
    const next = fittingCell();
    if (next === cell) return;
    cell = next;
    grid.label(columnTexts(state), Array.from({ length: state.nLayers }, (_, l) => layerText(l)), cell);
    draw();
  }
  const resizing = typeof ResizeObserver === "function" ? new ResizeObserver(() => { if (state) refit(); }) : null;

  function draw() {
    const measure = current();
    if (!measure) return;
    const { nLayers, nHeads } = state;
    const max = Math.max(maxOf(measure), 1e-9);
    const ctx = sizeCanvas(canvas, nHeads * cell, nLayers * cell);
    if (ctx) drawScene(ctx, heatmapScene(state, measure, max, { labels: false, cell }));
    canvas.dataset.cells = String(nLayers * nHeads);
    canvas.dataset.measure = measure.key;
    select.value = measure.key;
    // The bar is a child of the key's row, not the row itself: as the row (a flex row, its items
    // centred) the bar's column spread over the view's width and stood centred, far from the map.
    legend.replaceChildren();
    if (measure.categories) renderKey(legend, categoryLegend(measure));
    else renderColorBar(el("div", "", legend), heatmapBar(measure, max));
  }

  // Drawn at once; the widget keeps the choice (analysis_choice) for the picture and the saved page.
  select.addEventListener("change", () => { chosen = select.value; draw(); callbacks.onMeasure?.(chosen); });
  canvas.addEventListener("mousemove", (event) => {
    if (!state) return;
    const [x, y] = pointerIn(canvas, event);
    const at = cellAt(x, y, cell, state.nLayers, state.nHeads);
    if (!at) { tooltip.hidden = true; return; }
    const measure = current();
    const value = measure.values[at.layer * state.nHeads + at.head];
    tooltip.textContent = `${cellName(state, at.layer, at.head)} · ${measure.label}: ${cellValueText(measure, value)}`;
    placeTooltip(tooltip, canvas, x, y);
  });
  canvas.addEventListener("mouseleave", () => { tooltip.hidden = true; });
  canvas.addEventListener("click", (event) => {
    if (!state) return;
    const [x, y] = pointerIn(canvas, event);
    const at = cellAt(x, y, cell, state.nLayers, state.nHeads);
    if (at && !state.columns) callbacks.onOpenHead?.(at.layer, at.head); // a kind of token is no head to open
  });

  return {
    update(next) {
      if (state === next) return;
      const keys = next.measures.map((m) => m.key);
      chosen = keys.includes(next.measure) ? next.measure : keys[0]; // the widget's choice (analysis_choice)
      state = next;
      select.replaceChildren();
      for (const m of next.measures) {
        const option = el("option", "", select);
        option.value = m.key;
        option.textContent = m.label;
      }
      grid.label(columnTexts(next), Array.from({ length: next.nLayers }, (_, l) => layerText(l)), cell);
      draw();
      refit();
      const body = root.closest(".attnscope-body");
      if (resizing && body) resizing.observe(body);
    },
    ...imageMethods(({ title = "" } = {}) => {
      if (!state) throw new Error("nothing drawn yet");
      const measure = current();
      return heatmapScene(state, measure, Math.max(maxOf(measure), 1e-9), { title });
    }),
    destroy() { resizing?.disconnect(); root.remove(); },
  };
}
