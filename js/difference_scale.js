// A difference (|second − first| of two models, Show change's |A_masked − A|) is drawn on ONE
// scale for every layer and head: the kernel sends |difference| ÷ the run's largest
// (payloads.one_scale, the difference_scale trait), so a head that barely changed is faint next
// to one that changed much. The views say what the darkest line is and give numbers unscaled.
import { headName } from "./labels.js";

/** @typedef {{of: string, largest: number, layer: number, head: number}} DifferenceScale */

/** The scale the views' weights are on while they draw a difference, or null (attention itself).
 * @returns {DifferenceScale | null} */
export function differenceScale(get) {
  const scale = get("difference_scale");
  return scale && typeof scale.largest === "number" ? scale : null;
}

/** What a line's opacity means, said once for every head (the views' legend and their pictures').
 * @param {DifferenceScale} scale */
export function differenceNote({ of, largest, layer, head }) {
  if (!(largest > 0)) return `${of}: no weight differs, so no line is drawn.`;
  const top = largest.toFixed(3);
  return `${of}, one scale for every layer and head: darkest line = ${top}, the largest change (${headName(layer, head)}); `
    + `a line's opacity is its change ÷ ${top}.`;
}
