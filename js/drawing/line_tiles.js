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
import { groupWeightedLines } from "./draw_lines.js";

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

/** The lines in stroke groups (draw_lines.groupWeightedLines: one colour and opacity each), each
 * group's ends as flat [x0, y0, x1, y1, ...]: made once per show, read by every tile. */
export function strokeGroups(lines, colorOf, ends) {
  return groupWeightedLines(lines, colorOf).map(({ color, alpha, lines: group }) => {
    const at = new Float64Array(4 * group.length);
    group.forEach((line, i) => { at.set(ends(line), 4 * i); });
    return { color, alpha, ends: at };
  });
}

/** Strokes the groups' lines that meet the band [top, bottom) of the plot (with `pad` px of slack
 * at its edges, the line's width by default), whichever end is higher, shifted up by `top`. */
export function strokeBand(ctx, groups, top, bottom, lineWidth, pad = lineWidth) {
  const [low, high] = [top - pad, bottom + pad];
  ctx.lineWidth = lineWidth;
  for (const { color, alpha, ends } of groups) {
    ctx.globalAlpha = alpha;
    ctx.strokeStyle = color;
    ctx.beginPath();
    let any = false;
    for (let i = 0; i < ends.length; i += 4) {
      const y0 = ends[i + 1];
      const y1 = ends[i + 3];
      if ((y0 < low && y1 < low) || (y0 > high && y1 > high)) continue;
      ctx.moveTo(ends[i], y0 - top);
      ctx.lineTo(ends[i + 2], y1 - top);
      any = true;
    }
    if (any) ctx.stroke();
  }
  ctx.globalAlpha = 1;
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
    strokeBand(ctx, drawing.groups, top, bottom, drawing.lineWidth ?? 1.5);
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
      drawing = { ...next, groups: strokeGroups(next.lines, next.colorOf, next.ends) };
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
