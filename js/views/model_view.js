// The model view: every included layer × head as a small line diagram (as BertViz's model_view),
// drawn on ONE canvas from max-pooled S × S thumbnails. Hover enlarges a head; click opens it.
import { headColors } from "../drawing/colors.js";
import { el, placeBeside, sizeCanvas } from "../drawing/dom.js";
import { measureOf, oneScale, oneScaleNote, onOneScale } from "../drawing/one_scale.js";
import { ALPHA_LEVELS } from "../drawing/draw_lines.js";
import { createGrid, gridSceneLabels } from "../drawing/grid.js";
import { headName, headText, layerText } from "../drawing/labels.js";
import { createScene, drawScene, imageMethods } from "../drawing/scene.js";
import { textWidth, wrapText } from "../drawing/svg.js";
import { answered, declared, imaged, keyTokens, openHead, shown } from "./view_adapter.js";
import { stepOf } from "./output_tokens.js";

export const CELL = 84; // px per thumbnail (the largest), margins included
export const MIN_CELL = 40;
// A view fitted into a fixed box (a slide) shows every cell, down to this size.
export const MIN_FIT_CELL = 20;
const LAYER_LABELS = 70; // px left of the grid for "Layer 12"
const LABEL_SIZE = 11; // px, the grid labels' font (widget.css .attnscope-grid-heads)
const PAD = 8;
const ZOOM = 3;
const ZOOM_LABELS = 90; // px for token labels each side of the enlargement
// Opacity is relative to each head's largest weight, so broad (near-uniform) heads show as a
// dense mesh instead of vanishing at 1/n; lines under this share of the head's maximum are left out.
export const THUMBNAIL_MIN_WEIGHT = 0.1;
// On the run's one scale (a difference, or ‖αf(x)‖) a head that changed or passes little is faint, not empty: its lines are kept
// down to the faintest opacity drawn.
const DIFFERENCE_MIN_WEIGHT = 1 / ALPHA_LEVELS;
// Past this many lines in one head, an even sample over the head's weights is drawn.
export const THUMBNAIL_MAX_LINES = 600;
export const SCALE_NOTE = "Line opacity: each weight ÷ its head's largest weight (broad heads show as dense meshes).";
// A difference or ‖αf(x)‖ is drawn on one scale instead (one_scale.js): its heads compare. A short
// run's is the run's (the one_scale trait); a long run's weighed thumbnails carry theirs, or, in
// passes, the page finds it in them. A selected token's rows (state.row) say first what is drawn.
const scaleNote = (state) => [state.row?.caption, state.runScale ? oneScaleNote(state.runScale) : SCALE_NOTE]
  .filter(Boolean).join(" ");

/**
 * px per cell so that nHeads cells and the layer labels fit `width` (CELL when unknown), and,
 * given `height` (px for nLayers rows; a view fitted into a slide), nLayers rows fit it too, down
 * to MIN_FIT_CELL then.
 */
export function modelCell(width, nHeads, { height = 0, nLayers = 1 } = {}) {
  const byWidth = width ? Math.floor((width - LAYER_LABELS) / Math.max(nHeads, 1)) : CELL;
  if (!height) return Math.max(MIN_CELL, Math.min(CELL, byWidth));
  const byHeight = Math.floor(height / Math.max(nLayers, 1));
  return Math.max(MIN_FIT_CELL, Math.min(CELL, byWidth, byHeight));
}

/** The largest value of one thumbnail of values [L,H,S,S]. */
export function headLargest(values, shape, layerIndex, headIndex) {
  const [, nHeads, size, nCols = size] = shape;
  const base = (layerIndex * nHeads + headIndex) * size * nCols;
  let largest = 0;
  for (let i = 0; i < size * nCols; i++) largest = Math.max(largest, values[base + i]);
  return largest;
}

/**
 * Lines of one thumbnail: [{from, to, weight, value}] over its pooled rows, for values [L,H,S,S];
 * weight is value ÷ `scale`, the value of a full line: one for every head (on the run's one scale), or
 * 0 for the head's own largest (attention's; value is the attention itself).
 */
export function thumbnailLines(values, shape, layerIndex, headIndex, minWeight = THUMBNAIL_MIN_WEIGHT, maxLines = THUMBNAIL_MAX_LINES,
  scale = 0) {
  const [, nHeads, size, nCols = size] = shape; // cross-attention thumbnails are not square
  const base = (layerIndex * nHeads + headIndex) * size * nCols;
  const largest = scale > 0 ? scale : headLargest(values, shape, layerIndex, headIndex);
  if (!(largest > 0)) return [];
  let lines = [];
  for (let from = 0; from < size; from++) {
    for (let to = 0; to < nCols; to++) {
      const value = values[base + from * nCols + to];
      const weight = Math.min(1, value / largest);
      if (weight >= minWeight) lines.push({ from, to, weight, value });
    }
  }
  if (lines.length > maxLines) {
    lines.sort((a, b) => b.weight - a.weight); // stable: equal weights stay in row order
    const step = lines.length / maxLines;
    lines = Array.from({ length: maxLines }, (_, i) => lines[Math.floor(i * step)]);
  }
  return lines;
}

/** Line ends in a cell: queries spread down the left edge, keys down the right (rows × cols grid).
 * One selected token's row (row: {token}, one query row over cols tokens) starts where that token
 * sits among the keys, so its lines read as the thumbnail's row of that token. */
export function thumbnailEnds([rows, cols], x, y, width, height, row = null) {
  const fromStep = (height - 2 * PAD) / Math.max(rows, 1);
  const toStep = (height - 2 * PAD) / Math.max(cols, 1);
  const fromY = row ? () => y + PAD + (row.token + 0.5) * toStep : (from) => y + PAD + (from + 0.5) * fromStep;
  return ({ from, to }) => [x + PAD, fromY(from), x + width - PAD, y + PAD + (to + 0.5) * toStep];
}

/**
 * The grid of thumbnails, one geometry for the screen's canvas (labels: false, the grid alone at
 * the origin) and for images (labels: true: title, head and layer labels around it). A masked
 * head's cell is dimmed and crossed out, so switched-off heads are seen at a glance.
 */
/**
 * The grid's labels at `cell` px, legible at any size: "Head 3" over each column where it fits,
 * else the numbers alone with "Head" once beside them (`corner`), and only every k-th number
 * where even those would touch; "Layer 2" beside every row, or every k-th one where the rows are
 * lower than the text.
 */
export function gridLabels(layers, heads, cell) {
  const full = heads.map(headText);
  const fits = full.every((text) => textWidth(text, LABEL_SIZE) + 6 <= cell);
  const widest = Math.max(0, ...heads.map((h) => textWidth(String(h), LABEL_SIZE))) + 4;
  const every = fits ? 1 : Math.ceil(widest / cell);
  const rowsEvery = Math.ceil((LABEL_SIZE + 3) / cell);
  return {
    columns: fits ? full : heads.map((h, i) => (i % every === 0 ? String(h) : "")),
    corner: fits ? "" : "Head",
    rows: layers.map((l, i) => (i % rowsEvery === 0 ? layerText(l) : "")),
  };
}

export function modelScene(state, lineCache, { title = "", labels = true, note = scaleNote(state) } = {}) {
  const { thumbnails, layers, heads, nHeads } = state;
  const cell = state.cell ?? CELL;
  const grid = thumbnails.shape.slice(2);
  const [left, top] = labels ? [64, 48] : [0, 0];
  const width = left + heads.length * cell;
  // The note wraps to the grid: a few heads make a picture narrower than one line of it.
  const noteLines = labels ? wrapText(note, width - 12, 10) : [];
  const s = createScene(width, top + layers.length * cell + (labels ? 8 + 14 * noteLines.length : 0), { background: labels });
  if (labels) {
    s.text(6, 12, title, { role: "title" });
    const shown = gridLabels(layers, heads, cell);
    gridSceneLabels(s, { left, top, cell, columnTexts: shown.columns, rowTexts: shown.rows, corner: shown.corner });
    noteLines.forEach((line, i) => { s.text(6, top + layers.length * cell + 14 + 14 * i, line, { size: 10, role: "scale" }); });
  }
  const colors = headColors(nHeads);
  const masked = new Set((state.masked ?? []).map(([l, h]) => `${l}:${h}`));
  layers.forEach((layer, row) => { heads.forEach((head, col) => {
    const [x, y] = [left + col * cell, top + row * cell];
    s.lines(lineCache[row][col], () => colors[head], thumbnailEnds(grid, x, y, cell, cell, state.row));
    if (masked.has(`${layer}:${head}`)) {
      s.rect(x + 2, y + 2, cell - 4, cell - 4, "rgba(128,128,128,0.45)", "masked");
      s.segment(x + PAD, y + PAD, x + cell - PAD, y + cell - PAD, "#d62728", 2);
      s.segment(x + cell - PAD, y + PAD, x + PAD, y + cell - PAD, "#d62728", 2);
    }
  }); });
  return s.scene;
}

/** Each shown layer × head's lines, as the grid draws them: thumbnails on the run's one scale hold
 * value ÷ the run's largest already, so 1 is a full line in every head. */
export const thumbnailLineCache = ({ thumbnails, layers, heads, runScale }, maxLines = THUMBNAIL_MAX_LINES) =>
  layers.map((_, row) => heads.map((_, col) => thumbnailLines(thumbnails.values, thumbnails.shape, row, col,
    runScale ? DIFFERENCE_MIN_WEIGHT : THUMBNAIL_MIN_WEIGHT, maxLines, runScale ? 1 : 0)));

/** The model view as an image from its state alone (where there is no view: the kernel's picture),
 * its cells sized to the state's width as on screen; maxLines: each head's strongest lines kept
 * (fewer make a smaller picture, which says so). */
export function modelImage(state, { maxLines = THUMBNAIL_MAX_LINES, ...options } = {}) {
  const note = maxLines < THUMBNAIL_MAX_LINES ? `Each head's ${maxLines} strongest lines. ${scaleNote(state)}` : scaleNote(state);
  const sized = { ...state, cell: state.cell ?? modelCell(state.width, state.heads.length) };
  return modelScene(sized, thumbnailLineCache(state, maxLines), { ...options, note });
}

/** The first token of each pooled row: row i of `rows` covers tokens from floor(i·n / rows). */
export function pooledRowLabels(tokens, rows) {
  const n = tokens.length;
  return Array.from({ length: rows }, (_, i) => {
    const start = Math.floor((i * n) / rows);
    const end = Math.ceil(((i + 1) * n) / rows);
    return end - start > 1 ? `${tokens[start]} …` : tokens[start];
  });
}

/**
 * One head enlarged, with the tokens each pooled row stands for (queries left, keys right),
 * labelled as densely as 11 px rows allow.
 */
export function enlargedScene(state, lines, head, { size = CELL * ZOOM } = {}) {
  const [rows, cols] = state.thumbnails.shape.slice(2);
  const s = createScene(size + 2 * ZOOM_LABELS, size, { background: false });
  const ends = thumbnailEnds([rows, cols], ZOOM_LABELS, 0, size, size, state.row);
  s.lines(lines, () => headColors(state.nHeads)[head], ends, 1.5);
  const label = (texts, n, x, anchor, role) => {
    if (!texts?.length) return;
    const pitch = (size - 2 * PAD) / n;
    const every = Math.max(1, Math.ceil(11 / pitch));
    pooledRowLabels(texts, n).forEach((text, i) => {
      if (i % every === 0) s.text(x, PAD + (i + 0.5) * pitch, text.length > 14 ? `${text.slice(0, 13)}…` : text, { anchor, size: 10, role });
    });
  };
  if (state.row) {
    const text = state.tokens[state.row.token] ?? "";
    s.text(ZOOM_LABELS - 4, ends({ from: 0, to: 0 })[1], text.length > 14 ? `${text.slice(0, 13)}…` : text, { anchor: "end", size: 10, role: "token-left" });
  } else label(state.tokens, rows, ZOOM_LABELS - 4, "end", "token-left");
  label(state.keyTokens ?? state.tokens, cols, ZOOM_LABELS + size + 4, "start", "token-right");
  return s.scene;
}

/** The enlarged head's card: its largest weight beside a uniform row's (1/n, how broad a head is),
 * or, on the run's one scale, its largest value beside the strongest line's (a uniform baseline means
 * nothing for a difference or ‖αf(x)‖). */
export function zoomText(state, row, col) {
  const own = headLargest(state.thumbnails.values, state.thumbnails.shape, row, col);
  if (state.runScale) {
    const { largest } = state.runScale;
    const share = largest > 0 ? ` (${Math.round(100 * own)}% of the strongest line, ${largest.toFixed(3)})` : "";
    return `largest ${measureOf(state.runScale)} ${(own * largest).toFixed(3)}${share}`;
  }
  const nKeys = (state.keyTokens ?? state.tokens)?.length;
  return `largest weight ${own.toFixed(3)}${nKeys ? ` (uniform: ${(1 / nKeys).toFixed(3)})` : ""}`;
}

/**
 * createModelView(container, {onOpenHead(layer, head), onToggleMask(layer, head)}) → {update(state), destroy()}
 * state: {thumbnails: {values, shape:[L,H,S,S]}, layers: [layer ids], heads: [head ids], nHeads,
 *         masked: [[layer, head]] (optional), maskMode: clicks toggle masks instead of opening}
 */
export function createModelView(container, callbacks = {}) {
  const root = el("div", "attnscope-model-view", container);
  const hint = el("div", "attnscope-hint", root);
  const grid = createGrid(root, CELL, { frame: "attnscope-grid", columns: "attnscope-grid-heads", rows: "attnscope-grid-layers", canvas: "attnscope-thumbnails" });
  const scale = el("div", "attnscope-hint attnscope-scale-note", root);
  scale.textContent = SCALE_NOTE;
  const { canvas } = grid;
  const zoom = el("div", "attnscope-zoom", root);
  zoom.hidden = true;
  const zoomTitle = el("div", "attnscope-zoom-title", zoom);
  const zoomCanvas = el("canvas", "", zoom);
  const zoomNote = el("div", "attnscope-hint", zoom);
  let state = null;
  let lineCache = [];

  const cellAt = (event) => (state ? grid.cellAt(event) : null);

  function showZoom(cell) {
    if (!cell) { zoom.hidden = true; return; }
    const { row, col } = cell;
    const head = state.heads[col];
    const lines = lineCache[row][col];
    zoomTitle.textContent = headName(state.layers[row], head);
    zoomNote.textContent = zoomText(state, row, col);
    const scene = enlargedScene(state, lines, head);
    const ctx = sizeCanvas(zoomCanvas, scene.width, scene.height);
    if (ctx) drawScene(ctx, scene);
    // Beside the hovered cell, kept inside the view (and so inside the cell's output).
    const size = state.cell ?? CELL;
    const [x, y] = [canvas.offsetLeft + col * size, canvas.offsetTop + row * size];
    placeBeside(zoom, { left: x - 8, right: x + size + 8, top: y });
  }

  const maskKey = (masked) => JSON.stringify(masked ?? []);

  /** The cell size for `next`; in a box of fixed height (a slide), the rows share what the hint,
   * labels and note leave of it (as laid out now). */
  function fittedCell(next) {
    const height = next.height ? Math.max(1, next.height - (root.offsetHeight - canvas.offsetHeight)) : 0;
    return modelCell(next.width, next.heads.length, { height, nLayers: next.layers.length });
  }

  function draw(given) {
    // A long run's thumbnails still refining say so above the scale.
    scale.textContent = given.note ? `${given.note} ${scaleNote(given)}` : scaleNote(given);
    const cell = fittedCell(given);
    const next = { ...given, cell };
    // The same numbers (a trait decoded once, a refining answer between passes) are not drawn again.
    const same = state && state.thumbnails.values === next.thumbnails.values && state.nHeads === next.nHeads && state.row === next.row
      && state.cell === cell && maskKey(state.masked) === maskKey(next.masked);
    if (same && state.runScale === next.runScale) { state = next; return; } // already drawn
    const sameData = state && state.thumbnails.values === next.thumbnails.values && state.runScale === next.runScale;
    state = next;
    const { layers, heads } = next;
    const shown = gridLabels(layers, heads, cell);
    grid.label(shown.columns, shown.rows, cell, shown.corner);
    const ctx = sizeCanvas(canvas, heads.length * cell, layers.length * cell);
    if (!sameData) lineCache = thumbnailLineCache(next);
    const count = lineCache.flat().reduce((n, lines) => n + lines.length, 0);
    if (ctx) drawScene(ctx, modelScene(next, lineCache, { labels: false }));
    const masked = new Set((next.masked ?? []).map(([l, h]) => `${l}:${h}`));
    const maskedCount = layers.reduce((n, layer) => n + heads.filter((head) => masked.has(`${layer}:${head}`)).length, 0);
    canvas.dataset.masked = String(maskedCount);
    canvas.dataset.lineCount = String(count);
    canvas.dataset.cells = String(layers.length * heads.length);
    canvas.dataset.cell = String(cell);
    canvas.dataset.row = next.row ? String(next.row.token) : ""; // the selected token whose row the cells show
    zoom.hidden = true;
  }

  canvas.addEventListener("mousemove", (event) => showZoom(cellAt(event)));
  canvas.addEventListener("mouseleave", () => showZoom(null));
  canvas.addEventListener("click", (event) => {
    const cell = cellAt(event);
    if (!cell) return;
    const [layer, head] = [state.layers[cell.row], state.heads[cell.col]];
    if (state.maskMode) callbacks.onToggleMask?.(layer, head);
    else callbacks.onOpenHead?.(layer, head);
  });

  return {
    /**
     * state: {thumbnails, layers, heads, nHeads, tokens, keyTokens?, masked?, maskMode?, width?, height?}
     * (width: px the view may use; the cells shrink to fit it, down to MIN_CELL; height: px it
     * may use in a box of fixed size, a slide, where the rows fit it too, down to MIN_FIT_CELL)
     */
    update(next) {
      hint.textContent = next.maskMode
        ? "Click a head to switch it off (or on again); the kernel recomputes every later layer."
        : "Hover a head to enlarge it; click to open it in the head view.";
      draw(next);
      // Fitted into a box: measured again once the hint and labels are laid out (the first
      // draw may have had neither), and drawn again if the cells come out another size.
      if (next.height && fittedCell(next) !== state.cell) draw(next);
    },
    /** Every shown layer × head as an image: the same thumbnails, lines and masks. */
    ...imageMethods((options) => {
      if (!state) throw new Error("nothing drawn yet");
      return modelScene(state, lineCache, options);
    }),
    destroy() { root.remove(); },
  };
}

// Per answer: its scaled values and scale (so a redraw of the same answer draws nothing again).
const scaledRows = new WeakMap();

/**
 * A long run's cells for the selected token (a generation's output token): its exact row in every
 * included layer × head ("token_rows"), as thumbnails of one query row [layers, heads, 1, T];
 * weighed by value norm, on one scale for every cell (‖αf(x)‖ ÷ the largest, as short runs draw
 * it); attention, each head's own largest (SCALE_NOTE). → the model view's state, a status line,
 * or null where the cells show the whole run.
 */
export function tokenRowState({ get, long }, base) {
  const tokens = get("tokens");
  const token = get("focus_token");
  const step = stepOf(get("output_start") ?? -1, tokens.length, token);
  if (!get("long_context") || !long?.tokenRows || !step) return null;
  const answer = long.tokenRows({ result_id: get("result_id"), weigh_by: get("weigh_by"), token,
    layers: get("include_layers") ?? null, heads: get("include_heads") ?? null });
  if (answer?.error) return answer.error;
  const rows = answered(answer, (a) => a.n_tokens === tokens.length && a.token === token);
  if (!rows) return "computing the selected token's rows…";
  const caption = `Token ${token} “${tokens[token]}” (step ${step.step} of ${step.steps}): its row in every layer and head.`
    + `${rows.note ? ` ${rows.note}` : ""}`;
  if (scaledRows.get(rows)?.row.caption !== caption) {
    scaledRows.set(rows, { ...scaleRows(rows, get("weigh_by") === "value_norm", token), row: { token, caption } });
  }
  const { values, runScale, row } = scaledRows.get(rows);
  return { ...base, runScale, thumbnails: { values, shape: rows.shape }, layers: rows.layers, heads: rows.heads, row };
}

/** The rows as drawn: weighed, ÷ the largest of every cell, with that scale (one_scale.js); else as they are. */
function scaleRows(rows, weighed, token) {
  if (!weighed) return { values: rows.values, runScale: null };
  const { values, shape: [, nHeads, , n] } = rows;
  let at = 0;
  for (let i = 1; i < values.length; i++) if (values[i] > values[at]) at = i;
  const largest = values.length ? values[at] : 0;
  const cell = Math.floor(at / n);
  const runScale = { of: `‖αf(x)‖ of token ${token}'s row`, measure: "‖αf(x)‖", largest,
    layer: rows.layers[Math.floor(cell / nHeads)], head: rows.heads[cell % nHeads] };
  return { values: largest > 0 ? values.map((v) => v / largest) : values, runScale };
}

// A refining answer's values on their one scale, found once per pass (each pass's values are new).
const scaledPasses = new WeakMap();
function passesOnOneScale(refined) {
  if (!scaledPasses.has(refined.values)) {
    scaledPasses.set(refined.values, onOneScale(refined.values, refined.shape, refined.layers, refined.heads, refined.one_scale));
  }
  return scaledPasses.get(refined.values);
}

function modelState(context) {
  const { get, decoded, long, maskMode, width, height = 0 } = context;
  const payload = get("thumbnails");
  const base = { nHeads: get("n_heads"), masked: get("masked_heads") ?? [], maskMode, width, height,
    tokens: get("tokens"), keyTokens: keyTokens(get), runScale: oneScale(get), weighBy: get("weigh_by") };
  const rows = tokenRowState(context, base);
  if (rows) return rows;
  if (payload?.data && payload.n_tokens === get("tokens").length) {
    // A long run's weighed thumbnails are on a scale of their own, which they carry.
    return { ...base, runScale: payload.one_scale ?? base.runScale, thumbnails: decoded("thumbnails"), layers: payload.layers,
      heads: payload.heads };
  }
  // A long run's thumbnails too large to make at once come in passes, drawn as they refine.
  if (get("long_context") && long?.thumbnails && !payload?.data) {
    const refined = long.thumbnails({ result_id: get("result_id"), weigh_by: get("weigh_by"), layers: get("include_layers"), heads: get("include_heads") });
    if (refined?.error) return refined.error;
    if (refined && refined.n_tokens === get("tokens").length) {
      // Weighed: one scale for every head shown, their largest value so far.
      const scaled = refined.one_scale ? passesOnOneScale(refined) : null;
      const what = scaled ? measureOf(scaled.scale) : "weight";
      const note = refined.passesDone < refined.passes
        ? `Refining: each cell is the largest ${what} of ${Math.round((100 * refined.passesDone) / refined.passes)}% of its rows so far`
          + `${scaled ? ", and the strongest line the largest of those" : ""}.` : "";
      return { ...base, runScale: scaled?.scale ?? base.runScale, thumbnails: { values: scaled?.values ?? refined.values, shape: refined.shape },
        layers: refined.layers, heads: refined.heads, note };
    }
  }
  return "loading thumbnails…";
}

/** @type {import("./view_adapter.js").ViewAdapter} */
export const adapter = {
  ...declared("model"),
  create(body, { setTraits }, get) {
    return createModelView(body, {
      onOpenHead: openHead(setTraits, get),
      onToggleMask(layer, h) {
        const current = get("masked_heads") ?? [];
        const masked = current.filter(([l, m]) => !(l === layer && m === h));
        if (masked.length === current.length) masked.push([layer, h]);
        setTraits({ masked_heads: masked });
      },
    });
  },
  draw: (view, context) => shown(view, modelState(context)),
  picture: (context, options) => imaged(modelState(context), modelImage, options),
  title: ({ get }) => get("model_name"),
  shows: ["generation", "notice", "part", "masked", "change", "weigh", "words", "included"],
};
