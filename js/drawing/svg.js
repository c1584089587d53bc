// Text in images: what XML accepts and still shows what was there (svgSafeText), and the width
// a layout reserves for it. The images themselves are scenes (scene.js) drawn by its sinks.

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

/** Rough text width for layout (the SVG is drawn without measuring in a live page). */
export function textWidth(text, size = 12) {
  return Math.ceil(svgSafeText(text).length * size * 0.6); // as drawn: a C1 control is 6 characters
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
