// The analysis view's head clustering scatter (Clark et al. §6: MDS of Jensen–Shannon distances
// between heads), coloured by layer or behaviour; hovering a point shows the head's thumbnail.
import { interpolateBlues, interpolateViridis } from "d3-scale-chromatic";
import { BEHAVIOURS } from "../transport/contract.js";
import { el, placeTooltip, pointerIn, sizeCanvas } from "../drawing/dom.js";
import { headLabel, layerText } from "../drawing/labels.js";
import { createScene, drawScene, imageMethods } from "../drawing/scene.js";
import { textWidth } from "../drawing/svg.js";

const SCATTER_SIZE = 420; // px a side of the plot when the view's width is not known
const SCATTER_MAX_SIDE = 640;
const SCATTER_MIN_SIDE = 160; // a flat layout still gets some height
const SCATTER_PAD = 16;
const POINT_RADIUS = 5;
const LEGEND_PITCH = 18;
// A mid-grey ring round each point: viridis's dark end (layer 0) was near invisible on the dark
// theme's background, and its yellow end is faint on white.
const POINT_RING = { stroke: "#8c8c8c", strokeWidth: 1 };
const FAR_COLOR = "#888";
const FAR_NOTE = "far out: drawn on the edge";
// One colour per behaviour that formulas.BEHAVIOURS names (through js/transport/contract.js), in its order;
// "other" grey.
const BEHAVIOUR_PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
export const BEHAVIOUR_COLORS = Object.fromEntries(
  BEHAVIOURS.map((name, i) => [name, name === "other" ? "#9e9e9e" : BEHAVIOUR_PALETTE[i % BEHAVIOUR_PALETTE.length]]),
);

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
    s.circle(x, y, POINT_RADIUS, scatterColor(state, colorBy, i), "point", POINT_RING);
    if (off[2 * i] || off[2 * i + 1]) farArrow(s, x, y, off[2 * i], off[2 * i + 1]);
  }
  const x = layout.width + 14;
  legend.forEach(([name, color], i) => {
    const y = top + 16 + i * LEGEND_PITCH;
    if (color) s.circle(x, y, 5, color, "legend", POINT_RING);
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
 * createHeadScatterView(container, {onOpenHead(layer, head), onColor(colorBy)}) → {update(state), destroy()}
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

  // Drawn at once; the widget keeps the choice (analysis_choice) for the picture and the saved page.
  select.addEventListener("change", () => { colorBy = select.value; draw(); callbacks.onColor?.(colorBy); });
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
      colorBy = next.behaviours ? next.colorBy ?? "behaviour" : "layer"; // the widget's choice (analysis_choice)
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
