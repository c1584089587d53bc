// @vitest-environment jsdom
// The text view's blocks (content-visibility): where they end, and what a generation's step makes again.
import { describe, expect, it } from "vitest";
import { createTextView } from "./text_view.js";
import { chunkBoundaries } from "./text_scene.js";

describe("text view blocks, as a generation grows the text", () => {
  it("makes only its last block again when a generation adds a token, and the whole flow for another text", () => {
    const body = document.createElement("div");
    const view = createTextView(body, {});
    const state = (tokens, reading, selected) => ({ tokens, reading, notes: [], selected, values: null, message: "", head: -1,
      nHeads: 2, nKeyHeads: 2, direction: "from", aside: 0, layer: 0, model: "m", outputStart: 600 });
    // 600 prompt tokens (blocks of about CHUNK_TOKENS), then the output a token at a time.
    const prompt = Array.from({ length: 600 }, (_, i) => (i % 20 === 19 ? " end.\n" : ` w${i}`));
    const spansOf = () => [...body.querySelectorAll(".attnscope-text-token")];
    view.update(state([...prompt, " Paris"], [...prompt, " Paris"], 600));
    const first = spansOf();
    const blocks = [...body.querySelectorAll(".attnscope-text-chunk")];
    expect(blocks.length).toBeGreaterThan(2);
    // The next step: a token whose first byte of "é" reads as nothing yet completes the last one.
    view.update(state([...prompt, " Paris", " é"], [...prompt, " Paris", " é"], 601));
    let spans = spansOf();
    expect(spans).toHaveLength(602);
    expect(spans[0]).toBe(first[0]); // the blocks before the last one are kept, not made again
    expect(spans[blocks.length > 1 ? 300 : 0]).toBe(first[300]);
    expect(spans.map((s) => s.textContent).slice(-2)).toEqual([" Paris", " é"]);
    expect(spans[601].classList.contains("attnscope-selected")).toBe(true);
    expect(spans.filter((s) => s.classList.contains("attnscope-selected"))).toHaveLength(1);
    expect(spans.filter((s) => s.classList.contains("attnscope-output")).map((s) => s.dataset.index)).toEqual(["600", "601"]);
    expect(body.querySelectorAll(".attnscope-output-mark")).toHaveLength(1);
    expect(body.querySelector(".attnscope-output-mark").nextSibling).toBe(spans[600]);
    // A step that changes the last token's reading (it completed a character): that token is made again.
    view.update(state([...prompt, " Paris", " é", "t"], [...prompt, " Paris", " ét", ""], 602));
    spans = spansOf();
    expect(spans.map((s) => s.textContent).slice(-3)).toEqual([" Paris", " ét", ""]);
    expect(spans[0]).toBe(first[0]);
    expect([...body.querySelectorAll(".attnscope-text-chunk")].flatMap((b) => [...b.children].filter((c) => c.dataset.index))
      .map((c) => Number(c.dataset.index))).toEqual([...Array(603).keys()]); // every token once, in order
    expect(body.querySelectorAll(".attnscope-output-mark")).toHaveLength(1);
    // Another text: the flow is made whole.
    view.update(state(["x", " y"], ["x", " y"], 1));
    expect(spansOf().map((s) => s.textContent)).toEqual(["x", " y"]);
    expect(body.querySelectorAll(".attnscope-output-mark")).toHaveLength(0);
  });

  it("makes the flow again from the first block whose end a step moved, keeping those before it", () => {
    const body = document.createElement("div");
    const view = createTextView(body, {});
    const state = (tokens, selected) => ({ tokens, reading: tokens, notes: [], selected, values: null, message: "", head: -1,
      nHeads: 2, nKeyHeads: 2, direction: "from", aside: 0, layer: 0, model: "m", outputStart: 600 });
    const prompt = Array.from({ length: 600 }, (_, i) => (i % 10 === 9 ? " end." : ` w${i}`)); // sentences, no line's end
    const spansOf = () => [...body.querySelectorAll(".attnscope-text-token")];
    const blockStarts = () => [...body.querySelectorAll(".attnscope-text-chunk")].map((b) => Number(b.querySelector("[data-index]").dataset.index));
    view.update(state([...prompt, " The"], 600));
    const first = spansOf();
    expect(blockStarts()).toEqual([0, 260, 520]);
    // The output's first line ends: the paragraph (260…) runs to it, not to the full stop at 520.
    view.update(state([...prompt, " The", " end.\n"], 601));
    const spans = spansOf();
    expect(blockStarts()).toEqual([0, 260]);
    expect(spans[0]).toBe(first[0]); // the first block is kept
    expect(spans[259]).toBe(first[259]);
    expect(spans[300]).not.toBe(first[300]); // the moved block is made again
    expect(spans.map((s) => Number(s.dataset.index))).toEqual([...Array(602).keys()]);
  });

});

describe("text view blocks", () => {
  it("end at a line's end, else at a sentence's end, else before a word past twice the size, never inside a split character", () => {
    const words = (n, from = 0) => Array.from({ length: n }, (_, i) => ` w${from + i}`);
    expect(chunkBoundaries(words(100))).toEqual([0, 100]);
    expect(chunkBoundaries(words(1100))).toEqual([0, 512, 1024, 1100]);
    const lines = [...words(300), "end\n", ...words(700)];
    expect(chunkBoundaries(lines)).toEqual([0, 301, 813, 1001]);
    // Sentences: a block ends after the first full stop past the size (followed by a word), not mid-sentence.
    const prose = Array.from({ length: 700 }, (_, i) => (i % 10 === 9 ? " end." : ` w${i}`));
    expect(chunkBoundaries(prose)).toEqual([0, 260, 520, 700]);
    expect(chunkBoundaries([...words(300), " said.”", ...words(10)])).toEqual([0, 301, 311]);
    // A paragraph's sentences: its line's end, 140 tokens on, ends the block, not its first full
    // stop past the size (which read as a paragraph's end where the text has none).
    const paragraphs = prose.map((token, i) => (i === 399 ? " end.\n" : token));
    expect(chunkBoundaries(paragraphs)).toEqual([0, 400, 660, 700]);
    expect(chunkBoundaries([...words(300), " 3.14", ...words(10)])).toEqual([0, 311]); // a number is no sentence's end
    // No word starts and no line ends: a block at four times the size, but not before a "" (a split character's byte).
    const bytes = Array.from({ length: 1100 }, (_, i) => (i === 1024 ? "" : "x"));
    expect(chunkBoundaries(bytes)).toEqual([0, 1025, 1100]);
  });
});
