// The text view's picture (the lines around the selected token, shaded as on screen, with the
// top tokens and the colour bars), and what the picture and the flow share: each token's reading
// and the flow's blocks, so that the picture breaks lines where the live view does.
import { tokenCaption } from "../drawing/dom.js";
import { BAR_HEIGHT, BAR_WIDTH, colorBarScene } from "../drawing/legend.js";
import { focusHeadName, topK } from "../controls/long_controls.js";
import { outputLegend, outputTokenMarks, stepOf } from "./output_tokens.js";
import { createScene } from "../drawing/scene.js";
import { textAdvance, wrapText } from "../drawing/svg.js";
import { isDeepShade } from "../drawing/colors.js";
import { shadeOf, textBars, textScale, textScaleNote } from "../drawing/text_scale.js";

export const TOP_K = 12;
const LINE = 20; // px between lines of text in images
const IMAGE_WIDTH = 760;
const IMAGE_LINES = 24;

export const format = (v) => (v >= 0.001 || v === 0 ? v.toFixed(3) : v.toExponential(1));

/** What the shading says, e.g. "Attention from “cat” (token 12), head 3, layer 2"; a generation's
 * output token as its step: "Step 12 of 32: “ Paris” (token 45), attention from it, ...". */
export function shadingTitle(state) {
  const token = tokenCaption(state.tokens[state.selected] ?? "", state.notes?.[state.selected]);
  // Weighed by value norm: α·‖f(x)‖, what the row passes, not the weight alone (engine/weighing.py).
  const weighed = state.weighBy === "value_norm";
  const what = `${weighed ? "‖αf(x)‖" : "Attention"} ${state.direction === "to" ? "to" : "from"}`;
  const where = `${focusHeadName(state.head)}, layer ${state.layer}`;
  const step = stepOf(state.outputStart, state.tokens.length, state.selected);
  return step ? `Step ${step.step} of ${step.steps}: ${token} (token ${state.selected}), ${weighed ? what : what.toLowerCase()} it, ${where}`
    : `${what} ${token} (token ${state.selected}), ${where}`;
}

/** What each token shows in the flow: its reading (spaces before it, no ##) when the run has one. */
export const readingOf = ({ tokens, reading }) => (reading?.length === tokens.length ? reading : tokens);

/**
 * The token whose text shows token i in the flow: i itself, or, for the other tokens of a
 * character split over several (they read as nothing: "près", not "prè↑s"), the token holding
 * the character's first byte, where a selection of any of them is marked.
 */
export function shownAt(reading, i) {
  let at = i;
  while (at > 0 && reading[at] === "") at--;
  return at;
}

/** The tokens the flow shows as token i's text: [i, end), i and the split character's other tokens. */
export function partsEnd(reading, i) {
  let end = i + 1;
  while (end < reading.length && reading[end] === "") end++;
  return end;
}

// Tokens per block of the flow (text_view's content-visibility blocks), about.
export const CHUNK_TOKENS = 256;

// A sentence's end: its last mark (and a closing quote or bracket), as a token ends it.
const SENTENCE_END = /[.!?…。！？]["'”’)\]]*\s*$/u;

/**
 * Where the flow's blocks start: [0, ..., n]. Each block starts a line (a block of its own for
 * content-visibility), so a block ends after about CHUNK_TOKENS tokens where a break is in the text
 * or does least harm: at a line's end; else at a sentence's end (a break mid-sentence read as one
 * in the text: "had chewed / half of them"), unless a line's end comes before the block reaches
 * twice the size (a break between two sentences of a paragraph still reads as a paragraph's end);
 * else, past twice the size (text without sentences), before a token that starts a word, and past
 * four times anywhere; never inside a split character.
 */
export function chunkBoundaries(reading) {
  const starts = [0];
  const n = reading.length;
  // The first break at or after i that is a line's end (NO_LINE_END: none; the text's own end is
  // none, so that a growing text's earlier blocks keep their ends).
  const NO_LINE_END = 2 ** 30;
  const nextLineEnd = new Int32Array(n + 1).fill(NO_LINE_END);
  for (let i = n; i >= 1; i--) nextLineEnd[i] = String(reading[i - 1]).endsWith("\n") ? i : (nextLineEnd[i + 1] ?? NO_LINE_END);
  for (let i = 1; i < n; i++) {
    const size = i - starts.at(-1);
    if (size < CHUNK_TOKENS || reading[i] === "") continue;
    const previous = String(reading[i - 1]);
    const lineEnd = previous.endsWith("\n");
    const wordStart = /^\s/.test(String(reading[i]));
    const sentenceEnd = wordStart && SENTENCE_END.test(previous) && nextLineEnd[i] - starts.at(-1) > 2 * CHUNK_TOKENS;
    if (lineEnd || sentenceEnd || (size >= 2 * CHUNK_TOKENS && wordStart) || size >= 4 * CHUNK_TOKENS) starts.push(i);
  }
  starts.push(n);
  return starts;
}

// chunkBoundaries of a reading array, kept while the array is: the picture draws a scene once for
// each size it tries (views.py thinning), each reading the same tokens.
const boundaryMemo = new WeakMap();
function boundariesOf(reading) {
  if (!boundaryMemo.has(reading)) boundaryMemo.set(reading, chunkBoundaries(reading));
  return boundaryMemo.get(reading);
}

/**
 * The lineCount lines around token `marked` (it in the middle where the text allows, else the
 * first or the last lines), laid out as the live view breaks them: a block (chunkBoundaries)
 * starts a line. Only the blocks that give those lines are laid out: the whole of 32,768 tokens
 * took the kernel's picture 0.4 s, beside the user's first clicks.
 */
function linesAround(reading, marked, lineCount, width) {
  const starts = boundariesOf(reading);
  let block = 0;
  for (let lo = 0, hi = starts.length - 2; lo <= hi;) { // the last block starting at or before `marked`
    const mid = (lo + hi) >> 1;
    if (starts[mid] <= marked) { block = mid; lo = mid + 1; } else hi = mid - 1;
  }
  const layout = (k) => blockLines(reading, starts[k], starts[k + 1], width);
  let lines = layout(block);
  let at = Math.max(0, lines.findIndex((line) => line.some((t) => t.i === marked)));
  let before = block;
  let after = block + 1;
  const half = Math.floor(lineCount / 2);
  const more = () => { const added = layout(--before); lines = added.concat(lines); at += added.length; };
  while (at < half && before > 0) more();
  while (lines.length - at < lineCount - half && after < starts.length - 1) lines.push(...layout(after++));
  while (lines.length < lineCount && before > 0) more(); // near the end: the last lines, as many as fit
  const first = Math.max(0, Math.min(at - half, lines.length - lineCount));
  return lines.slice(first, first + lineCount);
}

/**
 * Tokens [lo, hi) as lines of {i, text, x, w} within `width` (a "\n" in a token starts a line).
 * A line breaks between words, as the live view's does (a browser breaks at spaces, not between
 * two tokens of one word): a word's tokens that would run past the line go to the next together
 * ("spoon" "ful" were split over two lines); a word wider than a line breaks where it must.
 */
function blockLines(reading, lo, hi, width) {
  const lines = [[]];
  let x = 0;
  let word = 0; // where the current word starts in the last line
  for (let i = lo; i < hi; i++) {
    const token = reading[i];
    if (token === "") continue; // a part of the character before it: nothing of its own to show
    String(token).split("\n").forEach((part, p) => {
      if (p > 0) { lines.push([]); x = 0; word = 0; }
      if (part === "" && p > 0) return; // a token that ends its line ("↵\n") shows on that line only
      const line = lines.at(-1);
      const w = Math.max(4, textAdvance(part, 12)); // drawn to it (fit): the font's own widths
      if (!line.length || /^\s/.test(part) || /\s$/.test(line.at(-1).text)) word = line.length;
      if (x + w > width - 16 && x > 0) {
        const moved = word > 0 ? line.splice(word) : []; // the word's tokens so far go with it
        lines.push([]);
        x = 0;
        word = 0;
        for (const t of moved) { lines.at(-1).push({ ...t, x }); x += t.w; }
      }
      lines.at(-1).push({ i, text: part, x, w });
      x += w;
    });
  }
  // A block that ends with its line's end starts no empty line: the next block starts its own.
  if (lines.length > 1 && !lines.at(-1).length) lines.pop();
  return lines;
}

/**
 * The text around the selected token as an image: lines of tokens, each on its shade, the
 * selected one outlined, the top tokens and the colour bars below.
 */
export function textScene(state, { title = "", width = IMAGE_WIDTH, lines: lineCount = IMAGE_LINES } = {}) {
  const { tokens, values, selected, aside } = state;
  const reading = readingOf(state);
  const marked = shownAt(reading, selected); // the selected token, or the split character it is part of
  const shown = linesAround(reading, marked, lineCount, width);
  // Scaled to the lines drawn, as the screen to the lines in view (the tokens between are theirs).
  const drawn = shown.flat();
  const scale = textScale(values, { aside, selected, lo: drawn[0]?.i ?? 0, hi: drawn.length ? partsEnd(reading, drawn.at(-1).i) : 0 });
  const shade = shadeOf(values, scale);
  const said = [textScaleNote(scale, "the lines shown"), outputLegend(state.outputStart, tokens.length), state.note ?? ""];
  const note = said.filter(Boolean).flatMap((line) => wrapText(line, width - 16, 10));
  const best = topK(values, TOP_K);
  const top = 44;
  const listTop = top + shown.length * LINE + 16;
  const barsTop = listTop + 18 + Math.ceil(best.length / 3) * 18 + 16;
  const height = barsTop + BAR_HEIGHT + note.length * 14 + 8;
  const s = createScene(width, height);
  s.text(8, 12, title || state.model || "", { role: "title" });
  s.text(8, 30, shadingTitle(state), { size: 11, role: "subtitle" });
  shown.forEach((line, row) => {
    const y = top + row * LINE;
    for (const t of line) {
      const fill = shade(t.i);
      s.rect(8 + t.x, y, t.w, LINE - 2, fill, t.i === marked ? "selected" : "token");
      outputTokenMarks(s, t, { outputStart: state.outputStart, marked, x0: 8, y, height: LINE - 2 });
      if (t.i === marked) s.segment(8 + t.x, y + LINE - 2, 8 + t.x + t.w, y + LINE - 2, "#d62728", 2);
      // Drawn to the width it was laid out by (its spaces kept): the estimate is per character,
      // and a word split into tokens ("Ow" + "ls") must read as one word, not with a gap inside.
      s.text(8 + t.x, y + (LINE - 2) / 2, t.text, { role: "token", fit: t.w, color: isDeepShade(fill) ? "#fff" : null });
    }
  });
  s.text(8, listTop, `Top ${best.length}:`, { size: 11, role: "list-title" });
  best.forEach((i, n) => {
    const cx = 8 + (n % 3) * Math.floor((width - 16) / 3);
    s.text(cx, listTop + 18 + Math.floor(n / 3) * 18, `${format(values[i])}  “${tokens[i]}” (${i})`, { size: 11, role: "top" });
  });
  textBars(scale).forEach((bar, n) => {
    colorBarScene(s, 8 + n * (BAR_WIDTH + 40), barsTop, bar);
  });
  note.forEach((line, n) => { s.text(8, barsTop + BAR_HEIGHT + 8 + n * 14, line, { size: 10, role: "legend-note" }); });
  return s.scene;
}
