// Weighted lines on a tall plot, drawn as canvas tiles where the plot is on screen.
// A 512-token head view is 10,240 px tall and holds ~20k lines. Software canvases (no GPU)
// spend their time on the pixels the lines cross, and no browser draws a canvas past
// 32,767 px. So the plot is cut into tiles:
// - the tiles in view are drawn at once;
// - those just above and below are drawn one task at a time after that frame;
// - far ones are dropped.
// A change of lines then costs the visible part; scrolling draws the new tiles in the frame
// that shows them.
import { sizeCanvas, visibleSpan } from "./dom.js";
import { strokeWeightedLines } from "./draw_lines.js";

export const TILE_HEIGHT = 256;
// The tiles drawn ahead reach this share of the visible height above and below it (≥ a tile).
const AHEAD = 0.5;
// px treated as visible while the plot is not laid out (a hidden tab, a page without layout).
const UNLAID_HEIGHT = 1024;

/** Indices [first, end) of the tiles of a plot `height` px tall that meet [top, bottom). */
export function tilesBetween(top, bottom, height, tileHeight = TILE_HEIGHT) {
  const count = Math.ceil(height / tileHeight);
  const first = Math.min(count, Math.max(0, Math.floor(top / tileHeight)));
  const end = Math.min(count, Math.ceil(bottom / tileHeight));
  return [first, Math.max(first, end)];
}

/** Each line's vertical extent, [min y, max y] pairs in one array (computed once per show). */
export function verticalExtents(lines, ends) {
  const extents = new Float64Array(2 * lines.length);
  lines.forEach((line, i) => {
    const [, y0, , y1] = ends(line);
    extents[2 * i] = Math.min(y0, y1);
    extents[2 * i + 1] = Math.max(y0, y1);
  });
  return extents;
}

/** The lines that meet the band [top, bottom) (with `pad` px of slack). */
export function linesCrossing(lines, extents, top, bottom, pad = 2) {
  return lines.filter((_, i) => extents[2 * i + 1] >= top - pad && extents[2 * i] <= bottom + pad);
}

/**
 * Tiles in `track`, a positioned element as tall as the plot and `width` px wide.
 * show({lines, colorOf, ends, lineWidth, height}) replaces what is drawn; ends(line) gives
 * [x0, y0, x1, y1] in plot px.
 */
export function createLineTiles(track, { width, tileHeight = TILE_HEIGHT }) {
  const tiles = new Map(); // index → {canvas, version}
  let drawing = null;
  let version = 0;
  let frame = 0;
  let ahead = 0;
  let queued = 0; // the latest queueAhead call; an older one's frame callback does nothing

  function drawTile(index) {
    let tile = tiles.get(index);
    if (!tile) {
      const canvas = document.createElement("canvas");
      canvas.className = "attnscope-lines-tile";
      canvas.dataset.tile = String(index);
      track.appendChild(canvas);
      tile = { canvas, version: -1 };
      tiles.set(index, tile);
    }
    const top = index * tileHeight;
    const bottom = Math.min(drawing.height, top + tileHeight);
    const ctx = sizeCanvas(tile.canvas, width, bottom - top);
    tile.canvas.style.top = `${top}px`;
    tile.version = version;
    if (!ctx) return;
    const { lines, colorOf, ends, lineWidth, extents } = drawing;
    const shifted = (line) => {
      const [x0, y0, x1, y1] = ends(line);
      return [x0, y0 - top, x1, y1 - top];
    };
    strokeWeightedLines(ctx, linesCrossing(lines, extents, top, bottom, lineWidth), colorOf, shifted, lineWidth);
  }

  function span() {
    const seen = visibleSpan(track);
    if (!seen) return { top: 0, bottom: Math.min(drawing.height, UNLAID_HEIGHT) };
    return seen;
  }

  /** Draws the tiles in view now, queues those around them, drops those far away. */
  function refresh() {
    if (!drawing) return;
    const { top, bottom } = span();
    const [first, end] = bottom > top ? tilesBetween(top, bottom, drawing.height, tileHeight) : [0, 0];
    for (let i = first; i < end; i++) if (tiles.get(i)?.version !== version) drawTile(i);
    const margin = Math.max(tileHeight, (bottom - top) * AHEAD);
    const [keepFirst, keepEnd] = tilesBetween(top - 3 * margin, bottom + 3 * margin, drawing.height, tileHeight);
    for (const [i, tile] of tiles) {
      if (i < keepFirst || i >= keepEnd) {
        tile.canvas.remove();
        tiles.delete(i);
      }
    }
    if (bottom > top) queueAhead(tilesBetween(top - margin, bottom + margin, drawing.height, tileHeight));
  }

  // One tile per task, nearest the view first, so input and the next frame are not held up.
  /** @param {number[]} range [first, end) */
  function queueAhead([first, end]) {
    clearTimeout(ahead);
    const due = [];
    for (let i = first; i < end; i++) if (tiles.get(i)?.version !== version) due.push(i);
    if (!due.length) return;
    const step = () => {
      const next = due.shift();
      if (next === undefined || !drawing) return;
      if (tiles.get(next)?.version !== version) drawTile(next);
      if (due.length) ahead = setTimeout(step, 0);
    };
    // Only after the frame with the tiles in view is out: they are what the user waits for.
    const ticket = ++queued;
    afterFrame(() => { if (ticket === queued) ahead = setTimeout(step, 0); });
  }

  function afterFrame(fn) {
    const nextFrame = globalThis.requestAnimationFrame ?? ((f) => setTimeout(f, 16));
    nextFrame(fn);
  }

  // Scrolling (the widget's body, the notebook, the page) draws what comes into view in the
  // frame that shows it; a plot that becomes visible (a tab shown, a cell back in view) too.
  function follow() {
    if (frame || !drawing) return;
    frame = (globalThis.requestAnimationFrame ?? ((fn) => setTimeout(fn, 16)))(() => {
      frame = 0;
      refresh();
    });
  }
  const onScroll = (event) => {
    // What scrolled: inside a shadow root (marimo) the document sees the host as the target.
    const target = event.composedPath?.()[0] ?? event.target;
    if (target === document || target?.contains?.(track)) follow();
  };
  document.addEventListener("scroll", onScroll, { capture: true, passive: true });
  // Scroll events are not composed: those inside a shadow root (marimo draws widgets in one)
  // never reach the document, so its root is listened to as well, once the plot is in it.
  let shadowRoot = null;
  function listenToShadowRoot() {
    const rootNode = track.getRootNode?.();
    if (rootNode === shadowRoot || !(globalThis.ShadowRoot && rootNode instanceof ShadowRoot)) return;
    shadowRoot?.removeEventListener("scroll", onScroll, { capture: true });
    shadowRoot = rootNode;
    shadowRoot.addEventListener("scroll", onScroll, { capture: true, passive: true });
  }
  globalThis.addEventListener?.("resize", follow);
  const shown = typeof IntersectionObserver === "undefined" ? null : new IntersectionObserver(follow);
  shown?.observe(track);

  return {
    show(next) {
      listenToShadowRoot();
      drawing = { ...next, extents: verticalExtents(next.lines, next.ends) };
      version += 1;
      track.style.height = `${next.height}px`;
      refresh();
    },
    /** Indices of the tiles drawn with the current lines. */
    current: () => [...tiles].filter(([, t]) => t.version === version).map(([i]) => i).sort((a, b) => a - b),
    destroy() {
      document.removeEventListener("scroll", onScroll, { capture: true });
      shadowRoot?.removeEventListener("scroll", onScroll, { capture: true });
      globalThis.removeEventListener?.("resize", follow);
      shown?.disconnect();
      clearTimeout(ahead);
      queued += 1; // a tile queue waiting for its frame starts nothing
      if (frame) globalThis.cancelAnimationFrame?.(frame);
      drawing = null;
    },
  };
}
