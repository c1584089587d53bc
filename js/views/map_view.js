// The long-input map: one head's T × T attention (or the mean of the layer's heads) as a heatmap
// with zoom and pan. The whole map is a pooled overview (max or mean of each block, as HiGlass
// keeps levels); zoomed in, the view asks for the region it shows, pooled to its pixels, which is
// the exact attention once a block is one token pair, and then the tokens label the axes.
// Wheel zooms around the pointer, a drag pans, a double click shows the whole map, a click
// selects the row's token (the text view's selection).
import { ticks } from "d3-array";
import { OVERVIEW_BINS } from "../transport/contract.js";
import { ASIDE_RGB, ATTENTION_RGB, asideShade, attentionShade } from "../drawing/colors.js";
import { el, labelled, placeTooltip, pointerIn, select, sizeCanvas, tokenCaption } from "../drawing/dom.js";
import { BAR_HEIGHT, BAR_WIDTH, colorBar, colorBarScene, formatTick, renderColorBar } from "../drawing/legend.js";
import { createAsidePicker, createHeadPicker, focusHeadName } from "../controls/long_controls.js";
import { createScene, drawScene, imageMethods } from "../drawing/scene.js";
import { textWidth } from "../drawing/svg.js";
import { answered, declared, layerTitle, longCallbacks, longParams } from "./view_adapter.js";

const MAX_BINS = 256; // blocks a side the kernel pools a zoomed region into
const MIN_SPAN = 8; // tokens a side at the deepest zoom
const LABEL_PX = 10; // a token gets its label once its cells are this many px
const MARGIN = { left: 96, top: 84, right: 12, bottom: 12 }; // top: at most (columnRoom)
const LABEL_SIZE = 11;
// A zoom or pan is asked for once it rests this long: a wheel turned or a trackpad swiped sends
// events 16–50 ms apart, so a gesture is one request. It is part of every zoom's wait (the bench's
// zoom tile: 145–152 ms at 120 ms).
export const SETTLE_MS = 100;

/** The map's square in px for a view `width` px wide: 240 to 560. */
export function mapSize(width) {
  return Math.max(240, Math.min(560, Math.floor((width || 640) - MARGIN.left - MARGIN.right)));
}

const clampSpan = (a, b, n) => {
  const span = Math.min(n, Math.max(MIN_SPAN, b - a));
  const start = Math.max(0, Math.min(n - span, a));
  return [start, start + span];
};

/** The region zoomed by `factor` (< 1 zooms in) around the token position (fr, fc). */
export function zoomRegion(region, factor, fr, fc, n) {
  const [r0, r1] = clampSpan(fr - (fr - region.r0) * factor, fr + (region.r1 - fr) * factor, n);
  const [c0, c1] = clampSpan(fc - (fc - region.c0) * factor, fc + (region.c1 - fc) * factor, n);
  return { r0, r1, c0, c1 };
}

/** The region moved by (dr, dc) token positions, kept inside the map. */
export function panRegion(region, dr, dc, n) {
  const [r0, r1] = clampSpan(region.r0 + dr, region.r1 + dr, n);
  const [c0, c1] = clampSpan(region.c0 + dc, region.c1 + dc, n);
  return { r0, r1, c0, c1 };
}

export const wholeMap = (n) => ({ r0: 0, r1: n, c0: 0, c1: n });

/** What to ask the kernel for to draw `region`: whole tokens, pooled to at most MAX_BINS a side. */
export function tileRequest(region, n) {
  const rows = [Math.max(0, Math.floor(region.r0)), Math.min(n, Math.ceil(region.r1))];
  const cols = [Math.max(0, Math.floor(region.c0)), Math.min(n, Math.ceil(region.c1))];
  const full = rows[0] === 0 && rows[1] === n && cols[0] === 0 && cols[1] === n;
  return { rows, cols, bins: full ? Math.min(OVERVIEW_BINS, n) : MAX_BINS };
}

// Position p of a span [a, b) pooled into m bins falls in bin floor((p − a)·m / (b − a)) (exact_attention.bin_edges).
const binOf = (p, a, b, m) => Math.floor(((p - a) * m) / (b - a));
const firstOfBin = (bin, a, b, m) => a + Math.ceil((bin * (b - a)) / m);

/**
 * The region as a raster sampled from a tile (the exact tile of the region, or a coarser one
 * covering it): {rows, cols, values, asideAt(col) } at the tile's resolution inside the region
 * (at most 512 a side), each sample the block holding that position.
 */
export function regionSamples(tile, region) {
  const [ta, tb] = tile.rows;
  const [ua, ub] = tile.cols;
  const [m, k] = tile.shape;
  const pitchR = (tb - ta) / m; // tokens per block
  const pitchC = (ub - ua) / k;
  const rows = Math.max(1, Math.min(512, Math.ceil((region.r1 - region.r0) / pitchR)));
  const cols = Math.max(1, Math.min(512, Math.ceil((region.c1 - region.c0) / pitchC)));
  const values = new Float32Array(rows * cols);
  const colFirst = new Float64Array(cols);
  const colBins = new Int32Array(cols);
  for (let c = 0; c < cols; c++) {
    const p = Math.min(ub - 1, Math.max(ua, Math.floor(region.c0 + ((c + 0.5) * (region.c1 - region.c0)) / cols)));
    colBins[c] = Math.min(k - 1, binOf(p, ua, ub, k));
    colFirst[c] = firstOfBin(colBins[c], ua, ub, k);
  }
  for (let r = 0; r < rows; r++) {
    const p = Math.min(tb - 1, Math.max(ta, Math.floor(region.r0 + ((r + 0.5) * (region.r1 - region.r0)) / rows)));
    const bin = Math.min(m - 1, binOf(p, ta, tb, m));
    for (let c = 0; c < cols; c++) values[r * cols + c] = tile.values[bin * k + colBins[c]];
  }
  return { rows, cols, values, colFirst };
}

export const CLIP_QUANTILE = 0.995;

/**
 * The colour scales of a sampled region: blue up to the 99.5th percentile of the values not set
 * aside (a causal map's first rows hold weights of 1 that would leave the rest white; larger
 * values show at full colour and the bar says so), grey up to the largest set-aside value.
 */
export function regionScale(samples, aside) {
  let asideMax = 0;
  let largest = 0;
  const { rows, cols, values, colFirst } = samples;
  const kept = new Float32Array(rows * cols);
  let count = 0;
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const v = values[r * cols + c];
      if (!(v > 0)) continue;
      if (colFirst[c] < aside) asideMax = Math.max(asideMax, v);
      else {
        kept[count++] = v;
        largest = Math.max(largest, v);
      }
    }
  }
  // A typed sort (numeric, no comparator calls): this runs on every frame of a zoom.
  const sorted = kept.subarray(0, count).sort();
  const max = count ? sorted[Math.min(count - 1, Math.floor(CLIP_QUANTILE * count))] : 0;
  return { max: max || 1e-12, largest, asideMax: asideMax || 1e-12 };
}

function rasterOf(samples, scale, aside) {
  const { rows, cols, values, colFirst } = samples;
  const rgba = new Uint8ClampedArray(rows * cols * 4);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const set = colFirst[c] < aside;
      const t = Math.min(1, values[r * cols + c] / (set ? scale.asideMax : scale.max));
      const at = (r * cols + c) * 4;
      const [R, G, B] = set ? ASIDE_RGB : ATTENTION_RGB;
      rgba[at] = R;
      rgba[at + 1] = G;
      rgba[at + 2] = B;
      rgba[at + 3] = Math.round(255 * t);
    }
  }
  return rgba;
}

/** Axis marks for a span: every token's label once its cells are LABEL_PX wide, else positions. */
export function axisMarks(a, b, size, tokens) {
  const px = size / (b - a);
  if (px >= LABEL_PX) {
    const marks = [];
    for (let i = Math.max(0, Math.floor(a)); i < Math.min(tokens.length, Math.ceil(b)); i++) {
      const at = (i + 0.5 - a) * px;
      if (at >= 0 && at <= size) marks.push({ at, text: tokens[i], index: i, token: true });
    }
    return marks;
  }
  return ticks(a, b, 6).filter((t) => t >= a && t <= b).map((t) => ({ at: (t - a) * px, text: String(t), index: t, token: false }));
}

// The text's widest token label in px, once per text (a long one has thousands of tokens).
const widestToken = new WeakMap();
/** px above the map for its column labels as drawn (positions; zoomed in, tokens), up to
 * MARGIN.top, where a longer label is cut: a fixed room left a blank band over short labels.
 * Zoomed to tokens it fits the text's widest, so a pan does not move the map. */
export function columnRoom(marks, tokens) {
  let widest = 0;
  if (marks.some((m) => m.token)) {
    if (!widestToken.has(tokens)) widestToken.set(tokens, Math.max(0, ...tokens.map((t) => textWidth(t, LABEL_SIZE))));
    widest = widestToken.get(tokens);
  } else {
    widest = Math.max(0, ...marks.map((m) => textWidth(m.text, LABEL_SIZE)));
  }
  return Math.min(MARGIN.top, Math.max(24, Math.ceil(widest) + 12)); // 24: the axis title's line
}

/**
 * The map as a scene: the region's raster, axes (tokens or positions), the selected token's
 * row marked, title and colour bars in images. `state`: {tokens, n, region, tile, aside,
 * selected, head, layer, reduce, model}; labels: false for the screen's canvas (no title or bars).
 */
export function mapScene(state, size, { title = "", labels = true } = {}) {
  const { region, tile, aside, tokens } = state;
  const samples = regionSamples(tile, region);
  const scale = regionScale(samples, aside);
  const head = labels ? 40 : 0;
  const columns = axisMarks(region.c0, region.c1, size, tokens);
  const top = columnRoom(columns, tokens);
  const s = createScene(MARGIN.left + size + MARGIN.right, head + top + size + MARGIN.bottom + (labels ? BAR_HEIGHT + 12 : 0),
    { background: labels });
  if (labels) {
    s.text(8, 12, title || state.model || "", { role: "title" });
    s.text(8, 30, mapSubtitle(state), { size: 11, role: "subtitle" });
  }
  const x0 = MARGIN.left;
  const y0 = head + top;
  s.raster(x0, y0, size, size, samples.cols, samples.rows, rasterOf(samples, scale, aside));
  s.rect(x0 - 1, y0 - 1, size + 2, 1, "#888", "frame");
  s.rect(x0 - 1, y0 + size, size + 2, 1, "#888", "frame");
  for (const mark of axisMarks(region.r0, region.r1, size, tokens)) {
    s.text(x0 - 6, y0 + mark.at, mark.text, { anchor: "end", size: 11, role: mark.token ? "row-label" : "row-tick" });
  }
  for (const mark of columns) {
    s.text(x0 + mark.at, y0 - 6, mark.text, { size: LABEL_SIZE, rotate: -90, role: mark.token ? "col-label" : "col-tick" });
  }
  s.text(x0 - 6, y0 - 12, "query ↓  key →", { anchor: "end", size: 10, role: "axis-title" });
  if (state.selected >= region.r0 && state.selected < region.r1) {
    const y = y0 + ((state.selected + 0.5 - region.r0) * size) / (region.r1 - region.r0);
    s.segment(x0 - 4, y, x0, y, "#d62728", 3);
  }
  if (labels) {
    mapBars(samples, scale, aside, state.reduce).forEach((bar, i) => {
      colorBarScene(s, 8 + i * (BAR_WIDTH + 40), y0 + size + MARGIN.bottom + 4, bar);
    });
  }
  return { scene: s.scene, samples, scale, top };
}

function mapBars(samples, scale, aside, reduce) {
  const what = reduce === "mean" ? "mean of each block" : "max of each block";
  // The largest written as the bar's ticks are: a long text's small weights in exponent form, not "0.000".
  const clipped = scale.largest > scale.max ? ` (colour full from the 99.5th percentile; largest ${formatTick(scale.largest, 3)})` : "";
  const bars = [colorBar(`${what}${clipped}`, 0, scale.max, attentionShade, { digits: 3 })];
  if (aside > 0 && samples.colFirst[0] < aside) bars.push(colorBar(`first ${aside === 1 ? "token" : `${aside} tokens`} (set aside)`, 0, scale.asideMax, asideShade, { digits: 3 }));
  return bars;
}

export function mapSubtitle(state) {
  const { region, tile } = state;
  const span = `queries ${Math.floor(region.r0)}–${Math.ceil(region.r1) - 1}, keys ${Math.floor(region.c0)}–${Math.ceil(region.c1) - 1}`;
  const exact = tile.exact && tile.rows[0] <= region.r0 && tile.rows[1] >= region.r1 ? "exact" : `${state.reduce} of blocks`;
  // A map still refining says how much of it is in (its blocks are of the rows computed so far).
  const refining = tile.passesDone < tile.passes
    ? ` · refining: ${Math.round((100 * tile.passesDone) / tile.passes)}% of the rows so far` : "";
  const weighed = state.weighBy === "value_norm" ? "‖αf(x)‖ (α × value norm) · " : "";
  return `${weighed}${focusHeadName(state.head)}, layer ${state.layer} · ${span} of ${state.n} · ${exact}${refining}`;
}

/**
 * createMapView(container, callbacks) → {region(n), settled(n), update(state), toSvg, toPng, destroy}.
 * callbacks: onSelect(token), onHead(head), onReduce("max" | "mean"), onAside(n), onZoom()
 * (the region changed: redraw; settled() names what to ask for once it rests).
 * state: {tokens, notes, n, tile (the best data covering the region), aside, selected, head,
 *         nHeads, nKeyHeads, layer, reduce, model, width, message}
 */
export function createMapView(container, callbacks = {}) {
  const root = el("div", "attnscope-map-view", container);
  const bar = el("div", "attnscope-long-options", root);
  const heads = createHeadPicker(bar, (h) => callbacks.onHead?.(h));
  const reduce = select("attnscope-map-reduce", [["max", "max"], ["mean", "mean"]]);
  labelled(bar, "Blocks", reduce).title = "Zoomed out, each pixel is a block of token pairs: its largest weight (max) or its mean.";
  reduce.addEventListener("change", () => callbacks.onReduce?.(reduce.value));
  const aside = createAsidePicker(bar, (n) => callbacks.onAside?.(n));
  const reset = el("button", "attnscope-map-reset", bar);
  reset.type = "button";
  reset.textContent = "Whole map";
  const caption = el("div", "attnscope-map-caption", root);
  const legend = el("div", "attnscope-legends", root);
  const box = el("div", "attnscope-map-box", root);
  const canvas = el("canvas", "attnscope-map", box);
  el("div", "attnscope-hint", root).textContent = "Wheel to zoom, drag to pan, double-click for the whole map, click to select a query token.";
  const tooltip = el("div", "attnscope-tooltip", root);
  tooltip.hidden = true;
  let region = null;
  let settled = null;
  let n = 0;
  let timer = null;
  let state = null;
  let drawn = null; // {samples, size, top}
  // The pointer over the map, in client px: a zoom or pan moves the map under a still pointer,
  // so each redraw says again what is under it (the card would name the old pair).
  let pointer = null;

  function setRegion(next) {
    region = next;
    clearTimeout(timer);
    timer = setTimeout(() => { settled = region; timer = null; callbacks.onZoom?.(); }, SETTLE_MS);
    callbacks.onZoom?.();
  }
  const toToken = (x, y) => {
    const size = drawn?.size ?? 1;
    return [region.r0 + ((y - (drawn?.top ?? MARGIN.top)) / size) * (region.r1 - region.r0), region.c0 + ((x - MARGIN.left) / size) * (region.c1 - region.c0)];
  };
  canvas.addEventListener("wheel", (event) => {
    if (!region) return;
    event.preventDefault();
    pointer = { clientX: event.clientX, clientY: event.clientY };
    const [x, y] = pointerIn(canvas, event);
    const [r, c] = toToken(x, y);
    setRegion(zoomRegion(region, Math.exp(event.deltaY * 0.002), r, c, n));
  }, { passive: false });
  let drag = null;
  canvas.addEventListener("pointerdown", (event) => {
    drag = { x: event.clientX, y: event.clientY, region, moved: false };
    canvas.setPointerCapture?.(event.pointerId);
  });
  canvas.addEventListener("pointermove", (event) => {
    pointer = { clientX: event.clientX, clientY: event.clientY };
    if (drag && region) {
      const dx = event.clientX - drag.x;
      const dy = event.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
      if (drag.moved) {
        const size = drawn?.size ?? 1;
        const perPx = (drag.region.r1 - drag.region.r0) / size;
        setRegion(panRegion(drag.region, -dy * perPx, -dx * perPx, n));
        return;
      }
    }
    hover(event);
  });
  canvas.addEventListener("pointerup", (event) => {
    const click = drag && !drag.moved;
    drag = null;
    if (!click || !region) return;
    const [x, y] = pointerIn(canvas, event);
    const [r] = toToken(x, y);
    if (x >= MARGIN.left && r >= region.r0 && r < region.r1) callbacks.onSelect?.(Math.floor(r));
  });
  canvas.addEventListener("dblclick", () => { if (n) setRegion(wholeMap(n)); });
  reset.addEventListener("click", () => { if (n) setRegion(wholeMap(n)); });
  canvas.addEventListener("mouseleave", () => { tooltip.hidden = true; pointer = null; });

  function hover(event) {
    if (!drawn || !state) return;
    const [x, y] = pointerIn(canvas, event);
    const { samples, size } = drawn;
    const cx = x - MARGIN.left;
    const cy = y - drawn.top;
    if (cx < 0 || cy < 0 || cx >= size || cy >= size) { tooltip.hidden = true; return; }
    const r = Math.floor((cy / size) * samples.rows);
    const c = Math.floor((cx / size) * samples.cols);
    const [row, col] = toToken(x, y).map(Math.floor);
    const value = samples.values[r * samples.cols + c];
    const tile = state.tile;
    const exact = tile.exact;
    const who = (i) => `${tokenCaption(state.tokens[i], state.notes?.[i])} (${i})`;
    tooltip.textContent = exact
      ? `${who(row)} → ${who(col)}: ${value.toFixed(4)}`
      : `around ${who(row)} → ${who(col)}: ${state.reduce} of the block ${value.toFixed(4)}`;
    placeTooltip(tooltip, canvas, x, y);
  }

  return {
    /** The region shown now (the whole map at first, or after the tokens change). */
    region(count) {
      if (count !== n) { n = count; region = settled = wholeMap(n); }
      return region;
    },
    /** The region once zooming rests: what to ask the kernel for. */
    settled(count) {
      this.region(count);
      return settled;
    },
    update(next) {
      state = next;
      heads.update(next.nHeads, next.nKeyHeads, next.head);
      reduce.value = next.reduce;
      aside.update(next.aside);
      caption.textContent = next.message ?? "";
      if (!next.tile) return;
      const size = mapSize(next.width);
      const { scene, samples, scale, top } = mapScene({ ...next, region }, size, { labels: false });
      const ctx = sizeCanvas(canvas, scene.width, scene.height);
      // The only on-screen canvas with text: its labels follow the widget's theme.
      if (ctx) drawScene(ctx, scene, { dark: root.closest(".attnscope-dark") !== null });
      drawn = { samples, size, top };
      canvas.dataset.top = String(top); // where the map starts in the canvas, below its column labels
      canvas.dataset.exact = String(Boolean(next.tile.exact));
      canvas.dataset.region = [region.r0, region.r1, region.c0, region.c1].map((v) => Math.round(v)).join(",");
      canvas.dataset.tile = [...next.tile.rows, ...next.tile.cols].join(","); // the kernel's answer drawn
      caption.textContent = mapSubtitle({ ...next, region });
      legend.replaceChildren();
      for (const b of mapBars(samples, scale, next.aside, next.reduce)) renderColorBar(el("div", "", legend), b);
      if (pointer && !tooltip.hidden) hover(pointer);
    },
    ...imageMethods(({ title = "" } = {}) => {
      if (!state?.tile) throw new Error("nothing drawn yet");
      return mapScene({ ...state, region }, mapSize(state.width), { title }).scene;
    }),
    destroy() {
      clearTimeout(timer);
      root.remove();
    },
  };
}

/** @type {import("./view_adapter.js").ViewAdapter} */
export const adapter = {
  ...declared("map"),
  create(body, { setTraits, redraw }) {
    return createMapView(body, { ...longCallbacks(setTraits), onReduce: (reduce) => setTraits({ map_reduce: reduce }), onZoom: redraw });
  },
  draw(view, { get, long, width }) {
    const tokens = get("tokens");
    const n = tokens.length;
    const base = { ...longParams(get), reduce: get("map_reduce") };
    const region = view.region(n);
    // Large maps come in passes, each over a share of the rows: drawn at once, then refined.
    const overview = long.refined({ ...base, ...tileRequest(wholeMap(n), n) });
    const zoomed = long.refined({ ...base, ...tileRequest(view.settled(n), n) });
    // The zoomed tile once it came and still covers what is shown; the overview until then.
    const covers = (t) => t.n_tokens === n && t.rows[0] <= region.r0 && t.rows[1] >= region.r1 && t.cols[0] <= region.c0 && t.cols[1] >= region.c1;
    const tile = answered(zoomed, covers) ?? answered(overview, covers);
    view.update({ tokens, notes: get("token_notes"), n, tile, aside: get("sink_aside"), selected: get("focus_token"),
      head: get("focus_head"), nHeads: get("n_heads"), nKeyHeads: get("n_key_heads"), layer: get("layer"),
      reduce: get("map_reduce"), model: get("model_name"), weighBy: get("weigh_by"), width,
      message: (overview?.error || zoomed?.error) ?? "" });
    if (overview?.error || zoomed?.error) return "";
    if (!tile) return "computing…";
    if (tile !== zoomed) return "zooming…";
    return tile.passesDone < tile.passes ? "refining…" : "";
  },
  // The picture is the whole map (a saved output cannot zoom).
  picture({ get, long, width }, options) {
    const n = get("tokens").length;
    const overview = long.tile({ ...longParams(get), reduce: get("map_reduce"), ...tileRequest(wholeMap(n), n) });
    if (overview?.error) return overview.error;
    if (!overview) return "computing…";
    const state = { tokens: get("tokens"), notes: get("token_notes"), n, tile: overview, aside: get("sink_aside"),
      selected: get("focus_token"), head: get("focus_head"), layer: get("layer"), reduce: get("map_reduce"),
      model: get("model_name"), weighBy: get("weigh_by"), region: wholeMap(n) };
    return mapScene(state, mapSize(width), options).scene;
  },
  title: layerTitle,
  shows: ["generation", "notice", "weigh"], // its colour bars name the tokens set aside
};
