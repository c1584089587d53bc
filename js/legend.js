// Colour bars with numbers: one spec (label, colour stops, ticks) drawn by two back ends, an HTML
// bar on screen and scene items in the images, so the legend a figure carries is the screen's.
import { el } from "./dom.js";

export const BAR_WIDTH = 140;
export const BAR_HEIGHT = 34; // px a bar takes in a scene: label, bar, ticks

/**
 * @typedef {{label: string, stops: string[], ticks: {at: number, text: string}[]}} ColorBar
 */

/** A bar from `min` to `max`: colorAt(t) for t in [0, 1]; ticks at both ends (and 0 when inside). */
export function colorBar(label, min, max, colorAt, { digits = 2, steps = 16 } = {}) {
  const stops = Array.from({ length: steps + 1 }, (_, i) => colorAt(i / steps));
  const ticks = [{ at: 0, text: formatTick(min, digits) }, { at: 1, text: formatTick(max, digits) }];
  if (min < 0 && max > 0) ticks.splice(1, 0, { at: -min / (max - min), text: "0" });
  return { label, stops, ticks };
}

/** A number as the bars' ticks write it: `digits` decimals, or exponent form where those would read 0. */
export function formatTick(value, digits) {
  if (!Number.isFinite(value)) return "n/a";
  const magnitude = Math.abs(value);
  return magnitude !== 0 && (magnitude < 10 ** -digits || magnitude >= 1e4) ? value.toExponential(1) : value.toFixed(digits);
}

/** The bar as scene items with its top-left at (x, y); BAR_HEIGHT px tall. */
export function colorBarScene(s, x, y, bar, width = BAR_WIDTH) {
  s.text(x, y + 5, bar.label, { size: 10, role: "legend" });
  const step = width / bar.stops.length;
  bar.stops.forEach((color, i) => { s.rect(x + i * step, y + 11, step + 0.5, 9, color, "legend-bar"); });
  for (const { at, text } of bar.ticks) {
    s.text(x + at * width, y + 28, text, { size: 9, anchor: at === 0 ? "start" : at === 1 ? "end" : "middle", role: "legend-tick" });
  }
}

/** The bar on screen, in `parent`: label, gradient, ticks (replaces what was there). */
export function renderColorBar(parent, bar, width = BAR_WIDTH) {
  parent.replaceChildren();
  parent.classList.add("attnscope-colorbar");
  el("div", "attnscope-colorbar-label", parent).textContent = bar.label;
  const gradient = el("div", "attnscope-colorbar-bar", parent);
  gradient.style.width = `${width}px`;
  gradient.style.background = `linear-gradient(to right, ${bar.stops.join(", ")})`;
  const ticks = el("div", "attnscope-colorbar-ticks", parent);
  ticks.style.width = `${width}px`;
  for (const { at, text } of bar.ticks) {
    const tick = el("span", "attnscope-colorbar-tick", ticks);
    tick.textContent = text;
    tick.style.left = `${at * 100}%`;
    tick.style.transform = at === 0 ? "none" : at === 1 ? "translateX(-100%)" : "translateX(-50%)";
  }
}

/** A value as tooltips and cells write it: n/a, ±∞, or `digits` decimals. */
export function formatValue(value, digits) {
  if (Number.isNaN(value)) return "n/a";
  if (!Number.isFinite(value)) return value > 0 ? "∞" : "−∞";
  return value.toFixed(digits);
}
