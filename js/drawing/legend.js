// Legends, each one spec drawn by two back ends, HTML on screen and scene items in the images, so
// the legend a figure carries is the screen's: colour bars with numbers (label, colour stops,
// ticks) and keys of categories ([name, colour] a category: swatches in rows).
import { el } from "./dom.js";
import { textWidth } from "./svg.js";

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

/** @typedef {[string, string][]} Key  each category's name and swatch colour */

const KEY_SWATCH = 10;
const KEY_SIZE = 11; // px, the names' font
const KEY_GAP = 12; // px between one entry's name and the next swatch
export const KEY_PITCH = 18; // px a row of a key takes in a scene

const entryWidth = (name) => KEY_SWATCH + 4 + textWidth(name, KEY_SIZE);

/** The widest entry of a key: no row of it can be narrower. */
export const keyMinWidth = (key) => Math.max(0, ...key.map(([name]) => entryWidth(name)));

/** Where each entry goes, in rows no wider than `width` (an entry wider than that alone on its
 * row): → {entries: [{name, color, x, row}], rows}. A picture is scaled down to fit its output,
 * so a key wraps rather than widening it past the map it explains. */
export function keyLayout(key, width) {
  const entries = [];
  let [x, row] = [0, 0];
  for (const [name, color] of key) {
    const w = entryWidth(name);
    if (x > 0 && x + w > width) [x, row] = [0, row + 1];
    entries.push({ name, color, x, row });
    x += w + KEY_GAP;
  }
  return { entries, rows: key.length ? row + 1 : 0 };
}

/** The key as scene items with its top-left at (x, y), in rows no wider than `width`; → its height in px. */
export function keyScene(s, x, y, key, width) {
  const { entries, rows } = keyLayout(key, width);
  for (const entry of entries) {
    const middle = y + (entry.row + 0.5) * KEY_PITCH;
    s.rect(x + entry.x, middle - KEY_SWATCH / 2, KEY_SWATCH, KEY_SWATCH, entry.color, "legend-swatch");
    s.text(x + entry.x + KEY_SWATCH + 4, middle, entry.name, { size: KEY_SIZE, role: "legend" });
  }
  return rows * KEY_PITCH;
}

/** The key on screen, in `parent`: a swatch and a name an entry, wrapping as the page allows. */
export function renderKey(parent, key) {
  parent.replaceChildren();
  for (const [name, color] of key) {
    const item = el("span", "attnscope-legend-item", parent);
    el("span", "attnscope-category", item).style.background = color;
    item.append(name); // a text node: names are data
  }
}

const SWATCH_PITCH = 26; // px from one head's swatch to the next
const SWATCH_ROW = 20;

/** The head view's key in a picture, its visible heads' numbered swatches, in rows no wider than
 * `width` (a model of 16 or more heads would run past the picture): → {heads, perRow, height}. */
export function headSwatches(heads, width) {
  const perRow = Math.max(1, Math.floor((width + 4) / SWATCH_PITCH)); // the last swatch needs 22 px, not 26
  return { heads, perRow, height: Math.max(1, Math.ceil(heads.length / perRow)) * SWATCH_ROW };
}

/** headSwatches' swatches as scene items from (x, y), each in its head's colour (colors[head]). */
export function headSwatchesScene(s, x, y, { heads, perRow }, colors) {
  heads.forEach((head, i) => {
    const [left, top] = [x + (i % perRow) * SWATCH_PITCH, y + Math.floor(i / perRow) * SWATCH_ROW];
    s.rect(left, top, 22, 14, colors[head], "swatch");
    s.text(left + 11, top + 7, String(head), { anchor: "middle", color: "#fff", size: 10 });
  });
}

/** A value as tooltips and cells write it: n/a, ±∞, or `digits` decimals. */
export function formatValue(value, digits) {
  if (Number.isNaN(value)) return "n/a";
  if (!Number.isFinite(value)) return value > 0 ? "∞" : "−∞";
  return value.toFixed(digits);
}
