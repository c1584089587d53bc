import { interpolateSinebow } from "d3-scale-chromatic";

// Twelve clearly distinct hues for BERT-sized models (BertViz's schemeCategory10 repeats heads
// 0 and 1 as heads 10 and 11); more heads get evenly spaced hues, still one per head.
const PALETTE_12 = [
  "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
  "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#f2c100", "#5b3fe0",
];

export function headColors(n) {
  if (n <= PALETTE_12.length) return PALETTE_12.slice(0, n);
  return Array.from({ length: n }, (_, i) => interpolateSinebow(i / n));
}

// Two decimals: 100 shades a colour bar cannot tell apart more finely, and fewer distinct strings to write.
const unit = (t) => Math.max(0, Math.min(1, t)).toFixed(2);
// One blue over any background: 0 is transparent, so the dark theme shows no white block.
export const attentionShade = (t) => `rgba(33,113,181,${unit(t)})`;
// Tokens set aside from the colour scale (attention sinks): grey on their own scale.
export const asideShade = (t) => `rgba(128,128,128,${unit(t)})`;
/**
 * Whether a shade made above (its alpha written by `unit`, two decimals) is deep enough that the
 * text on it is drawn light: dark text on the full blue read at about 3:1 (a "." was lost), white
 * on it reads at 5:1; below 0.8 the dark text reads better.
 */
export const isDeepShade = (color) => color.length > 5 && color.slice(-5, -1) >= "0.80";
/** The same blue as [r, g, b, a] bytes over a canvas pixel (the map's raster). */
export const ATTENTION_RGB = [33, 113, 181];
export const ASIDE_RGB = [128, 128, 128];

// Signed values (a neuron view's q, k, products; a heatmap's loss change or Δ log p): blue below 0,
// orange above, transparent at 0 (no white block on the dark theme), full at the largest magnitude.
const NEGATIVE = [31, 119, 180];
const POSITIVE = [255, 127, 14];

/** rgba() for a signed value, relative to the largest magnitude `scale`. */
export function divergingColor(value, scale) {
  if (!Number.isFinite(value) || scale <= 0) return "rgba(0,0,0,0)";
  const [r, g, b] = value < 0 ? NEGATIVE : POSITIVE;
  return `rgba(${r},${g},${b},${Math.min(1, Math.abs(value) / scale).toFixed(3)})`;
}

/** [r, g, b, alpha 0..255] of a signed value relative to `scale`, or null for none (0, masked). */
export function signedPixel(value, scale) {
  if (!Number.isFinite(value) || value === 0 || scale <= 0) return null;
  return [...(value < 0 ? NEGATIVE : POSITIVE), Math.round(255 * Math.min(1, Math.abs(value) / scale))];
}

export function maxAbs(values) {
  let m = 0;
  for (const v of values) if (Number.isFinite(v) && Math.abs(v) > m) m = Math.abs(v);
  return m;
}
