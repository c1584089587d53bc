// The model view: every included layer × head as a small line diagram (as BertViz's model_view),
// drawn on ONE canvas from max-pooled S × S thumbnails. Hover enlarges a head; click opens it.
import { headColors } from "./colors.js";
import { el, sizeCanvas } from "./dom.js";
import { strokeWeightedLines } from "./draw_lines.js";
import { serializeSvg, svgDocument, svgLines, svgRect, svgText } from "./svg.js";

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

function drawThumbnail(ctx, lines, grid, color, x, y, width, height) {
  strokeWeightedLines(ctx, lines, () => color, thumbnailEnds(grid, x, y, width, height), 1);
}

/** Dims a masked head's cell and crosses it out, so switched-off heads are seen at a glance. */
function drawMasked(ctx, x, y) {
  ctx.save();
  ctx.fillStyle = "rgba(128,128,128,0.45)";
  ctx.fillRect(x + 2, y + 2, CELL - 4, CELL - 4);
  ctx.strokeStyle = "#d62728";
  ctx.lineWidth = 2;
  ctx.beginPath();
  ctx.moveTo(x + PAD, y + PAD);
  ctx.lineTo(x + CELL - PAD, y + CELL - PAD);
  ctx.moveTo(x + CELL - PAD, y + PAD);
  ctx.lineTo(x + PAD, y + CELL - PAD);
  ctx.stroke();
  ctx.restore();
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
  const grid = el("div", "attnscope-grid", root);
  const headLabels = el("div", "attnscope-grid-heads", grid);
  const layerLabels = el("div", "attnscope-grid-layers", grid);
  const canvas = el("canvas", "attnscope-thumbnails", grid);
  const zoom = el("div", "attnscope-zoom", root);
  zoom.hidden = true;
  const zoomTitle = el("div", "attnscope-zoom-title", zoom);
  const zoomCanvas = el("canvas", "", zoom);
  let state = null;
  let lineCache = [];

  function cellAt(event) {
    if (!state) return null;
    const rect = canvas.getBoundingClientRect();
    const col = Math.floor((event.clientX - rect.left) / CELL);
    const row = Math.floor((event.clientY - rect.top) / CELL);
    if (row < 0 || col < 0 || row >= state.layers.length || col >= state.heads.length) return null;
    return { row, col };
  }

  function showZoom(cell) {
    if (!cell) { zoom.hidden = true; return; }
    const { row, col } = cell;
    const grid = state.thumbnails.shape.slice(2);
    const colors = headColors(state.nHeads);
    zoomTitle.textContent = `Layer ${state.layers[row] + 1}, head ${state.heads[col] + 1}`;
    const ctx = sizeCanvas(zoomCanvas, CELL * ZOOM, CELL * ZOOM);
    if (ctx) drawThumbnail(ctx, lineCache[row][col], grid, colors[state.heads[col]], 0, 0, CELL * ZOOM, CELL * ZOOM);
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
      const grid = thumbnails.shape.slice(2);
      const colors = headColors(next.nHeads);
      headLabels.replaceChildren();
      for (const h of heads) el("span", "", headLabels).textContent = `Head ${h + 1}`;
      layerLabels.replaceChildren();
      for (const l of layers) el("span", "", layerLabels).textContent = `Layer ${l + 1}`;
      const ctx = sizeCanvas(canvas, heads.length * CELL, layers.length * CELL);
      lineCache = layers.map((_, row) => heads.map((_, col) => thumbnailLines(thumbnails.values, thumbnails.shape, row, col)));
      let count = 0;
      layers.forEach((_, row) => heads.forEach((head, col) => {
        const lines = lineCache[row][col];
        count += lines.length;
        if (ctx) drawThumbnail(ctx, lines, grid, colors[head], col * CELL, row * CELL, CELL, CELL);
      }));
      const masked = new Set((next.masked ?? []).map(([l, h]) => `${l}:${h}`));
      let maskedCount = 0;
      layers.forEach((layer, row) => heads.forEach((head, col) => {
        if (!masked.has(`${layer}:${head}`)) return;
        maskedCount += 1;
        if (ctx) drawMasked(ctx, col * CELL, row * CELL);
      }));
      canvas.dataset.masked = String(maskedCount);
      canvas.dataset.lineCount = String(count);
      canvas.dataset.cells = String(layers.length * heads.length);
      zoom.hidden = true;
    },
    /** Every shown layer × head as SVG: the same thumbnails, lines and masks. */
    toSvg({ title = "", dark = false } = {}) {
      if (!state) throw new Error("nothing drawn yet");
      const { thumbnails, layers, heads, nHeads } = state;
      const grid = thumbnails.shape.slice(2);
      const [left, top] = [64, 48];
      const svg = svgDocument(left + heads.length * CELL, top + layers.length * CELL, dark);
      svgText(svg, 6, 12, title);
      heads.forEach((h, col) => svgText(svg, left + (col + 0.5) * CELL, 34, `Head ${h + 1}`, { anchor: "middle", size: 11 }));
      layers.forEach((l, row) => svgText(svg, 6, top + (row + 0.5) * CELL, `Layer ${l + 1}`, { size: 11 }));
      const colors = headColors(nHeads);
      const masked = new Set((state.masked ?? []).map(([l, h]) => `${l}:${h}`));
      layers.forEach((layer, row) => heads.forEach((head, col) => {
        const [x, y] = [left + col * CELL, top + row * CELL];
        svgLines(svg, lineCache[row][col], () => colors[head], thumbnailEnds(grid, x, y, CELL, CELL));
        if (masked.has(`${layer}:${head}`)) {
          const cross = svgRect(svg, x + 2, y + 2, CELL - 4, CELL - 4, "rgba(128,128,128,0.45)");
          cross.setAttribute("class", "masked");
        }
      }));
      return serializeSvg(svg);
    },
    destroy() { root.remove(); },
  };
}
