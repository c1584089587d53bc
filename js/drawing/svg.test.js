// @vitest-environment jsdom
import { expect, it } from "vitest";
import { createMatrixView } from "../views/matrix_view.js";
import { createHeadView } from "../views/head_view.js";
import { createModelView } from "../views/model_view.js";
import { createNeuronView } from "../views/neuron_view.js";
import { PICTURE_FONT, svgSafeText, textAdvance, textWidth } from "./svg.js";

HTMLCanvasElement.prototype.getContext = () => null;

// Token text as precomputed attention may bring it: C0 and C1 controls, DEL, lone surrogates
// (either half), a non-character, and a real surrogate pair that must survive whole.
const TOKENS = ["a\u0000b", "\u001b[31m", "\ud800x", "y\udfff", "\u007f\u0085", "tab\there\nnew", "\ufffe", "😀"];
const SHOWN = ["a␀b", "␛[31m", "\ufffdx", "y\ufffd", "␡\\u0085", "tab␉here␊new", "\ufffd", "😀"];

function parse(svg) {
  const doc = new DOMParser().parseFromString(svg, "image/svg+xml");
  expect(doc.getElementsByTagName("parsererror").length, svg).toBe(0);
  expect(doc.documentElement.localName).toBe("svg");
  return doc;
}
const texts = (doc) => [...doc.querySelectorAll("text")].map((t) => t.textContent);

it("maps every character XML 1.0 forbids to a visible stand-in", () => {
  expect(TOKENS.map(svgSafeText)).toEqual(SHOWN);
  expect(svgSafeText("plain <&> text é 😀")).toBe("plain <&> text é 😀");
  for (let code = 0; code < 0x20; code++) expect(svgSafeText(String.fromCharCode(code))).toBe(String.fromCharCode(0x2400 + code));
  expect(svgSafeText("\u009f")).toBe("\\u009f");
  expect(textWidth("\u0085")).toBe(textWidth("123456")); // laid out as drawn
});

it("exports well-formed SVG from views whose tokens hold control characters and lone surrogates", () => {
  const n = TOKENS.length;
  const values = new Float32Array(n * n).fill(1 / n);

  const head = createHeadView(document.createElement("div"), {});
  head.update({ tokens: TOKENS, sentenceBStart: null, attention: { values, shape: [1, n, n] }, visibleHeads: [0], sentenceFilter: "all" });
  const headDoc = parse(head.toSvg({ title: "model\u0000 · layer 1\ud83d" }));
  expect(texts(headDoc)).toEqual(expect.arrayContaining([...SHOWN, "model␀ · layer 1\ufffd"]));
  expect(texts(headDoc).filter((t) => t === "a␀b").length).toBe(2); // left and right columns
  head.destroy(); // its line tiles are drawn on timers

  const neuron = createNeuronView(document.createElement("div"));
  neuron.update({
    tokens: TOKENS, nHeads: 1, head: 0, query: 2,
    data: { d: 2, query: new Float32Array([1, 2]), keys: new Float32Array(2 * n), products: new Float32Array(2 * n),
      scores: new Float32Array(n), softmax: new Float32Array(n).fill(1 / n) },
  });
  const neuronDoc = parse(neuron.toSvg({ title: "m\u0007" }));
  expect(texts(neuronDoc)[0]).toBe('m␇ · head 0, query "\ufffdx"');
  expect(texts(neuronDoc)).toEqual(expect.arrayContaining(SHOWN));

  const matrix = createMatrixView(document.createElement("div"));
  matrix.update({ title: "rollout", tokens: TOKENS, values: new Float32Array(n * n).fill(0.5), shape: [1, n, n], layer: 0 });
  expect(texts(parse(matrix.toSvg({ title: "t\u0085" })))).toEqual(expect.arrayContaining(["t\\u0085", "Layer 0", ...SHOWN]));

  const model = createModelView(document.createElement("div"), {});
  model.update({ thumbnails: { shape: [1, 1, 2, 2], values: new Float32Array(4).fill(0.5) }, layers: [0], heads: [0], nHeads: 1 });
  expect(texts(parse(model.toSvg({ title: "\udc00name\u001f" })))[0]).toBe("\ufffdname␟");
});

it("lays text drawn to a width out at the picture font's own advances, and reserves room never less", () => {
  // Arial's advances (Liberation Sans): "i" is narrow, "m" and "W" wide. At 0.6 em a character,
  // "named SmolLM" was drawn squeezed and "is the capital" stretched.
  expect(textAdvance("i", 10)).toBeCloseTo(2.222, 2);
  expect(textAdvance("m", 10)).toBeCloseTo(8.33, 2);
  expect(textAdvance(" is the capital", 12)).toBeLessThan(" is the capital".length * 12 * 0.6 * 0.8);
  expect(textAdvance("東京🙂", 12)).toBe(36); // wide characters and emoji: a full em
  for (const text of ["WWW", "東京🙂", "capital", "\u0085"]) expect(textWidth(text, 12)).toBeGreaterThanOrEqual(textAdvance(text, 12));
  expect(PICTURE_FONT.startsWith("Arial, 'Liberation Sans'")).toBe(true);
});
