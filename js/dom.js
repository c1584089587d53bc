// Small DOM helpers. Text goes in through textContent only: token text is data, never HTML.

export function el(tag, className, parent) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (parent) parent.appendChild(node);
  return node;
}

/** A canvas sized in CSS pixels, backed at the screen's pixel ratio; returns its 2-D context or null. */
export function sizeCanvas(canvas, width, height) {
  const ratio = globalThis.devicePixelRatio || 1;
  canvas.width = Math.max(1, Math.round(width * ratio));
  canvas.height = Math.max(1, Math.round(height * ratio));
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  const ctx = canvas.getContext?.("2d") ?? null;
  ctx?.setTransform(ratio, 0, 0, ratio, 0, 0);
  return ctx;
}
