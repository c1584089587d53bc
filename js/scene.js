// A view's layout as plain data: a scene of primitives (text, rect, circle, segment, weighted
// lines) with their positions and colours, computed once by the view and drawn by thin sinks:
// drawScene onto a canvas (the screen, and PNG export) and sceneToSvg (SVG export). What the
// image shows is therefore where the screen shows it (vega's scenegraph, in small).
import { groupWeightedLines } from "./draw_lines.js";
import { svgSafeText } from "./svg.js";

const NS = "http://www.w3.org/2000/svg";
const FONT = "sans-serif";

/**
 * @typedef {{type: "text", x: number, y: number, text: string, anchor: string,
 *   size: number, color: string | null, rotate: number, role: string}} TextItem
 * @typedef {{type: "rect", x: number, y: number, width: number, height: number, fill: string, role: string}} RectItem
 * @typedef {{type: "circle", cx: number, cy: number, r: number, fill: string}} CircleItem
 * @typedef {{type: "segment", x0: number, y0: number, x1: number, y1: number, color: string, width: number}} SegmentItem
 * @typedef {{type: "lines", width: number, groups: Array<{color: string, alpha: number, count: number, segments: number[][]}>}} LinesItem
 * @typedef {{type: "raster", x: number, y: number, width: number, height: number, cols: number, rows: number, rgba: Uint8ClampedArray}} RasterItem
 * @typedef {TextItem | RectItem | CircleItem | SegmentItem | LinesItem | RasterItem} SceneItem
 * @typedef {{width: number, height: number, background: boolean, items: SceneItem[]}} Scene
 */

/** A scene of `width` × `height` px and the builder that adds to it (all coordinates in px). */
export function createScene(width, height, { background = true } = {}) {
  /** @type {Scene} */
  const scene = { width: Math.ceil(width), height: Math.ceil(height), background, items: [] };
  const items = scene.items;
  return {
    scene,
    text(x, y, text, { anchor = "start", size = 12, color = null, rotate = 0, role = "" } = {}) {
      items.push({ type: "text", x, y, text: String(text), anchor, size, color, rotate, role });
    },
    rect(x, y, width, height, fill, role = "") {
      items.push({ type: "rect", x, y, width, height, fill, role });
    },
    circle(cx, cy, r, fill) {
      items.push({ type: "circle", cx, cy, r, fill });
    },
    segment(x0, y0, x1, y1, color, width = 1) {
      items.push({ type: "segment", x0, y0, x1, y1, color, width });
    },
    /** cols × rows RGBA pixels stretched over the box, unsmoothed (a heatmap of many cells). */
    raster(x, y, width, height, cols, rows, rgba) {
      items.push({ type: "raster", x, y, width, height, cols, rows, rgba });
    },
    /** Weighted lines, grouped by colour and opacity level as both sinks stroke them. */
    lines(lines, colorOf, ends, width = 1) {
      const groups = groupWeightedLines(lines, colorOf).map(({ color, alpha, lines: group }) => ({
        color, alpha, count: group.length, segments: group.map(ends),
      }));
      items.push({ type: "lines", width, groups });
    },
  };
}

/** The raster's pixels on a canvas of their own size, or null where no canvas can draw (jsdom). */
function rasterCanvas(item) {
  const canvas = document.createElement("canvas");
  canvas.width = item.cols;
  canvas.height = item.rows;
  const ctx = canvas.getContext?.("2d");
  if (!ctx) return null;
  ctx.putImageData(new ImageData(item.rgba, item.cols, item.rows), 0, 0);
  return canvas;
}

export const sceneColors = (dark) => ({ background: dark ? "#111" : "#fff", foreground: dark ? "#eee" : "#222" });

/** The scene on a canvas context whose transform maps scene px (the caller sizes and scales it). */
export function drawScene(ctx, scene, { dark = false } = {}) {
  const { background, foreground } = sceneColors(dark);
  if (scene.background) {
    ctx.fillStyle = background;
    ctx.fillRect(0, 0, scene.width, scene.height);
  }
  for (const item of scene.items) {
    if (item.type === "rect") {
      ctx.fillStyle = item.fill;
      ctx.fillRect(item.x, item.y, item.width, item.height);
    } else if (item.type === "raster") {
      const pixels = rasterCanvas(item);
      if (pixels) {
        ctx.imageSmoothingEnabled = false;
        ctx.drawImage(pixels, item.x, item.y, item.width, item.height);
        ctx.imageSmoothingEnabled = true;
      }
    } else if (item.type === "circle") {
      ctx.fillStyle = item.fill;
      ctx.beginPath();
      ctx.arc(item.cx, item.cy, item.r, 0, 2 * Math.PI);
      ctx.fill();
    } else if (item.type === "segment") {
      ctx.strokeStyle = item.color;
      ctx.lineWidth = item.width;
      ctx.beginPath();
      ctx.moveTo(item.x0, item.y0);
      ctx.lineTo(item.x1, item.y1);
      ctx.stroke();
    } else if (item.type === "lines") {
      ctx.lineWidth = item.width;
      for (const group of item.groups) {
        ctx.globalAlpha = group.alpha;
        ctx.strokeStyle = group.color;
        ctx.beginPath();
        for (const [x0, y0, x1, y1] of group.segments) {
          ctx.moveTo(x0, y0);
          ctx.lineTo(x1, y1);
        }
        ctx.stroke();
      }
      ctx.globalAlpha = 1;
    } else if (item.type === "text") {
      ctx.save();
      ctx.fillStyle = item.color ?? foreground;
      ctx.font = `${item.size}px ${FONT}`;
      ctx.textAlign = item.anchor === "middle" ? "center" : item.anchor === "end" ? "right" : "left";
      ctx.textBaseline = "middle";
      ctx.translate(item.x, item.y);
      if (item.rotate) ctx.rotate((item.rotate * Math.PI) / 180);
      ctx.fillText(svgSafeText(item.text), 0, 0);
      ctx.restore();
    }
  }
}

function svgNode(parent, tag, attributes) {
  const node = document.createElementNS(NS, tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
  parent.appendChild(node);
  return node;
}

const round = (v) => Math.round(v * 10) / 10;

/** A raster as one embedded PNG (pixelated when scaled), or as a rect per pixel where no canvas can encode one. */
function svgRaster(root, item) {
  const pixels = rasterCanvas(item);
  const box = { x: round(item.x), y: round(item.y), width: round(item.width), height: round(item.height) };
  if (pixels) {
    const image = svgNode(root, "image", { ...box, preserveAspectRatio: "none", style: "image-rendering: pixelated", class: "raster" });
    image.setAttribute("href", pixels.toDataURL("image/png"));
    return;
  }
  const group = svgNode(root, "g", { class: "raster" });
  const [w, h] = [item.width / item.cols, item.height / item.rows];
  for (let r = 0; r < item.rows; r++) {
    for (let c = 0; c < item.cols; c++) {
      const at = (r * item.cols + c) * 4;
      if (!item.rgba[at + 3]) continue;
      svgNode(group, "rect", { x: round(item.x + c * w), y: round(item.y + r * h), width: round(w), height: round(h),
        fill: `rgba(${item.rgba[at]},${item.rgba[at + 1]},${item.rgba[at + 2]},${(item.rgba[at + 3] / 255).toFixed(3)})` });
    }
  }
}

/** The scene as an SVG document's text. Token text goes in as textContent (XML-escaped). */
export function sceneToSvg(scene, { dark = false } = {}) {
  const { background, foreground } = sceneColors(dark);
  const { width, height } = scene;
  const root = document.createElementNS(NS, "svg");
  for (const [key, value] of Object.entries({ width, height, viewBox: `0 0 ${width} ${height}`, "font-family": FONT, "font-size": 12 })) {
    root.setAttribute(key, String(value));
  }
  if (scene.background) svgNode(root, "rect", { class: "background", x: 0, y: 0, width, height, fill: background });
  for (const item of scene.items) {
    if (item.type === "rect") {
      const rect = svgNode(root, "rect", { x: round(item.x), y: round(item.y), width: round(item.width), height: round(item.height), fill: item.fill });
      if (item.role) rect.setAttribute("class", item.role);
    } else if (item.type === "raster") {
      svgRaster(root, item);
    } else if (item.type === "circle") {
      svgNode(root, "circle", { cx: round(item.cx), cy: round(item.cy), r: item.r, fill: item.fill });
    } else if (item.type === "segment") {
      svgNode(root, "line", { x1: item.x0, y1: item.y0, x2: item.x1, y2: item.y1, stroke: item.color, "stroke-width": item.width });
    } else if (item.type === "lines") {
      for (const group of item.groups) {
        const d = group.segments.map(([x0, y0, x1, y1]) => `M${round(x0)} ${round(y0)}L${round(x1)} ${round(y1)}`).join("");
        const path = svgNode(root, "path", { d, stroke: group.color, "stroke-opacity": group.alpha, "stroke-width": item.width, fill: "none" });
        path.setAttribute("data-lines", String(group.count));
      }
    } else if (item.type === "text") {
      const node = svgNode(root, "text", {
        x: round(item.x), y: round(item.y), "text-anchor": item.anchor, "dominant-baseline": "middle", fill: item.color ?? foreground,
      });
      if (item.size !== 12) node.setAttribute("font-size", String(item.size));
      if (item.rotate) node.setAttribute("transform", `rotate(${item.rotate} ${round(item.x)} ${round(item.y)})`);
      if (item.role) node.setAttribute("class", item.role);
      node.textContent = svgSafeText(item.text); // data, never markup
    }
  }
  return new XMLSerializer().serializeToString(root);
}

/** PNG bytes of the scene drawn on a canvas at `scale` × its size (the same drawing as the screen's). */
export async function sceneToPng(scene, { dark = false, scale = 2 } = {}) {
  const canvas = document.createElement("canvas");
  canvas.width = Math.round(scene.width * scale);
  canvas.height = Math.round(scene.height * scale);
  const ctx = canvas.getContext("2d");
  if (!ctx) throw new Error("this browser cannot draw on a canvas, so no PNG (SVG works)");
  ctx.scale(scale, scale);
  drawScene(ctx, scene, { dark });
  const blob = await new Promise((resolve, reject) => canvas.toBlob((b) => (b ? resolve(b) : reject(new Error("PNG encoding failed"))), "image/png"));
  return new Uint8Array(await blob.arrayBuffer());
}

/**
 * A view's image methods from its scene function: scene(opts), toSvg(opts) → SVG text and
 * toPng(opts) → Promise of PNG bytes, opts {title, dark, scale}.
 */
export function imageMethods(sceneOf) {
  return {
    scene: (opts = {}) => sceneOf(opts),
    toSvg: (opts = {}) => sceneToSvg(sceneOf(opts), opts),
    toPng: (opts = {}) => sceneToPng(sceneOf(opts), opts),
  };
}
