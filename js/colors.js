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
