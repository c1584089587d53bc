// A generation's output (attnscope.generate; the `output_start` trait): where the prompt ends and
// the tokens the model wrote begin, which step a token is, and the marks that show it: in the text
// view's flow (a marker where the output begins, each output token underlined and clickable as a
// step), in its image, and in the captions of every view's image.

export const OUTPUT_COLOR = "#d4650b";
const GENERATED_CHARS = 600; // of the generated text in an image's caption

/** Token i as a step of the output: {step: 1 for the first token written, steps}, or null (a
 * prompt token, or no generation: outputStart -1). */
export function stepOf(outputStart, nTokens, i) {
  if (!(outputStart >= 0) || !(i >= outputStart && i < nTokens)) return null;
  return { step: i - outputStart + 1, steps: nTokens - outputStart };
}

/** How many new tokens the page shows (what its Stop keeps: the kernel drops those made while the
 * click travelled); 0 where the run is not a generation. @param {(name: string) => any} get */
export function outputShown(get) {
  const start = get("output_start") ?? -1;
  const n = (get("tokens") ?? []).length;
  return start >= 0 && n >= start ? n - start : 0;
}

/**
 * Marks the output in the text view's flow: each output token's span from `from` on gets the
 * output class and its step in its title, and a marker (not a token: it has no index, so a click
 * on it selects nothing) goes before the first output token when it is among them (a generation's
 * step makes the flow again only from its last block). → the marker, or null when none is made.
 * @param {HTMLElement[]} spans
 */
export function markOutput(spans, outputStart, from = 0) {
  if (!(outputStart >= 0) || outputStart >= spans.length) return null;
  for (let i = Math.max(outputStart, from); i < spans.length; i++) {
    spans[i].classList.add("attnscope-output");
    spans[i].title += ` · step ${i - outputStart + 1} of the output`;
  }
  if (outputStart < from) return null;
  const first = spans[outputStart];
  const mark = document.createElement("span");
  mark.className = "attnscope-output-mark";
  mark.textContent = "output ▸";
  mark.title = "The prompt ends here; the model wrote the tokens after it. "
    + "Click one (or select it and step with ← →) to see what it looked at.";
  first.parentElement?.insertBefore(mark, first);
  return mark;
}

/**
 * An output token in the text view's image (textScene): underlined in the output's colour (the
 * selected one keeps its red line), the first after a bar where the prompt ends.
 * t: the laid-out token {i, x, w}; x0, y: where its line starts; height: the line's.
 */
export function outputTokenMarks(s, t, { outputStart, marked, x0, y, height }) {
  if (!(outputStart >= 0) || t.i < outputStart) return;
  if (t.i === outputStart) s.segment(x0 + t.x - 1, y - 2, x0 + t.x - 1, y + height, OUTPUT_COLOR, 2);
  if (t.i !== marked) s.segment(x0 + t.x, y + height - 1, x0 + t.x + t.w, y + height - 1, OUTPUT_COLOR, 1.5);
}

/** The line an image of the text view adds for a generation. */
export const outputLegend = (outputStart, nTokens) => (outputStart >= 0
  ? `Underlined in orange after the bar: the ${nTokens - outputStart} tokens the model wrote (from token ${outputStart}).` : "");

/**
 * Where each of the output's pieces begins in `text`, which ends with them (the kernel's text is
 * the prompt as read, then what the model wrote): matched from the end, a piece as it reads, or
 * with the line breaks it marks ("↵" before one in a reading, "\\n" in a label) as line breaks.
 * null where the text does not end with them (a run without readings, a source before an
 * encoder-decoder's output).
 */
function pieceStarts(text, pieces) {
  const starts = [];
  let end = text.length;
  for (let k = pieces.length - 1; k >= 0; k--) {
    const piece = String(pieces[k]);
    const broken = piece.replaceAll("↵\n", "\n").replaceAll("\\n", "\n").replaceAll("\\r", "\r");
    if (text.endsWith(piece, end)) end -= piece.length;
    else if (text.endsWith(broken, end)) end -= broken.length;
    else return null;
    starts[k] = end;
  }
  return starts;
}

/**
 * What an image of a generation says under its title, for a reader with no widget: how long the
 * prompt is, the text the model wrote (as the text reads, its line breaks as ↵ and without the
 * end-of-text token that ended it; at most GENERATED_CHARS characters), and how it chose them
 * and ended (the notice's "Generated …" line: a stopped run said nothing of its stop). "" when
 * the run is not a generation.
 * @param {(name: string) => any} get  a synced trait
 */
export function generationSays(get) {
  const start = get("output_start") ?? -1;
  const tokens = get("tokens") ?? [];
  if (!(start >= 0) || start > tokens.length) return "";
  // How it chose them and how it ended ("…, stopped."): the kernel's notice's first line says it.
  const how = String(get("notice") ?? "").split("\n")[0];
  const reading = get("token_reading") ?? [];
  const pieces = (reading.length === tokens.length ? reading : tokens).slice(start);
  // The end-of-text token is how the run ended, which the notice says; not a word of the text.
  const quoted = how.includes("ended by the end-of-text token") ? pieces.length - 1 : pieces.length;
  const whole = String(get("text") ?? "");
  const starts = pieceStarts(whole, pieces);
  let text = starts === null ? pieces.slice(0, quoted).join("").replaceAll("↵\n", "\n")
    : whole.slice(starts[0] ?? whole.length, starts[quoted] ?? whole.length);
  text = text.trim().replace(/\s*(?:\r\n|\n|\r)\s*/g, " ↵ ");
  if (text.length > GENERATED_CHARS) text = `${text.slice(0, GENERATED_CHARS)}…`;
  const steps = tokens.length - start;
  return `The model wrote ${steps} token${steps === 1 ? "" : "s"} after a prompt of ${start}: “${text}”`
    + (how.startsWith("Generated ") ? `. ${how}` : "");
}
