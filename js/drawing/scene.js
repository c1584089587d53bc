// A view's layout as plain data: a scene of primitives (text, rect, circle, segment, weighted
// lines) with their positions and colours, computed once by the view and drawn by thin sinks:
// drawScene onto a canvas (the screen, and PNG export) and sceneToSvg (SVG export). What the
// image shows is therefore where the screen shows it (vega's scenegraph, in small).
import { groupWeightedLines } from "./draw_lines.js";
import { base64Encode } from "./base64.js";
import { encodePng } from "./png.js";
import { PICTURE_FONT, svgSafeText, textWidth, wrapText } from "./svg.js";

const NS = "http://www.w3.org/2000/svg";
const FONT = PICTURE_FONT;

/**
 * @typedef {{type: "text", x: number, y: number, text: string, anchor: string,
 *   size: number, color: string | null, rotate: number, role: string}} TextItem
 * @typedef {{type: "rect", x: number, y: number, width: number, height: number, fill: string, role: string}} RectItem
 * @typedef {{type: "circle", cx: number, cy: number, r: number, fill: string, role: string, stroke?: string, strokeWidth?: number}} CircleItem
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
    /** fit: the width the text is drawn to exactly (its glyphs spaced or scaled), for text laid
     * out by estimated widths that must meet its neighbours (running text split into tokens). */
    text(x, y, text, { anchor = "start", size = 12, color = null, rotate = 0, role = "", fit = 0 } = {}) {
      items.push({ type: "text", x, y, text: String(text), anchor, size, color, rotate, role, ...(fit > 0 ? { fit } : {}) });
    },
    rect(x, y, width, height, fill, role = "") {
      items.push({ type: "rect", x, y, width, height, fill, role });
    },
    /** fill "none" and a stroke: a ring. */
    circle(cx, cy, r, fill, role = "", { stroke = "", strokeWidth = 1 } = {}) {
      items.push({ type: "circle", cx, cy, r, fill, role, ...(stroke ? { stroke, strokeWidth } : {}) });
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
      ctx.beginPath();
      ctx.arc(item.cx, item.cy, item.r, 0, 2 * Math.PI);
      if (item.fill !== "none") {
        ctx.fillStyle = item.fill;
        ctx.fill();
      }
      if (item.stroke) {
        ctx.strokeStyle = item.stroke;
        ctx.lineWidth = item.strokeWidth;
        ctx.stroke();
      }
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
      const measured = item.fit ? ctx.measureText(svgSafeText(item.text)).width : 0;
      if (measured > 0) ctx.scale(item.fit / measured, 1);
      ctx.fillText(svgSafeText(item.text), 0, 0);
      ctx.restore();
    }
  }
}

// XML text and attribute values; token text is made XML-safe first (svgSafeText).
const escapeXml = (text) => String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);

function svgTag(tag, attributes, content = null) {
  const attrs = Object.entries(attributes).map(([key, value]) => ` ${key}="${escapeXml(value)}"`).join("");
  return content === null ? `<${tag}${attrs}/>` : `<${tag}${attrs}>${content}</${tag}>`;
}

const round = (v) => Math.round(v * 10) / 10;

/** A raster as one embedded PNG, pixelated when scaled (the same pixels the canvas draws). */
function svgRaster(item) {
  const png = encodePng(item.rgba, item.cols, item.rows);
  return svgTag("image", {
    x: round(item.x), y: round(item.y), width: round(item.width), height: round(item.height), preserveAspectRatio: "none",
    style: "image-rendering: pixelated", class: "raster", href: `data:image/png;base64,${base64Encode(png)}`,
  });
}

function svgItem(item, foreground) {
  if (item.type === "rect") {
    return svgTag("rect", { x: round(item.x), y: round(item.y), width: round(item.width), height: round(item.height), fill: item.fill,
      ...(item.role ? { class: item.role } : {}) });
  }
  if (item.type === "raster") return svgRaster(item);
  if (item.type === "circle") {
    return svgTag("circle", { cx: round(item.cx), cy: round(item.cy), r: item.r, fill: item.fill,
      ...(item.stroke ? { stroke: item.stroke, "stroke-width": item.strokeWidth } : {}), ...(item.role ? { class: item.role } : {}) });
  }
  if (item.type === "segment") {
    return svgTag("line", { x1: item.x0, y1: item.y0, x2: item.x1, y2: item.y1, stroke: item.color, "stroke-width": item.width });
  }
  if (item.type === "lines") {
    return item.groups.map((group) => svgTag("path", {
      d: group.segments.map(([x0, y0, x1, y1]) => `M${round(x0)} ${round(y0)}L${round(x1)} ${round(y1)}`).join(""),
      stroke: group.color, "stroke-opacity": group.alpha, "stroke-width": item.width, fill: "none", "data-lines": group.count,
    })).join("");
  }
  if (item.type === "text") {
    // Colour and anchor are inherited from the root unless they differ: a picture holds thousands of labels.
    const attributes = { x: round(item.x), y: round(item.y), "dominant-baseline": "middle" };
    if (item.anchor !== "start") attributes["text-anchor"] = item.anchor;
    if (item.color && item.color !== foreground) attributes.fill = item.color;
    if (item.size !== 12) attributes["font-size"] = item.size;
    if (item.rotate) attributes.transform = `rotate(${item.rotate} ${round(item.x)} ${round(item.y)})`;
    if (item.role) attributes.class = item.role;
    if (item.fit) Object.assign(attributes, { textLength: round(item.fit), lengthAdjust: "spacingAndGlyphs", "xml:space": "preserve" });
    return svgTag("text", attributes, escapeXml(svgSafeText(item.text))); // data, never markup
  }
  return "";
}

/** The scene as an SVG document's text, made as a string: no DOM is needed (the kernel's picture
 * of a view is made by this same code, outside any browser). Token text is XML-escaped data.
 * null where its items alone would take more than maxBytes characters. */
export function sceneToSvg(scene, { dark = false, maxBytes = Infinity } = {}) {
  const { background, foreground } = sceneColors(dark);
  const { width, height } = scene;
  const parts = scene.background ? [svgTag("rect", { class: "background", x: 0, y: 0, width, height, fill: background })] : [];
  let length = 0;
  for (const item of scene.items) {
    const part = svgItem(item, foreground);
    length += part.length;
    if (length > maxBytes) return null; // the picture tries a thinner scene: the rest would be wasted work
    parts.push(part);
  }
  return svgTag("svg", { xmlns: NS, width, height, viewBox: `0 0 ${width} ${height}`, "font-family": FONT, "font-size": 12,
    fill: foreground, "text-anchor": "start" }, parts.join(""));
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

const CAPTION_SIZE = 11;
const CAPTION_PITCH = 15;

/** An item moved down by dy px (a new item: scenes may be drawn again). */
function movedDown(item, dy) {
  switch (item.type) {
    case "circle": return { ...item, cy: item.cy + dy };
    case "segment": return { ...item, y0: item.y0 + dy, y1: item.y1 + dy };
    case "lines":
      return { ...item, groups: item.groups.map((g) => ({ ...g, segments: g.segments.map(([x0, y0, x1, y1]) => [x0, y0 + dy, x1, y1 + dy]) })) };
    default: return { ...item, y: item.y + dy }; // text, rect, raster
  }
}

/**
 * An image's scene with a caption under its title (every scene's title is its one item at the
 * top, role "title"): the sentences that say what state the picture shows (views.js
 * imageCaption), wrapped to the scene's width, the rest of the scene moved down below them. The
 * scene widens to its title where the title is the longer.
 */
export function withCaption(scene, caption = []) {
  const title = scene.items.find((item) => item.role === "title");
  const width = Math.max(scene.width, title ? textWidth(title.text) + 16 : 0);
  if (!caption.length) return width === scene.width ? scene : { ...scene, width };
  const lines = caption.flatMap((sentence) => wrapText(sentence, width - 12, CAPTION_SIZE));
  const dy = lines.length * CAPTION_PITCH + 6;
  const items = scene.items.map((item) => (item === title ? item : movedDown(item, dy)));
  const x = title?.x ?? 6;
  lines.forEach((line, i) => {
    items.push({ type: "text", x, y: 28 + i * CAPTION_PITCH, text: line, anchor: "start", size: CAPTION_SIZE, color: null, rotate: 0, role: "caption" });
  });
  return { ...scene, width, height: scene.height + dy, items };
}

/**
 * A view's image methods from its scene function: scene(opts), toSvg(opts) → SVG text and
 * toPng(opts) → Promise of PNG bytes, opts {title, caption, dark, scale} (caption: sentences
 * under the title, withCaption).
 */
export function imageMethods(sceneOf) {
  const captioned = (opts) => withCaption(sceneOf(opts), opts.caption);
  return {
    scene: (opts = {}) => captioned(opts),
    toSvg: (opts = {}) => sceneToSvg(captioned(opts), opts),
    toPng: (opts = {}) => sceneToPng(captioned(opts), opts),
  };
}
