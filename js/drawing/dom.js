// Small DOM helpers. Text goes in through textContent only: token text is data, never HTML.

export function el(tag, className, parent) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (parent) parent.appendChild(node);
  return node;
}

/** `control` in a labelled control of `parent`, the label's text before it. */
export function labelled(parent, text, control) {
  const label = el("label", "attnscope-control", parent);
  el("span", "", label).textContent = text;
  label.appendChild(control);
  return label;
}

/** A <select> of [[value, text], ...]. */
export function select(className, options) {
  const node = el("select", className);
  for (const [value, text] of options) {
    const option = el("option", "", node);
    option.value = String(value);
    option.textContent = text;
  }
  return node;
}

/**
 * A token's text as a child of `parent`: data, never HTML. Its note, when it has one (which
 * character's bytes a "↑" token holds, the text an [UNK] stands for), shows on hover.
 */
export function tokenText(parent, token, note = "") {
  const text = el("span", "attnscope-token-text", parent);
  text.textContent = token;
  if (note) text.title = note;
  return text;
}

/** A token as a hover card reads it: “label”, with its note when the label alone says too little. */
export function tokenCaption(token, note = "") {
  return note ? `“${token}” (${note})` : `“${token}”`;
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

/**
 * Shows `box` (absolutely placed in its offset parent) beside `anchor`, a {left, right, top}
 * in that parent's px: right of anchor.right, or left of anchor.left where it would leave the
 * parent; at anchor.top, moved up to stay inside the part of the parent on screen (cut by the
 * widget's scrolling body, the notebook and the window: visibleSpan). Hover cards stay inside
 * the widget, for a point at its bottom edge too.
 */
export function placeBeside(box, anchor) {
  box.hidden = false;
  // At the parent's origin while measuring: placed where it was last, the box itself would
  // stretch the parent's scrollHeight and so the room it is fitted into.
  box.style.left = box.style.top = "0px";
  const parent = box.offsetParent;
  const width = parent?.clientWidth ?? Infinity;
  const scrolled = parent?.scrollTop ?? 0; // a scrolling parent places its children in its content's px
  const seen = parent ? visibleSpan(parent) : null;
  const bottom = seen ? seen.bottom + scrolled : Math.max(parent?.clientHeight ?? 0, parent?.scrollHeight ?? 0) || Infinity;
  const left = anchor.right + box.offsetWidth <= width ? anchor.right : anchor.left - box.offsetWidth;
  const top = Math.max(seen ? seen.top + scrolled : 0, Math.min(anchor.top, bottom - box.offsetHeight));
  box.style.left = `${Math.max(0, left)}px`;
  box.style.top = `${Math.max(0, top)}px`;
}

/**
 * The part of `element` on screen, {top, bottom} in px from its own top: its box cut by the
 * window and by every ancestor that clips (a scrolling body, a notebook's scroller). Null when
 * it is not laid out (display: none, or no layout as in jsdom).
 */
export function visibleSpan(element) {
  const rect = element.getBoundingClientRect();
  if (!rect.height) return null;
  let top = Math.max(rect.top, 0);
  let bottom = Math.min(rect.bottom, globalThis.innerHeight || rect.bottom);
  // Up to the body, not through it: a body's overflow is the viewport's (CSS propagates it), so
  // JupyterLab 4.6's `body { overflow: hidden }`, 0 px tall, clips nothing.
  const page = element.ownerDocument?.body;
  for (let parent = element.parentElement; parent && parent !== page; parent = parent.parentElement) {
    if (getComputedStyle(parent).overflowY === "visible") continue;
    const clip = parent.getBoundingClientRect();
    top = Math.max(top, clip.top);
    bottom = Math.min(bottom, clip.bottom);
  }
  return { top: top - rect.top, bottom: Math.max(top, bottom) - rect.top };
}

/** The pointer's position in `canvas`'s CSS px. */
export function pointerIn(canvas, event) {
  const rect = canvas.getBoundingClientRect();
  return [event.clientX - rect.left, event.clientY - rect.top];
}

/** The hover card near the point (x, y) of `canvas`, kept inside the view (placeBeside). */
export function placeTooltip(tooltip, canvas, x, y) {
  const [px, py] = [canvas.offsetLeft + x, canvas.offsetTop + y];
  placeBeside(tooltip, { left: px - 14, right: px + 14, top: py + 14 });
}
