// The text view's colour scale, one function for the live flow and the kernel's picture: blue up
// to the largest weight of the text shown, the tokens set aside and the selected token's own
// weight left out; grey for the tokens set aside, on their own scale; and the sentence saying so.
import { asideShade, attentionShade } from "./colors.js";
import { colorBar, formatTick } from "./legend.js";

// Decimals for two significant figures, three at least: a long text's weights are small, and at
// three decimals a view's top of 0.0014 and the next view's 0.0006 read alike.
const digitsFor = (v) => (v > 0 ? Math.min(5, Math.max(3, 1 - Math.floor(Math.log10(v)))) : 3);
/** A weight as the caption and the bar's ticks write it: 0.066, 0.0014, 3.2e-6. */
export const formatWeight = (v) => formatTick(v, digitsFor(v));
const format = formatWeight;

/**
 * The scale of `values` for the tokens [lo, hi) shown: {max, asideMax, aside, selected, shown, own,
 * ownShown, largest, largestAt}. max: the largest weight in [lo, hi) of the tokens not set aside,
 * the selected token's own left out (`shown` false: none there is above 0, and max is the
 * whole text's); larger weights show at full colour. largest: the largest anywhere but the
 * selected token's own, at token largestAt.
 *
 * The largest shown, not a percentile as the map's: a screen of text holds a few hundred tokens,
 * where the 99.5th percentile is about the second largest, and which one changes with the
 * window's size; and the text is read for its largest weights, which a percentile would draw
 * alike. The outliers that washed a paragraph out are known and left out by name: the sinks
 * (set aside, on their own scale) and the selected token's weight on itself.
 */
export function textScale(values, { aside = 0, selected = -1, lo = 0, hi = values.length } = {}) {
  let [max, whole, asideMax, largest, largestAt] = [0, 0, 0, 0, -1];
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (!(v > 0) || i === selected) continue;
    if (v > largest) [largest, largestAt] = [v, i];
    if (i < aside) asideMax = Math.max(asideMax, v);
    else {
      whole = Math.max(whole, v);
      if (i >= lo && i < hi) max = Math.max(max, v);
    }
  }
  const own = values[selected] ?? 0;
  return { max: (max || whole) || 1e-12, asideMax: asideMax || 1e-12, aside, selected, shown: max > 0, own,
    ownShown: selected >= Math.max(aside, lo) && selected < hi, largest, largestAt };
}

/** Token i's colour, (i) → CSS colour: blue on the scale of the tokens not set aside, grey on
 * their own. Made when asked for: a long text writes those in view first, and 131,072 colour
 * strings made up front took longer than the frame. */
export function shadeOf(values, scale) {
  const { aside, max, asideMax } = scale;
  return (i) => (i < aside ? asideShade(values[i] / asideMax) : attentionShade(values[i] / max));
}

/** The colour bars the view shows (the second only with tokens set aside). */
export function textBars(scale) {
  const { aside, max, asideMax } = scale;
  const bars = [colorBar("attention", 0, max, attentionShade, { digits: digitsFor(max) })];
  if (aside > 0) bars.push(colorBar(`first ${aside === 1 ? "token" : `${aside} tokens`} (set aside)`, 0, asideMax, asideShade, { digits: digitsFor(asideMax) }));
  return bars;
}

/**
 * What the blue bar's top is, e.g. "colour full at 0.041, the largest of the text in view (the
 * selected token's own 0.520 and the set-aside first token left out; largest anywhere 0.326,
 * token 0)". `where`: what is shown ("the text in view" on screen, "the lines shown" in a picture).
 */
export function textScaleNote(scale, where = "the text in view") {
  const { max, aside, own, ownShown, largest, largestAt } = scale;
  const out = [];
  if (ownShown && own > max) out.push(`the selected token's own ${format(own)}`);
  if (aside > 0) out.push(aside === 1 ? "the set-aside first token" : `the ${aside} set-aside first tokens`);
  const notes = [];
  if (out.length) notes.push(`${out.join(" and ")} left out`);
  if (largest > max) notes.push(`largest anywhere ${format(largest)}, token ${largestAt}`);
  const what = scale.shown ? `the largest of ${where}` : `the largest of the text (none of ${where} is above 0)`;
  return `colour full at ${format(max)}, ${what}${notes.length ? ` (${notes.join("; ")})` : ""}`;
}

/** The first index in [lo, hi) where `below(i)` holds (hi if none), false then true along the range. */
function firstWhere(lo, hi, below) {
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (below(mid)) hi = mid; else lo = mid + 1;
  }
  return lo;
}

/**
 * [first, end) of the tokens on the lines in `flow`'s view, bisected in [lo, hi) (the spans of
 * the blocks in view, which the browser has laid out): a few dozen tokens' places read, not a
 * screen's. [lo, hi) itself when the flow is not laid out (jsdom, a hidden output).
 * @param {HTMLElement} flow
 * @param {HTMLElement[]} spans
 * @param {number[]} range [lo, hi)
 */
export function tokensInView(flow, spans, range) {
  const [lo, hi] = range;
  const height = flow.clientHeight;
  if (!height || hi <= lo) return [lo, hi];
  const top = flow.scrollTop;
  // A block is its tokens' offset parent (content-visibility contains their layout).
  const placeOf = (i) => {
    const span = spans[i];
    return span.offsetTop + (span.offsetParent === span.parentElement ? span.parentElement.offsetTop : 0);
  };
  const first = firstWhere(lo, hi, (i) => placeOf(i) + spans[i].offsetHeight > top);
  const end = firstWhere(first, hi, (i) => placeOf(i) >= top + height);
  return first < hi ? [first, Math.max(end, first + 1)] : [lo, hi];
}
