// Which lines the head view draws, and where: a line per (head, query, key) whose weight passes a
// threshold, the strongest first within a budget (a long text's heads have millions of weights),
// the token ranges a sentence filter keeps, and the lines' ends beside the token rows. Shared by
// the screen (head_view.js) and its pictures (headScene).

export const ROW_HEIGHT = 20;
export const LINES_WIDTH = 220;
// Hover bars: px for a weight of 1 where the plot has room beside the tokens.
export const BAR_PX = 40;
// Lines fainter than this are invisible on screen; skipping them keeps long inputs fast.
export const DEFAULT_MIN_WEIGHT = 0.005;
// Software-rendered canvases (no GPU) draw about 20k long lines in a few hundred ms; past that
// the strongest lines are kept and the view says so (hovering a token still shows all of its).
export const LINE_BUDGET = 20000;
const THRESHOLDS = [DEFAULT_MIN_WEIGHT, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.01];

/**
 * The lines the view draws without hover: the strongest that fit the budget, found in one pass
 * over the weights. → {lines: [{head, from, to, weight}], minWeight, kept, total}, where
 * minWeight is the smallest threshold whose line count fits and total counts every line at
 * least DEFAULT_MIN_WEIGHT.
 */
export function strongestLines(attention, options = {}, budget = LINE_BUDGET) {
  const [nHeads, nTokens, nKeys = nTokens] = attention.shape;
  const { visibleHeads = [...Array(nHeads).keys()], sentenceFilter = "all", sentenceBStart = null } = options;
  const ranges = rangesFor(attention.shape, sentenceBStart, sentenceFilter);
  const [toLo, toHi] = ranges.to;
  // The rows scanned: [head, from, index of the row's first shown key].
  const rows = [];
  for (const head of [...visibleHeads].sort((a, b) => a - b)) {
    if (head < 0 || head >= nHeads) continue;
    for (let from = ranges.from[0]; from < ranges.from[1]; from++) rows.push([head, from, (head * nTokens + from) * nKeys + toLo]);
  }
  const width = toHi - toLo;
  const counts = new Array(THRESHOLDS.length).fill(0); // counts[k] = weights in [T_k, T_k+1)
  const countWeight = (w, times) => {
    if (!(w >= THRESHOLDS[0])) return;
    let k = 0;
    while (k + 1 < THRESHOLDS.length && w >= THRESHOLDS[k + 1]) k++;
    counts[k] += times;
  };
  const levelFitting = () => fittingLevel(counts, budget);
  const total = () => counts.reduce((a, b) => a + b, 0);
  const lines = [];
  const { bytes } = attention;
  if (bytes) {
    // One-byte weights (the kernel's layer payload) are read as bytes, never decoded to floats:
    // a histogram of the bytes in view, then one pass keeping those at or above the byte that
    // fits (a 512-token layer is 3 MB, and an edit redraws it). Where bytes 0 and 1 weigh less
    // than the first threshold (the payload's scale, 1/255), most weights are one of them, and
    // both passes skip four such bytes at a time.
    const byteWeights = Float32Array.from({ length: 256 }, (_, b) => b * attention.scale);
    const words = bytes.byteOffset % 4 === 0 && byteWeights[1] < THRESHOLDS[0]
      ? new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.length >> 2) : null;
    // Each row's bytes as [start, end) spans to read one by one: the unaligned ends, and the
    // aligned words (of `words`) with a byte above 1.
    let spans = new Int32Array(4096);
    let n = 0;
    const push = (start, end) => {
      if (n + 2 > spans.length) {
        const grown = new Int32Array(spans.length * 2);
        grown.set(spans);
        spans = grown;
      }
      spans[n++] = start;
      spans[n++] = end;
    };
    for (const row of rows) {
      const first = row[2];
      const end = first + width;
      if (!words) {
        push(first, end);
      } else {
        const alignedStart = Math.min(end, (first + 3) & ~3);
        const alignedEnd = Math.max(alignedStart, end & ~3);
        if (first < alignedStart) push(first, alignedStart);
        for (let w = alignedStart >> 2, last = alignedEnd >> 2; w < last; w++) {
          if ((words[w] & 0xfefefefe) !== 0) push(w << 2, (w << 2) + 4);
        }
        if (alignedEnd < end) push(alignedEnd, end);
      }
      row.push(n); // where this row's spans end
    }
    const histogram = new Int32Array(256);
    for (let s = 0; s < n; s += 2) {
      for (let i = spans[s], end = spans[s + 1]; i < end; i++) histogram[bytes[i]]++;
    }
    if (words) histogram[0] = histogram[1] = 0; // partly skipped: weigh less than any line anyway
    histogram.forEach((times, b) => { if (times) countWeight(byteWeights[b], times); });
    const minWeight = THRESHOLDS[levelFitting()];
    let minByte = 1; // a zero weight is never a line
    while (minByte < 256 && byteWeights[minByte] < minWeight) minByte++;
    let s = 0;
    for (const row of rows) {
      const [head, from, first] = row;
      for (const rowEnd = row[3]; s < rowEnd; s += 2) {
        for (let i = spans[s], end = spans[s + 1]; i < end; i++) {
          const b = bytes[i];
          if (b >= minByte) lines.push({ head, from, to: toLo + i - first, weight: byteWeights[b] });
        }
      }
    }
    return { lines, minWeight, kept: lines.length, total: total(), counts };
  }
  const values = attention.values;
  for (const [, , first] of rows) {
    for (let i = first, end = first + width; i < end; i++) {
      const w = values[i];
      if (w >= THRESHOLDS[0]) countWeight(w, 1);
    }
  }
  const minWeight = THRESHOLDS[levelFitting()];
  for (const [head, from, first] of rows) {
    for (let i = first, end = first + width; i < end; i++) {
      if (values[i] >= minWeight) lines.push({ head, from, to: toLo + i - first, weight: values[i] });
    }
  }
  return { lines, minWeight, kept: lines.length, total: total(), counts };
}

/** The first threshold level whose lines (counts[k]: weights in [T_k, T_k+1)) fit the budget. */
function fittingLevel(counts, budget) {
  let fitting = counts.reduce((a, b) => a + b, 0);
  let level = 0;
  while (level < THRESHOLDS.length - 1 && fitting > budget) fitting -= counts[level++];
  return level;
}

// Each layer's strongest lines, kept with its numbers: a switch to a layer the page holds draws
// lines worked out while the page was idle (warmStrongestLines), not the ~25 ms scan and its garbage
// in the click (issue 45 item 7); and a head toggled adds up the heads' own lines, also worked out
// while the page is idle, not a scan of the layer in the click. Head by head: the lines of a set of
// heads are each head's lines at or above the set's threshold, since a set's threshold is never
// below that of one head in it alone (its counts are never smaller), in the order of one scan of
// them (head by head, row by row). A head's lines are kept packed (16 bytes a line, not an object):
// a 512-token layer's heads alone hold ~100k lines, and the page holds several layers.
const strongestMemo = new WeakMap(); // attention → {filter, heads: Map(head → packed lines of it alone), key, found}

const filterOf = (options) => JSON.stringify([options.sentenceFilter ?? "all", options.sentenceBStart ?? null]);

function memoOf(attention, options) {
  const filter = filterOf(options);
  let memo = strongestMemo.get(attention);
  if (memo?.filter !== filter) {
    memo = { filter, heads: new Map(), key: null, found: null };
    strongestMemo.set(attention, memo);
  }
  return memo;
}

/** strongestLines(attention, options), once per layer, heads and filter (the lines are read, never
 * changed); from each head's packed lines where warmHeads has made them, else one scan. */
export function strongestLinesOf(attention, options = {}) {
  const [nHeads] = attention.shape;
  const visible = [...new Set(options.visibleHeads ?? [...Array(nHeads).keys()])].filter((h) => h >= 0 && h < nHeads).sort((a, b) => a - b);
  const key = String(visible);
  const memo = memoOf(attention, options);
  if (memo.key === key) return memo.found;
  const found = visible.every((head) => memo.heads.has(head))
    ? fromHeads(visible.map((head) => [head, memo.heads.get(head)]))
    : strongestLines(attention, { ...options, visibleHeads: visible });
  Object.assign(memo, { key, found });
  return found;
}

/** Each head's lines of `attention` alone, packed, for strongestLinesOf (what a toggle reads). */
export function warmHeads(attention, options = {}) {
  for (let head = 0; head < attention.shape[0]; head++) warmHead(attention, options, head);
}

function warmHead(attention, options, head) {
  const memo = memoOf(attention, options);
  if (!memo.heads.has(head)) memo.heads.set(head, packedHead(attention, options, head));
}

/** strongestLines of one head alone, packed: {counts, from, to, weight} (typed arrays, scan order). */
function packedHead(attention, options, head) {
  const { lines, counts } = strongestLines(attention, { ...options, visibleHeads: [head] });
  const from = new Int32Array(lines.length);
  const to = new Int32Array(lines.length);
  const weight = new Float64Array(lines.length); // each weight as the scan gave it, whatever its array
  lines.forEach((line, i) => { from[i] = line.from; to[i] = line.to; weight[i] = line.weight; });
  return { counts, from, to, weight };
}

/** The lines of a set of heads from their packed lines ([head, packed] in head order). */
function fromHeads(parts) {
  const counts = new Array(THRESHOLDS.length).fill(0);
  for (const [, part] of parts) part.counts.forEach((n, k) => { counts[k] += n; });
  const minWeight = THRESHOLDS[fittingLevel(counts, LINE_BUDGET)];
  const lines = [];
  for (const [head, { from, to, weight }] of parts) {
    for (let i = 0; i < weight.length; i++) {
      if (weight[i] >= minWeight) lines.push({ head, from: from[i], to: to[i], weight: weight[i] });
    }
  }
  return { lines, minWeight, kept: lines.length, total: counts.reduce((a, b) => a + b, 0), counts };
}

/** Works out, while the page is idle, each of `layers`' (attention objects; the open one first)
 * lines for `options`, one layer an idle moment (what a switch draws), then each layer's heads'
 * own lines, one head an idle moment (what a toggle adds up: a 512-token head is a few ms, so a
 * click never waits behind more than one layer's scan). → a function that stops it. */
export function warmStrongestLines(layers, options) {
  const idle = globalThis.requestIdleCallback ?? ((fn) => setTimeout(fn, 0));
  const cancel = globalThis.cancelIdleCallback ?? clearTimeout;
  const due = [
    ...layers.map((attention) => () => strongestLinesOf(attention, options)),
    ...layers.flatMap((attention) => Array.from({ length: attention.shape[0] }, (_, head) => () => warmHead(attention, options, head))),
  ];
  let handle = 0;
  const step = () => {
    due.shift()?.();
    if (due.length) handle = idle(step, { timeout: 1000 });
  };
  if (due.length) handle = idle(step, { timeout: 1000 });
  return () => cancel(handle);
}

/** Which token ranges [start, end) each column shows for a sentence filter. */
export function tokenRanges(nTokens, sentenceBStart, filter) {
  const b = sentenceBStart ?? nTokens;
  const A = [0, b];
  const B = [b, nTokens];
  const all = [0, nTokens];
  if (sentenceBStart === null || sentenceBStart === undefined) return { from: all, to: all };
  switch (filter) {
    case "aa": return { from: A, to: A };
    case "bb": return { from: B, to: B };
    case "ab": return { from: A, to: B };
    case "ba": return { from: B, to: A };
    default: return { from: all, to: all };
  }
}

/** Token ranges of both columns for attention of shape [H, Tq, Tk]: cross-attention (Tq ≠ Tk
 * keys are another text's tokens) shows every query and every key. */
export function rangesFor(shape, sentenceBStart, filter) {
  const [, nQueries, nKeys] = shape;
  if (nKeys !== undefined && nKeys !== nQueries) return { from: [0, nQueries], to: [0, nKeys] };
  return tokenRanges(nQueries, sentenceBStart, filter);
}

/** The lines the head view draws: [{head, from, to, weight}] for attention {values, shape:[H,Tq,Tk]}. */
export function computeLines(attention, options = {}) {
  const [nHeads, nTokens, nKeys = nTokens] = attention.shape;
  const { visibleHeads = [...Array(nHeads).keys()], sentenceFilter = "all", sentenceBStart = null,
    hover = null, minWeight = DEFAULT_MIN_WEIGHT } = options;
  const ranges = rangesFor(attention.shape, sentenceBStart, sentenceFilter);
  let [fromLo, fromHi] = ranges.from;
  let [toLo, toHi] = ranges.to;
  if (hover && hover.side === "left") [fromLo, fromHi] = [hover.index, hover.index + 1];
  if (hover && hover.side === "right") [toLo, toHi] = [hover.index, hover.index + 1];
  const values = attention.values;
  const lines = [];
  for (const head of [...visibleHeads].sort((a, b) => a - b)) {
    if (head < 0 || head >= nHeads) continue;
    const base = head * nTokens * nKeys;
    for (let from = fromLo; from < fromHi; from++) {
      const row = base + from * nKeys;
      for (let to = toLo; to < toHi; to++) {
        const weight = values[row + to];
        if (weight >= minWeight) lines.push({ head, from, to, weight });
      }
    }
  }
  return lines;
}

/** Where a line from query `from` to key `to` runs, with the plot's top-left corner at (x0, y0):
 * the one geometry of the lines, on screen and in images. */
export function lineEnds(ranges, x0, y0) {
  return ({ from, to }) => [
    x0, y0 + (from - ranges.from[0] + 0.5) * ROW_HEIGHT, x0 + LINES_WIDTH, y0 + (to - ranges.to[0] + 0.5) * ROW_HEIGHT,
  ];
}

/** The state cut to its first `max` queries and keys (a picture of a long input keeps its size). */
