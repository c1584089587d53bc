// @vitest-environment jsdom
import { afterEach, describe, expect, it, vi } from "vitest";
import { decodeArray } from "../transport/codec.js";
import { computeLines, DEFAULT_MIN_WEIGHT, strongestLines, strongestLinesOf, tokenRanges, warmHeads, warmStrongestLines } from "./head_lines.js";
import { createHeadView as createView } from "./head_view.js";

// Every view made here is destroyed after its test: a view left alive draws its line tiles on
// timers that would fire once the test's DOM is gone.
const made = [];
const createHeadView = (...args) => {
  const view = createView(...args);
  made.push(view);
  return view;
};
afterEach(() => { while (made.length) made.pop().destroy(); });

// jsdom has no canvas: the view must still lay out tokens and count lines without painting.
HTMLCanvasElement.prototype.getContext = () => null;

// Two heads over three tokens; head 1 attends only to token 0 (its other weights are 0).
const attention = {
  shape: [2, 3, 3],
  values: new Float32Array([
    0.5, 0.3, 0.2, /**/ 0.1, 0.8, 0.1, /**/ 0.0, 0.6, 0.4,
    1.0, 0.0, 0.0, /**/ 1.0, 0.0, 0.0, /**/ 1.0, 0.0, 0.0,
  ]),
};
const key = (lines) => lines.map((l) => `${l.head}:${l.from}>${l.to}=${l.weight.toFixed(1)}`);

describe("computeLines", () => {
  it("draws every non-negligible weight of every visible head", () => {
    expect(key(computeLines(attention))).toEqual([
      "0:0>0=0.5", "0:0>1=0.3", "0:0>2=0.2", "0:1>0=0.1", "0:1>1=0.8", "0:1>2=0.1", "0:2>1=0.6", "0:2>2=0.4",
      "1:0>0=1.0", "1:1>0=1.0", "1:2>0=1.0",
    ]);
  });

  it("drops hidden heads", () => {
    expect(computeLines(attention, { visibleHeads: [1] }).every((l) => l.head === 1)).toBe(true);
    expect(computeLines(attention, { visibleHeads: [] })).toEqual([]);
  });

  it("keeps only the hovered token's lines", () => {
    expect(key(computeLines(attention, { hover: { side: "left", index: 2 } }))).toEqual(["0:2>1=0.6", "0:2>2=0.4", "1:2>0=1.0"]);
    expect(key(computeLines(attention, { hover: { side: "right", index: 0 } }))).toEqual(["0:0>0=0.5", "0:1>0=0.1", "1:0>0=1.0", "1:1>0=1.0", "1:2>0=1.0"]);
  });

  it("applies the sentence filter", () => {
    const opts = { sentenceBStart: 2, visibleHeads: [0] };
    expect(key(computeLines(attention, { ...opts, sentenceFilter: "aa" }))).toEqual(["0:0>0=0.5", "0:0>1=0.3", "0:1>0=0.1", "0:1>1=0.8"]);
    expect(key(computeLines(attention, { ...opts, sentenceFilter: "bb" }))).toEqual(["0:2>2=0.4"]);
    expect(key(computeLines(attention, { ...opts, sentenceFilter: "ab" }))).toEqual(["0:0>2=0.2", "0:1>2=0.1"]);
    expect(key(computeLines(attention, { ...opts, sentenceFilter: "ba" }))).toEqual(["0:2>1=0.6"]);
    expect(computeLines(attention, { ...opts, sentenceFilter: "all" })).toHaveLength(8);
  });

  it("ignores the filter for a single sentence", () => {
    expect(tokenRanges(3, null, "ab")).toEqual({ from: [0, 3], to: [0, 3] });
  });
});

describe("createHeadView", () => {
  const state = (over = {}) => ({
    tokens: ["[CLS]", "<img src=x onerror=alert(1)>", "[SEP]"],
    sentenceBStart: null,
    attention,
    visibleHeads: [0, 1],
    sentenceFilter: "all",
    ...over,
  });

  it("shows tokens as text, never as HTML", () => {
    const container = document.createElement("div");
    const view = createHeadView(container);
    view.update(state());
    expect(container.querySelector("img")).toBeNull();
    const texts = [...container.querySelectorAll(".attnscope-left .attnscope-token-text")].map((n) => n.textContent);
    expect(texts).toEqual(["[CLS]", "<img src=x onerror=alert(1)>", "[SEP]"]);
    expect(container.querySelector(".attnscope-lines").dataset.lineCount).toBe("11");
  });

  it("says which rows are causal: every row, or an encoder-decoder generation's from the decoder's start token", () => {
    const container = document.createElement("div");
    const view = createHeadView(container);
    const note = () => container.querySelector(".attnscope-causal-note");
    view.update(state());
    expect(note().hidden).toBe(true);
    view.update(state({ causal: true }));
    expect(note().hidden).toBe(false);
    expect(note().textContent).toMatch(/^Causal attention: each token sees only itself and earlier tokens/);
    // BART's generation: the source's rows are the encoder's, which see later source tokens too.
    view.update(state({ causal: true, causalFrom: 2 }));
    expect(note().textContent).toMatch(/^Causal attention from token 2 on \(the decoder's\)/);
    expect(note().textContent).toContain("The source's tokens before it (the encoder's) see the whole source.");
  });

  it("names on hover the bytes a continuation token holds, on each side (keys have their own notes)", () => {
    const container = document.createElement("div");
    const view = createHeadView(container);
    const titles = (side) => [...container.querySelectorAll(`.attnscope-${side} .attnscope-token-text`)].map((n) => n.title);
    view.update(state({ tokens: ["日", "↑", "↑"], tokenNotes: ["", "bytes 97 of “日”", "bytes A5 of “日”"] }));
    expect(titles("left")).toEqual(["", "bytes 97 of “日”", "bytes A5 of “日”"]);
    expect(titles("right")).toEqual(titles("left"));
    // Cross-attention: the keys are the encoder's tokens, with the encoder's notes.
    view.update(state({ tokens: ["a", "b", "c"], tokenNotes: ["", "", ""], keyTokens: ["🙂", "↑", "x"], keyNotes: ["", "bytes 9F of “🙂”", ""] }));
    expect(titles("left")).toEqual(["", "", ""]);
    expect(titles("right")).toEqual(["", "bytes 9F of “🙂”", ""]);
  });

  it("keeps the rows of an edit's unchanged tokens and rewrites the changed one, hover weights cleared", () => {
    const container = document.createElement("div");
    const view = createHeadView(container);
    view.update(state({ tokens: ["a", "b", "c"] }));
    const rows = () => [...container.querySelectorAll(".attnscope-left .attnscope-token")];
    const before = rows();
    rows()[1].dispatchEvent(new MouseEvent("mouseenter"));
    expect(container.querySelectorAll(".attnscope-weight-value").length).toBeGreaterThan(0);
    view.update(state({ tokens: ["a", "<b>x</b>", "c"], attention: { ...attention, values: attention.values.slice() } }));
    expect(rows()).toEqual(before); // the same elements
    expect(rows().map((r) => r.textContent)).toEqual(["a", "<b>x</b>", "c"]); // text, never markup
    expect(container.querySelectorAll(".attnscope-weight-value, .attnscope-hovered")).toHaveLength(0);
    expect(container.querySelector(".attnscope-lines").dataset.lineCount).toBe("11"); // drawn without a hover
    view.update(state({ tokens: ["a", "b"], attention: { shape: [1, 2, 2], values: new Float32Array([1, 0, 0.5, 0.5]) } }));
    expect(rows().map((r) => r.textContent)).toEqual(["a", "b"]);
  });

  it("marks the selected token's rows, and moves the mark with the selection", () => {
    const container = document.createElement("div");
    const view = createHeadView(container);
    const marked = () => [...container.querySelectorAll(".attnscope-token.attnscope-selected")].map((r) => `${r.parentElement.classList[1]}:${r.dataset.index}`);
    view.update(state({ selected: 1 }));
    expect(marked()).toEqual(["attnscope-left:1", "attnscope-right:1"]);
    view.update(state({ selected: 1, visibleHeads: [0] })); // another update: the mark stays
    expect(marked()).toEqual(["attnscope-left:1", "attnscope-right:1"]);
    view.update(state({ selected: 2, visibleHeads: [0] }));
    expect(marked()).toEqual(["attnscope-left:2", "attnscope-right:2"]);
    view.update(state({ selected: -1, visibleHeads: [0] }));
    expect(marked()).toEqual([]);
  });

  it("toggles a head at once and solos it on a double-click", () => {
    const onToggleHead = vi.fn();
    const onSoloHead = vi.fn();
    const container = document.createElement("div");
    const view = createHeadView(container, { onToggleHead, onSoloHead });
    view.update(state({ visibleHeads: [1] }));
    const swatches = container.querySelectorAll(".attnscope-swatch");
    expect(swatches).toHaveLength(2);
    expect(swatches[0].classList.contains("attnscope-off")).toBe(true);
    swatches[0].click();
    expect(onToggleHead).toHaveBeenCalledWith(0); // in the click itself: no wait for a second click
    // A double-click is two clicks (the head toggled twice: as it was) and a dblclick.
    swatches[1].click();
    swatches[1].click();
    swatches[1].dispatchEvent(new MouseEvent("dblclick"));
    expect(onToggleHead.mock.calls.map(([h]) => h)).toEqual([0, 1, 1]);
    expect(onSoloHead).toHaveBeenCalledWith(1);
    expect(container.querySelector(".attnscope-lines").dataset.lineCount).toBe("3");
  });

  it("shows the hovered token's weights on the other side", () => {
    const container = document.createElement("div");
    const view = createHeadView(container);
    view.update(state({ visibleHeads: [0] }));
    container.querySelector('.attnscope-left .attnscope-token[data-index="1"]').dispatchEvent(new MouseEvent("mouseenter"));
    expect(container.querySelector(".attnscope-lines").dataset.lineCount).toBe("3");
    const weights = [...container.querySelectorAll(".attnscope-right .attnscope-weight-value")].map((n) => n.textContent);
    expect(weights).toEqual(["0.10", "0.80", "0.10"]);
    container.querySelector('.attnscope-left .attnscope-token[data-index="1"]').dispatchEvent(new MouseEvent("mouseleave"));
    expect(container.querySelector(".attnscope-lines").dataset.lineCount).toBe("8");
    expect(container.querySelectorAll(".attnscope-weight-value")).toHaveLength(0);
  });

  it("clears what a hover wrote when the next one comes and when it ends", () => {
    const container = document.createElement("div");
    const view = createHeadView(container);
    view.update(state({ visibleHeads: [0, 1] }));
    const row = (side, i) => container.querySelector(`.attnscope-${side} .attnscope-token[data-index="${i}"]`);
    const written = () => [...container.querySelectorAll(".attnscope-token")].filter((r) =>
      r.title || r.classList.contains("attnscope-hovered") || r.querySelector(".attnscope-weights").childElementCount);
    row("left", 1).dispatchEvent(new MouseEvent("mouseenter"));
    expect(written().length).toBeGreaterThan(1);
    row("left", 1).dispatchEvent(new MouseEvent("mouseleave"));
    row("right", 0).dispatchEvent(new MouseEvent("mouseenter"));
    // Only the second hover's rows: the right token itself and the left rows it gave weights.
    expect(written().every((r) => r === row("right", 0) || r.parentElement.classList.contains("attnscope-left"))).toBe(true);
    row("right", 0).dispatchEvent(new MouseEvent("mouseleave"));
    expect(written()).toEqual([]);
  });

  it("says what the number beside the bars is: the largest of the heads' weights, each head's on hover", () => {
    const container = document.createElement("div");
    const view = createHeadView(container);
    view.update(state({ visibleHeads: [0, 1] }));
    // Hovering key token 0 (right): each query's weights to it, a bar a head.
    container.querySelector('.attnscope-right .attnscope-token[data-index="0"]').dispatchEvent(new MouseEvent("mouseenter"));
    const rows = [...container.querySelectorAll(".attnscope-left .attnscope-token")];
    expect(rows.map((r) => r.querySelectorAll(".attnscope-weight-bar").length)).toEqual([2, 2, 1]);
    expect(rows.map((r) => r.querySelector(".attnscope-weight-value").textContent)).toEqual(["max 1.00", "max 1.00", "1.00"]);
    const tokens = state({}).tokens;
    expect(rows[1].title).toBe(`Attention from “${tokens[1]}” to “${tokens[0]}” (one bar a head, the number their largest):\nhead 0: 0.100\nhead 1: 1.000`);
    expect(rows[2].title).toBe(`Attention from “${tokens[2]}” to “${tokens[0]}” (the bar and the number):\nhead 1: 1.000`);
  });
});

describe("strongestLinesOf and warmStrongestLines", () => {
  it("works out a layer's lines once per heads and filter shown, the same as strongestLines", () => {
    const layer = { ...attention };
    const found = strongestLinesOf(layer, { visibleHeads: [0, 1] });
    expect(found).toEqual(strongestLines(layer, { visibleHeads: [0, 1] }));
    expect(strongestLinesOf(layer, { visibleHeads: [0, 1] })).toBe(found); // kept, not worked out again
    const one = strongestLinesOf(layer, { visibleHeads: [0] });
    expect(one).not.toBe(found);
    expect(one).toEqual(strongestLines(layer, { visibleHeads: [0] }));
    expect(strongestLinesOf({ ...attention }, { visibleHeads: [0] })).not.toBe(one); // another layer's numbers
  });

  it("adds up each head's own lines (worked out while idle) for any heads shown: what one scan finds, thinned alike", () => {
    // 3 heads × 120 × 120 weights, over the 20,000-line budget together and not alone: a set's
    // threshold is above each head's own, and the heads' lines are cut to it.
    const [H, T] = [3, 120];
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const bytes = Uint8Array.from({ length: H * T * T }, (_, i) => Math.floor(255 * random() ** (1 + Math.floor(i / (T * T)))));
    const asBytes = { shape: [H, T, T], bytes, scale: 1 / 255 };
    const asFloats = { shape: [H, T, T], values: Float32Array.from(bytes, (b) => b / 255) };
    for (const layer of [asBytes, asFloats]) {
      const subsets = [...Array(2 ** H).keys()].slice(1).map((m) => [...Array(H).keys()].filter((h) => m & (1 << h)));
      const same = (a, b) => {
        expect({ ...a, lines: null }).toEqual({ ...b, lines: null });
        expect(a.lines.map(({ head, from, to, weight }) => `${head} ${from} ${to} ${weight}`).join()).toBe(
          b.lines.map(({ head, from, to, weight }) => `${head} ${from} ${to} ${weight}`).join());
      };
      warmHeads(layer); // each head's lines alone, as the page works them out while idle
      for (const visibleHeads of [...subsets, ...subsets.reverse()]) {
        same(strongestLinesOf(layer, { visibleHeads }), strongestLines(layer, { visibleHeads }));
      }
      const all = strongestLinesOf(layer, { visibleHeads: [0, 1, 2] });
      expect(all.minWeight).toBeGreaterThan(strongestLinesOf(layer, { visibleHeads: [2] }).minWeight);
      expect(all.total).toBeGreaterThan(20000);
      expect(all.kept).toBeLessThanOrEqual(20000);
      same(strongestLinesOf(layer, { visibleHeads: [2, 0, 0] }), strongestLines(layer, { visibleHeads: [0, 2] }));
    }
  });

  it("works the held layers' lines out an idle moment each, then their heads', and stops when told", async () => {
    const layers = [{ ...attention }, { ...attention }, { ...attention }];
    const nHeads = attention.shape[0];
    const spy = vi.fn();
    globalThis.requestIdleCallback = (fn) => setTimeout(() => { spy(); fn(); }, 0);
    globalThis.cancelIdleCallback = clearTimeout;
    try {
      warmStrongestLines(layers.slice(0, 2), { visibleHeads: [1] });
      await new Promise((r) => setTimeout(r, 50));
      expect(spy).toHaveBeenCalledTimes(2 * (nHeads + 1)); // each layer's lines, then each head's alone
      const ready = strongestLinesOf(layers[0], { visibleHeads: [1] });
      expect(strongestLinesOf(layers[0], { visibleHeads: [1] })).toBe(ready);
      // A toggle adds up the heads' packed lines: what one scan finds.
      expect(strongestLinesOf(layers[1], { visibleHeads: [0, 1] })).toEqual(strongestLines(layers[1], { visibleHeads: [0, 1] }));
      const stop = warmStrongestLines([layers[2]], { visibleHeads: [1] });
      stop();
      await new Promise((r) => setTimeout(r, 20));
      expect(spy).toHaveBeenCalledTimes(2 * (nHeads + 1)); // stopped before its first idle moment
    } finally {
      delete globalThis.requestIdleCallback;
      delete globalThis.cancelIdleCallback;
    }
  });
});

describe("strongestLines", () => {
  const picked = (...args) => { const { minWeight, kept, total } = strongestLines(...args); return { minWeight, kept, total }; };

  it("keeps every line that fits the budget", () => {
    expect(picked(attention)).toEqual({ minWeight: DEFAULT_MIN_WEIGHT, kept: 11, total: 11 });
    expect(strongestLines(attention).lines).toEqual(computeLines(attention));
  });

  it("raises the threshold until the strongest lines fit", () => {
    // Weights ≥ 0.5: 0.5, 0.8, 0.6 (head 0) and three 1.0 (head 1).
    expect(picked(attention, {}, 6)).toEqual({ minWeight: 0.5, kept: 6, total: 11 });
    expect(strongestLines(attention, {}, 6).lines).toEqual(computeLines(attention, { minWeight: 0.5 }));
    expect(picked(attention, { visibleHeads: [0] }, 3)).toEqual({ minWeight: 0.5, kept: 3, total: 8 });
    expect(strongestLines(attention, {}, 0).lines).toEqual([]);
  });

  it("reads one-byte payloads as bytes and finds the same lines as from their floats", () => {
    // 3 heads × 40 × 40 one-byte weights over the whole range, with some of every level.
    const bytes = Uint8Array.from({ length: 3 * 40 * 40 }, (_, i) => (i * 7919) % 256);
    const payload = decodeArray({ data: bytes, dtype: "uint8", shape: [3, 40, 40], scale: 1 / 255 });
    const floats = { values: Float32Array.from(payload.values), shape: [3, 40, 40] };
    for (const budget of [20000, 2000, 500, 10, 0]) {
      for (const shown of [{}, { visibleHeads: [2, 0] }, { sentenceBStart: 15, sentenceFilter: "ab" }]) {
        expect(strongestLines(payload, shown, budget)).toEqual(strongestLines(floats, shown, budget));
      }
    }
    expect(strongestLines(payload, {}, 500).minWeight).toBeGreaterThan(DEFAULT_MIN_WEIGHT); // the budget bit
  });

  it("skips faint bytes four at a time and finds the same lines as byte by byte", () => {
    // Mostly 0 and 1 (under the first threshold), some lines, rows of 37 keys (unaligned rows).
    const n = 2 * 37 * 37;
    const faint = Uint8Array.from({ length: n }, (_, i) => (i % 11 === 0 ? (i * 31) % 256 : i % 2));
    const aligned = { bytes: faint, scale: 1 / 255, shape: [2, 37, 37] };
    // The same bytes at an odd offset cannot be read as words: read byte by byte.
    const odd = new Uint8Array(n + 1).subarray(1);
    odd.set(faint);
    const byteByByte = { bytes: odd, scale: 1 / 255, shape: [2, 37, 37] };
    const floats = { values: Float32Array.from(faint, (b) => b / 255), shape: [2, 37, 37] };
    for (const budget of [20000, 100, 0]) {
      for (const shown of [{}, { visibleHeads: [1] }, { sentenceBStart: 13, sentenceFilter: "ba" }]) {
        const found = strongestLines(aligned, shown, budget);
        expect(found).toEqual(strongestLines(byteByByte, shown, budget));
        expect(found).toEqual(strongestLines(floats, shown, budget));
      }
    }
    expect(strongestLines(aligned).kept).toBeGreaterThan(100);
  });

  it("finds the same lines as computeLines for every head set and sentence filter", () => {
    const opts = { sentenceBStart: 2 };
    for (const sentenceFilter of ["all", "aa", "ab", "ba", "bb"]) {
      for (const visibleHeads of [[0], [1], [1, 0], []]) {
        const shown = { ...opts, sentenceFilter, visibleHeads };
        expect(strongestLines(attention, shown).lines).toEqual(computeLines(attention, shown));
      }
    }
  });

  it("says so in the view", () => {
    const values = new Float32Array(1 * 200 * 200).fill(0.008);
    for (let i = 0; i < 200; i++) values[i * 200 + i] = 0.5; // one strong diagonal
    const container = document.createElement("div");
    const view = createHeadView(container);
    view.update({ tokens: Array.from({ length: 200 }, (_, i) => `t${i}`), sentenceBStart: null,
      attention: { shape: [1, 200, 200], values }, visibleHeads: [0], sentenceFilter: "all" });
    expect(container.querySelector(".attnscope-lines").dataset.lineCount).toBe("200");
    const note = container.querySelector(".attnscope-lines-note");
    expect(note.hidden).toBe(false);
    expect(note.textContent).toContain("200 strongest lines (weight ≥ 0.01) of 40,000");
    // Weighed on one scale: the threshold in what the lines draw, unscaled.
    view.update({ tokens: Array.from({ length: 200 }, (_, i) => `t${i}`), sentenceBStart: null, weightScale: 4,
      lineMeasure: "‖αf(x)‖", attention: { shape: [1, 200, 200], values }, visibleHeads: [0], sentenceFilter: "all" });
    expect(note.textContent).toContain("200 strongest lines (‖αf(x)‖ ≥ 0.040) of 40,000");
  });
});

describe("a difference (|second − first|)", () => {
  it("is drawn on the run's one scale, with its numbers and hover card in the difference's own units", async () => {
    const { adapter } = await import("./head_view.js");
    const traits = { tokens: ["a", "b", "c"], key_tokens: [], n_heads: 2, heads: [0, 1], layer: 0, attention: { layer: 0 },
      sentence_b_start: null, sentence_filter: "all", token_notes: [], key_token_notes: [], causal: false, long_context: false,
      one_scale: { of: "|second − first|", largest: 0.5, layer: 3, head: 1 } };
    const get = (name) => traits[name];
    const container = document.createElement("div");
    const view = adapter.create(container, { setTraits: () => {} }, get);
    made.push(view);
    // The kernel's weights: |difference| ÷ 0.5, the run's largest change.
    expect(adapter.draw(view, { get, decoded: () => attention, width: 600 })).toBe("");
    expect(container.querySelector(".attnscope-window-note").textContent).toContain("strongest line = 0.500, the largest change (layer 3, head 1)");
    container.querySelector('.attnscope-right .attnscope-token[data-index="0"]').dispatchEvent(new MouseEvent("mouseenter"));
    const rows = [...container.querySelectorAll(".attnscope-left .attnscope-token")];
    expect(rows[1].title).toBe(`|second − first| from “b” to “a” (one bar a head, the number their largest):\nhead 0: 0.0500\nhead 1: 0.500`);
  });
});
