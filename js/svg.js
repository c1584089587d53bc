// Vector images of the views (SVG, and PNG rendered from it), built from the same data the
// canvases draw. Text goes in with textContent, so XMLSerializer escapes token text; every text
// goes in through svgText, which first makes it XML-safe (svgSafeText).
const NS = "http://www.w3.org/2000/svg";
const ALPHA_LEVELS = 32; // as draw_lines.js: one path per colour and opacity level

// What XML 1.0 forbids (C0 controls, lone surrogates, U+FFFE/U+FFFF) or shows as nothing (DEL, C1).
// With the u flag a surrogate pair is one code point, so [\u{D800}-\u{DFFF}] matches lone halves only.
const UNSAFE = /[\u{0}-\u{1F}\u{7F}-\u{9F}\u{D800}-\u{DFFF}\u{FFFE}\u{FFFF}]/gu;

/**
 * Text that XML 1.0 accepts and that still shows what was there: C0 controls become their Unicode
 * control pictures (U+0000 → ␀, tab → ␉, newline → ␊), DEL becomes ␡, C1 controls become a
 * visible "\u0085" escape, and lone surrogates and the non-characters U+FFFE/U+FFFF become U+FFFD.
 */
export function svgSafeText(text) {
  return String(text).replace(UNSAFE, (c) => {
    const code = c.codePointAt(0);
    if (code < 0x20) return String.fromCodePoint(0x2400 + code);
    if (code === 0x7f) return "\u2421";
    if (code <= 0x9f) return `\\u${code.toString(16).padStart(4, "0")}`;
    return "\ufffd";
  });
}

export function svgDocument(width, height, dark = false) {
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("width", String(Math.ceil(width)));
  svg.setAttribute("height", String(Math.ceil(height)));
  svg.setAttribute("viewBox", `0 0 ${Math.ceil(width)} ${Math.ceil(height)}`);
  svg.setAttribute("font-family", "sans-serif");
  svg.setAttribute("font-size", "12");
  const background = svgRect(svg, 0, 0, width, height, dark ? "#111" : "#fff");
  background.setAttribute("class", "background");
  svg.dataset.fg = dark ? "#eee" : "#222";
  return svg;
}

export function svgRect(parent, x, y, width, height, fill) {
  const rect = document.createElementNS(NS, "rect");
  for (const [k, v] of Object.entries({ x, y, width, height, fill })) rect.setAttribute(k, String(v));
  parent.appendChild(rect);
  return rect;
}

export function svgText(parent, x, y, text, { anchor = "start", color, size, rotate } = {}) {
  const node = document.createElementNS(NS, "text");
  node.setAttribute("x", String(x));
  node.setAttribute("y", String(y));
  node.setAttribute("text-anchor", anchor);
  node.setAttribute("dominant-baseline", "middle");
  node.setAttribute("fill", color ?? parent.ownerSVGElement?.dataset.fg ?? parent.dataset?.fg ?? "#222");
  if (size) node.setAttribute("font-size", String(size));
  if (rotate) node.setAttribute("transform", `rotate(${rotate} ${x} ${y})`);
  node.textContent = svgSafeText(text); // data, never markup; XML-safe (see svgSafeText)
  parent.appendChild(node);
  return node;
}

export function svgCircle(parent, cx, cy, r, fill) {
  const node = document.createElementNS(NS, "circle");
  for (const [k, v] of Object.entries({ cx, cy, r, fill })) node.setAttribute(k, String(v));
  parent.appendChild(node);
  return node;
}

/** Weighted lines as few <path>s: grouped by colour and opacity level, like the canvas drawing. */
export function svgLines(parent, lines, colorOf, ends, lineWidth = 1) {
  const groups = new Map();
  for (const line of lines) {
    const level = Math.min(ALPHA_LEVELS, Math.ceil(line.weight * ALPHA_LEVELS));
    const key = `${colorOf(line)}|${level}`;
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(line);
  }
  const round = (v) => Math.round(v * 10) / 10;
  for (const [key, group] of groups) {
    const [color, level] = key.split("|");
    const path = document.createElementNS(NS, "path");
    path.setAttribute("d", group.map((line) => {
      const [x0, y0, x1, y1] = ends(line);
      return `M${round(x0)} ${round(y0)}L${round(x1)} ${round(y1)}`;
    }).join(""));
    path.setAttribute("stroke", color);
    path.setAttribute("stroke-opacity", String(Number(level) / ALPHA_LEVELS));
    path.setAttribute("stroke-width", String(lineWidth));
    path.setAttribute("fill", "none");
    path.dataset.lines = String(group.length);
    parent.appendChild(path);
  }
}

export function serializeSvg(svg) {
  return new XMLSerializer().serializeToString(svg);
}

/** Rough text width for layout (the SVG is drawn without measuring in a live page). */
export function textWidth(text, size = 12) {
  return Math.ceil(svgSafeText(text).length * size * 0.6); // as drawn: a C1 control is 6 characters
}

/** PNG bytes of an SVG string, at `scale` × its size (a browser renders it). */
export async function svgToPng(svgText, scale = 2) {
  const width = Number(/width="(\d+)"/.exec(svgText)?.[1] ?? 800);
  const height = Number(/height="(\d+)"/.exec(svgText)?.[1] ?? 600);
  const image = new Image();
  image.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svgText)}`;
  await image.decode();
  const canvas = document.createElement("canvas");
  canvas.width = Math.round(width * scale);
  canvas.height = Math.round(height * scale);
  const ctx = canvas.getContext("2d");
  ctx.scale(scale, scale);
  ctx.drawImage(image, 0, 0);
  const blob = await new Promise((resolve, reject) => canvas.toBlob((b) => (b ? resolve(b) : reject(new Error("PNG encoding failed"))), "image/png"));
  return new Uint8Array(await blob.arrayBuffer());
}
