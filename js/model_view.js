// The model view: every included layer × head as a small line diagram (as BertViz's model_view),
// drawn on ONE canvas from max-pooled S × S thumbnails. Hover enlarges a head; click opens it.
import { headColors } from "./colors.js";
import { el, sizeCanvas } from "./dom.js";
import { createGrid, gridSceneLabels } from "./grid.js";
import { createScene, drawScene, imageMethods } from "./scene.js";

export const CELL = 84; // px per thumbnail, margins included
const PAD = 8;
const ZOOM = 3;
export const THUMBNAIL_MIN_WEIGHT = 0.02;

/** Lines of one thumbnail: [{from, to, weight}] over its S pooled rows, for values [L,H,S,S]. */
export function thumbnailLines(values, shape, layerIndex, headIndex, minWeight = THUMBNAIL_MIN_WEIGHT) {
  const [, nHeads, size, nCols = size] = shape; // cross-attention thumbnails are not square
  const base = (layerIndex * nHeads + headIndex) * size * nCols;
  const lines = [];
  for (let from = 0; from < size; from++) {
    for (let to = 0; to < nCols; to++) {
      const weight = values[base + from * nCols + to];
      if (weight >= minWeight) lines.push({ from, to, weight });
    }
  }
  return lines;
}

/** Line ends in a cell: queries spread down the left edge, keys down the right (rows × cols grid). */
function thumbnailEnds([rows, cols], x, y, width, height) {
  const fromStep = (height - 2 * PAD) / Math.max(rows, 1);
  const toStep = (height - 2 * PAD) / Math.max(cols, 1);
  return ({ from, to }) => [x + PAD, y + PAD + (from + 0.5) * fromStep, x + width - PAD, y + PAD + (to + 0.5) * toStep];
}

/**
 * The grid of thumbnails, one geometry for the screen's canvas (labels: false, the grid alone at
 * the origin) and for images (labels: true: title, head and layer labels around it). A masked
 * head's cell is dimmed and crossed out, so switched-off heads are seen at a glance.
 */
const headText = (head) => `Head ${head + 1}`;
const layerText = (layer) => `Layer ${layer + 1}`;

export function modelScene(state, lineCache, { title = "", labels = true } = {}) {
  const { thumbnails, layers, heads, nHeads } = state;
  const grid = thumbnails.shape.slice(2);
  const [left, top] = labels ? [64, 48] : [0, 0];
  const s = createScene(left + heads.length * CELL, top + layers.length * CELL, { background: labels });
  if (labels) {
    s.text(6, 12, title, { role: "title" });
    gridSceneLabels(s, { left, top, cell: CELL, columnTexts: heads.map(headText), rowTexts: layers.map(layerText) });
  }
  const colors = headColors(nHeads);
  const masked = new Set((state.masked ?? []).map(([l, h]) => `${l}:${h}`));
  layers.forEach((layer, row) => { heads.forEach((head, col) => {
    const [x, y] = [left + col * CELL, top + row * CELL];
    s.lines(lineCache[row][col], () => colors[head], thumbnailEnds(grid, x, y, CELL, CELL));
    if (masked.has(`${layer}:${head}`)) {
      s.rect(x + 2, y + 2, CELL - 4, CELL - 4, "rgba(128,128,128,0.45)", "masked");
      s.segment(x + PAD, y + PAD, x + CELL - PAD, y + CELL - PAD, "#d62728", 2);
      s.segment(x + CELL - PAD, y + PAD, x + PAD, y + CELL - PAD, "#d62728", 2);
    }
  }); });
  return s.scene;
}

/**
 * createModelView(container, {onOpenHead(layer, head), onToggleMask(layer, head)}) → {update(state), destroy()}
 * state: {thumbnails: {values, shape:[L,H,S,S]}, layers: [layer ids], heads: [head ids], nHeads,
 *         masked: [[layer, head]] (optional), maskMode: clicks toggle masks instead of opening}
 */
export function createModelView(container, callbacks = {}) {
  const root = el("div", "attnscope-model-view", container);
  const hint = el("div", "attnscope-hint", root);
  hint.textContent = "Hover a head to enlarge it; click to open it in the head view.";
  const grid = createGrid(root, CELL, { frame: "attnscope-grid", columns: "attnscope-grid-heads", rows: "attnscope-grid-layers", canvas: "attnscope-thumbnails" });
  const { canvas } = grid;
  const zoom = el("div", "attnscope-zoom", root);
  zoom.hidden = true;
  const zoomTitle = el("div", "attnscope-zoom-title", zoom);
  const zoomCanvas = el("canvas", "", zoom);
  let state = null;
  let lineCache = [];

  const cellAt = (event) => (state ? grid.cellAt(event) : null);

  function showZoom(cell) {
    if (!cell) { zoom.hidden = true; return; }
    const { row, col } = cell;
    const grid = state.thumbnails.shape.slice(2);
    const colors = headColors(state.nHeads);
    zoomTitle.textContent = `Layer ${state.layers[row] + 1}, head ${state.heads[col] + 1}`;
    const ctx = sizeCanvas(zoomCanvas, CELL * ZOOM, CELL * ZOOM);
    if (ctx) {
      const enlarged = createScene(CELL * ZOOM, CELL * ZOOM, { background: false });
      enlarged.lines(lineCache[row][col], () => colors[state.heads[col]], thumbnailEnds(grid, 0, 0, CELL * ZOOM, CELL * ZOOM));
      drawScene(ctx, enlarged.scene);
    }
    // Beside the hovered cell, kept inside the view.
    zoom.style.left = `${Math.min((col + 1) * CELL + 60, Math.max(0, canvas.clientWidth - CELL * ZOOM))}px`;
    zoom.style.top = `${row * CELL + 40}px`;
    zoom.hidden = false;
  }

  const maskKey = (masked) => JSON.stringify(masked ?? []);

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
    update(next) {
      const same = state && state.thumbnails === next.thumbnails && state.nHeads === next.nHeads
        && maskKey(state.masked) === maskKey(next.masked);
      hint.textContent = next.maskMode
        ? "Click a head to switch it off (or on again); the kernel recomputes every later layer."
        : "Hover a head to enlarge it; click to open it in the head view.";
      if (same) { state = next; return; } // already drawn
      state = next;
      const { thumbnails, layers, heads } = next;
      grid.label(heads.map(headText), layers.map(layerText));
      const ctx = sizeCanvas(canvas, heads.length * CELL, layers.length * CELL);
      lineCache = layers.map((_, row) => heads.map((_, col) => thumbnailLines(thumbnails.values, thumbnails.shape, row, col)));
      const count = lineCache.flat().reduce((n, lines) => n + lines.length, 0);
      if (ctx) drawScene(ctx, modelScene(next, lineCache, { labels: false }));
      const masked = new Set((next.masked ?? []).map(([l, h]) => `${l}:${h}`));
      const maskedCount = layers.reduce((n, layer) => n + heads.filter((head) => masked.has(`${layer}:${head}`)).length, 0);
      canvas.dataset.masked = String(maskedCount);
      canvas.dataset.lineCount = String(count);
      canvas.dataset.cells = String(layers.length * heads.length);
      zoom.hidden = true;
    },
    /** Every shown layer × head as an image: the same thumbnails, lines and masks. */
    ...imageMethods((options) => {
      if (!state) throw new Error("nothing drawn yet");
      return modelScene(state, lineCache, options);
    }),
    destroy() { root.remove(); },
  };
}
