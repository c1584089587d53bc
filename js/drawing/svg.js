// Text in images: what XML accepts and still shows what was there (svgSafeText), and the width
// a layout reserves for it. The images themselves are scenes (scene.js) drawn by its sinks.

import { ADVANCES, FIRST_CODE } from "./font_metrics.js";

// What XML 1.0 forbids (C0 controls, lone surrogates, U+FFFE/U+FFFF) or shows as nothing (DEL, C1).
// With the u flag a surrogate pair is one code point, so [\u{D800}-\u{DFFF}] matches lone halves only.
// biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters it replaces
const UNSAFE = /[\u{0}-\u{1F}\u{7F}-\u{9F}\u{D800}-\u{DFFF}\u{FFFE}\u{FFFF}]/gu;

/**
 * Text that XML 1.0 accepts and that still shows what was there: C0 controls become their Unicode
 * control pictures (U+0000 → ␀, tab → ␉, newline → ␊), DEL becomes ␡, C1 controls become a
 * visible "\u0085" escape, and lone surrogates and the non-characters U+FFFE/U+FFFF become U+FFFD.
 */
export function svgSafeText(text) {
  return String(text).replace(UNSAFE, (c) => {
    const code = c.codePointAt(0);
    if (code < 0x20) return String.fromCodePoint(0x2400 + code);
    if (code === 0x7f) return "\u2421";
    if (code <= 0x9f) return `\\u${code.toString(16).padStart(4, "0")}`;
    return "\ufffd";
  });
}

/** The fonts pictures name first: Arial's metrics (font_metrics.js), in Arial, Liberation Sans
 * (Linux), Arimo (ChromeOS) and, within a few per cent, Helvetica (macOS). */
export const PICTURE_FONT = "Arial, 'Liberation Sans', Arimo, Helvetica, sans-serif";

// East Asian wide characters and emoji: a full em each.
const WIDE = /[\u{1100}-\u{115F}\u{2E80}-\u{A4CF}\u{AC00}-\u{D7A3}\u{F900}-\u{FAFF}\u{FE30}-\u{FE4F}\u{FF00}-\u{FF60}\u{FFE0}-\u{FFE6}\u{1F000}-\u{1FAFF}\u{20000}-\u{3FFFD}]/u;

/**
 * The width text takes in PICTURE_FONT: Arial's advances for Latin (U+0020..U+024F), a full em for
 * a wide character, 0.6 em for any other. For text drawn to the width it was laid out by (the
 * text view's tokens, `fit`): laid out by textWidth's rough 0.6 em a character, "named SmolLM"
 * was drawn squeezed and "is the capital" stretched.
 */
export function textAdvance(text, size = 12) {
  let em = 0;
  for (const character of svgSafeText(text)) {
    const i = character.codePointAt(0) - FIRST_CODE;
    em += i >= 0 && i < ADVANCES.length ? ADVANCES[i] : WIDE.test(character) ? 1 : 0.6;
  }
  return em * size;
}

/** Text width for layout, never less than it takes (the SVG is drawn without measuring in a live
 * page): 0.6 em a character, or the text's advance where that is wider (capitals, CJK, emoji). */
export function textWidth(text, size = 12) {
  const safe = svgSafeText(text); // as drawn: a C1 control is 6 characters
  return Math.ceil(Math.max(safe.length * size * 0.6, textAdvance(safe, size)));
}

/** Text broken into lines no wider than `width` at `size` (at spaces; a longer word keeps its line). */
export function wrapText(text, width, size = 12) {
  const lines = [];
  for (const word of String(text).split(" ")) {
    const line = lines.length ? `${lines.at(-1)} ${word}` : word;
    if (lines.length && textWidth(line, size) <= width) lines[lines.length - 1] = line;
    else lines.push(word);
  }
  return lines;
}
