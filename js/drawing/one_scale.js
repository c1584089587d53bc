// What is drawn on ONE scale for every layer and head: a difference (|second − first| of two
// models, Show change's |A_masked − A|) or weights without a bound of 1 (‖αf(x)‖, Weigh by value
// norm). The kernel sends value ÷ the run's largest (payloads.one_scale, the one_scale trait), so a
// head that barely changed, or passes little, is faint next to one that changed or passes much.
// The views say what the strongest line is and give numbers unscaled.
import { headName } from "./labels.js";

/** of: what is drawn; measure: what one value is called ("change", "‖αf(x)‖"); over: what shares
 * the scale ("every layer and head", the default: the run's; a long run's thumbnails: those shown).
 * @typedef {{of: string, measure?: string, over?: string, largest: number, layer: number, head: number}} OneScale */

/** The scale the views' weights are on while they draw something other than attention, or null.
 * @returns {OneScale | null} */
export function oneScale(get) {
  const scale = get("one_scale");
  return scale && typeof scale.largest === "number" ? scale : null;
}

/** What one value is called in the views' words ("change" for a difference). */
export const measureOf = (scale) => scale.measure ?? "change";

/** What a line's opacity means, said once for every head (the views' legend and their pictures').
 * @param {OneScale} scale */
export function oneScaleNote(scale) {
  const { of, largest, layer, head } = scale;
  const measure = measureOf(scale);
  if (!(largest > 0)) {
    return measure === "change" ? `${of}: no weight differs, so no line is drawn.` : `${of}: every value is 0, so no line is drawn.`;
  }
  const top = largest.toFixed(3);
  return `${of}, one scale for ${scale.over ?? "every layer and head"}: strongest line = ${top}, the largest ${measure} (${headName(layer, head)}); `
    + `a line's opacity is its ${measure} ÷ ${top}.`;
}

/**
 * Thumbnails [L, H, S, S] of `layers` × `heads` on one scale that the page finds itself (a long
 * run's weighed thumbnails, which come in passes: payloads.long_thumbnails_scale): the values ÷
 * their largest, and the scale, `declared` ({of, measure, over}) with that largest and the layer
 * and head it is in. Max-pooled maps hold each head's largest value, so theirs is the largest of
 * every head's whole map (of the rows the passes so far cover). NaN never sets it.
 * @param {Float32Array} values @param {number[]} shape @param {number[]} layers @param {number[]} heads
 * @param {{of: string, measure?: string, over?: string}} declared
 * @returns {{values: Float32Array, scale: OneScale}}
 */
export function onOneScale(values, shape, layers, heads, declared) {
  let [largest, at] = [0, 0];
  for (let i = 0; i < values.length; i++) {
    if (values[i] > largest) [largest, at] = [values[i], i];
  }
  const cell = shape[2] * (shape[3] ?? shape[2]);
  const [row, col] = [Math.floor(at / (shape[1] * cell)), Math.floor(at / cell) % shape[1]];
  const scaled = largest > 0 ? values.map((v) => v / largest) : values;
  return { values: scaled, scale: { ...declared, largest, layer: layers[row], head: heads[col] } };
}
