// @vitest-environment jsdom
// The long-input views but the map (map_view.test.js) and the text view's blocks (text_blocks.test.js): the text view's shading, reading,
// picture and top tokens, a saved page's answers, the head view's window and the model view's
// thumbnails on a long run.
import { describe, expect, it } from "vitest";
import { keyHeadOf, topK } from "../controls/long_controls.js";
import { mapSubtitle, wholeMap } from "./map_view.js";
import { sceneToSvg } from "../drawing/scene.js";
import { savedAnswer } from "../standalone.js";
import { isDeepShade } from "../drawing/colors.js";
import { shadeOf, textScale } from "../drawing/text_scale.js";
import { createTextView } from "./text_view.js";
import { chunkBoundaries, shadingTitle, textScene } from "./text_scene.js";

describe("text view", () => {
  it("shades tokens on the scale of those not set aside", () => {
    const values = Float32Array.from([0.9, 0.05, 0.1, 0.05]);
    expect(textScale(values).max).toBeCloseTo(0.9);
    const [sink, a, b] = [0, 1, 2].map(shadeOf(values, textScale(values, { aside: 1 })));
    expect(sink).toBe("rgba(128,128,128,1.00)");
    expect(b).toBe("rgba(33,113,181,1.00)"); // 0.1 is the largest once the sink is aside
    expect(a).toBe("rgba(33,113,181,0.50)");
    expect(topK(values, 2)).toEqual([0, 2]);
    expect(topK(Float32Array.from([0, 0.2, 0.1, 0.3, 0.25]), 3)).toEqual([3, 4, 1]);
  });

  it("writes a deeply shaded token's text light, live and in the picture (dark on the full blue read at 3:1)", () => {
    expect(["rgba(33,113,181,1.00)", "rgba(33,113,181,0.80)", "rgba(128,128,128,0.95)"].map(isDeepShade)).toEqual([true, true, true]);
    expect(["rgba(33,113,181,0.79)", "rgba(33,113,181,0.00)", ""].map(isDeepShade)).toEqual([false, false, false]);
    const state = { tokens: ["The", " cat", "."], notes: [], selected: 0, values: Float32Array.from([0, 0.2, 1]), message: "", head: -1,
      nHeads: 2, nKeyHeads: 2, direction: "from", aside: 0, layer: 0, model: "m" };
    const body = document.createElement("div");
    createTextView(body).update(state);
    const spans = [...body.querySelectorAll(".attnscope-text-token")];
    expect(spans.map((span) => span.classList.contains("attnscope-deep"))).toEqual([false, false, true]);
    const texts = textScene(state).items.filter((item) => item.type === "text" && item.role === "token");
    expect(texts.map((item) => item.color ?? null)).toEqual([null, null, "#fff"]);
  });

  it("groups query heads by key head", () => {
    expect([0, 3, 4, 7].map((h) => keyHeadOf(h, 8, 2))).toEqual([0, 0, 1, 1]);
    const body = document.createElement("div");
    const view = createTextView(body);
    view.update({ tokens: ["a", "b"], notes: [], selected: 0, values: null, message: "", head: -1, nHeads: 8, nKeyHeads: 2,
      direction: "from", aside: 0, layer: 0, model: "m" });
    const groups = [...body.querySelectorAll("optgroup")].map((g) => [g.label, g.children.length]);
    expect(groups).toEqual([["Key head 0", 4], ["Key head 1", 4]]);
  });

  it("shows token text as data, selects on click and lists the top tokens", () => {
    const body = document.createElement("div");
    const picked = [];
    const view = createTextView(body, { onSelect: (i) => picked.push(i) });
    const tokens = ["<img src=x onerror=alert(1)>", " café", " 日本", "↑", " 🙂"];
    const values = Float32Array.from([0.1, 0.5, 0.2, 0.15, 0.05]);
    view.update({ tokens, notes: ["", "", "", "bytes e6 97", ""], selected: 1, values, message: "", head: 2, nHeads: 4,
      nKeyHeads: 4, direction: "to", aside: 0, layer: 1, model: "m" });
    const spans = [...body.querySelectorAll(".attnscope-text-token")];
    expect(spans.map((s) => s.textContent)).toEqual(tokens);
    expect(body.querySelector("img")).toBeNull();
    expect(spans[1].classList.contains("attnscope-selected")).toBe(true);
    expect(spans[3].title).toContain("bytes e6 97");
    expect(body.querySelector(".attnscope-text-caption").textContent).toBe("Attention to “ café” (token 1), head 2, layer 1");
    spans[2].click();
    body.querySelector(".attnscope-top-token").click(); // the largest is the selected token itself: no change
    body.querySelectorAll(".attnscope-top-token")[1].click();
    expect(picked).toEqual([2, 2]);
    const scene = textScene({ tokens, notes: [], selected: 1, values, aside: 0, head: 2, layer: 1, direction: "to" }, { title: "t" });
    expect(scene.items.filter((i) => i.role === "token").map((i) => i.text)).toContain(" 日本");
    expect(scene.items.filter((i) => i.role === "selected")).toHaveLength(1);
  });

  it("dims only the text flow while a selection's numbers are asked for", () => {
    // A class on an ancestor of every token span makes the browser visit them all on each click.
    const body = document.createElement("div");
    const view = createTextView(body, {});
    const shown = { tokens: ["a", " b", " c"], notes: [], selected: 0, values: Float32Array.from([0.5, 0.3, 0.2]),
      message: "", head: -1, nHeads: 2, nKeyHeads: 2, direction: "from", aside: 0, layer: 0, model: "m" };
    view.update(shown);
    view.update({ ...shown, selected: 2, values: null });
    const flow = body.querySelector(".attnscope-text-flow");
    expect(flow.classList.contains("attnscope-stale")).toBe(true);
    expect(body.querySelectorAll(".attnscope-stale")).toHaveLength(1);
    view.update({ ...shown, selected: 2 });
    expect(body.querySelectorAll(".attnscope-stale")).toHaveLength(0);
  });
});

describe("text view reading", () => {
  it("flows the tokens as the text reads, and keeps their labels in the list and captions", () => {
    const body = document.createElement("div");
    const view = createTextView(body, {});
    const tokens = ["[CLS]", "The", "keep", "##er", "fed", "[SEP]"];
    const reading = ["[CLS]", "The", " keep", "er", " fed", "[SEP]"];
    const values = Float32Array.from([0.1, 0.2, 0.3, 0.25, 0.1, 0.05]);
    const state = { tokens, reading, notes: [], selected: 3, values, message: "", head: null, nHeads: 2, nKeyHeads: 2,
      direction: "from", aside: 0, layer: 0, model: "m" };
    view.update(state);
    expect(body.querySelector(".attnscope-text-flow").textContent).toBe("[CLS]The keeper fed[SEP]");
    expect(body.querySelector(".attnscope-text-caption").textContent).toContain("“##er”");
    expect([...body.querySelectorAll(".attnscope-top-token")].map((b) => b.textContent)).toContain("“keep”");
    const scene = textScene(state, { title: "t" });
    expect(scene.items.filter((i) => i.type === "text" && i.role === "token").map((i) => i.text).join("")).toBe("[CLS]The keeper fed[SEP]");
    // Each token is drawn to the width it was laid out by, so "keep" + "er" meet as one word in
    // the picture (the walk's reopened picture read "Ow ls" for "Owls").
    const drawn = scene.items.filter((i) => i.type === "text" && i.role === "token");
    const boxes = scene.items.filter((i) => i.type === "rect" && (i.role === "token" || i.role === "selected"));
    drawn.forEach((item, n) => { expect(item.fit).toBe(boxes[n].width); expect(item.x).toBe(boxes[n].x); });
    const svg = sceneToSvg(scene);
    expect(svg).toMatch(/<text [^>]*textLength="[\d.]+" lengthAdjust="spacingAndGlyphs" xml:space="preserve"[^>]*> keep<\/text>/);
    // A reading that does not match the tokens (another run's) is not used.
    view.update({ ...state, tokens: ["a", "b"], reading, values: Float32Array.from([0.5, 0.5]), selected: 0 });
    expect(body.querySelector(".attnscope-text-flow").textContent).toBe("ab");
    view.destroy();
  });
});

describe("text view: a character split over tokens", () => {
  it("reads once in the running text, and each of its tokens can still be selected and is marked there", () => {
    const body = document.createElement("div");
    const picked = [];
    const view = createTextView(body, { onSelect: (i) => picked.push(i) });
    // "près de Zürich" in a byte-level vocabulary: è and ü each split over two tokens.
    const tokens = ["<s>", "pr", "è", "↑", "s", " de", " Z", "ü", "↑", "rich"];
    const notes = ["", "", "", "bytes A8 of “è”, shown on an earlier token", "", "", "", "", "bytes BC of “ü”, shown on an earlier token", ""];
    const reading = ["<s>", "pr", "è", "", "s", " de", " Z", "ü", "", "rich"];
    const values = Float32Array.from([0.3, 0.05, 0.1, 0.2, 0.05, 0.05, 0.05, 0.1, 0.05, 0.05]);
    const state = { tokens, notes, reading, selected: 3, values, message: "", head: 0, nHeads: 2, nKeyHeads: 2,
      direction: "from", aside: 0, layer: 0, model: "m" };
    view.update(state);
    const flow = body.querySelector(".attnscope-text-flow");
    expect(flow.textContent).toBe("<s>près de Zürich");
    const spans = [...flow.querySelectorAll(".attnscope-text-token")];
    // Token 3 (the second byte of è) is selected: è is outlined, and says which tokens it holds.
    expect(spans.filter((s) => s.classList.contains("attnscope-selected")).map((s) => s.dataset.index)).toEqual(["2"]);
    expect(spans[3].getAttribute("aria-selected")).toBe("true");
    expect(spans[2].title).toContain("token 3: “↑” (bytes A8 of “è”");
    expect(body.querySelector(".attnscope-text-caption").textContent).toContain("(token 3)");
    // A click on è selects its first token; again, the next (round).
    spans[2].click();
    view.update({ ...state, selected: 2 });
    spans[2].click();
    spans[7].click();
    expect(picked).toEqual([2, 3, 7]);
    // The image reads the same, the selection under è.
    const scene = textScene(state, { title: "t" });
    const texts = scene.items.filter((i) => i.role === "token").map((i) => i.text);
    expect(texts.join("")).toBe("<s>près de Zürich");
    expect(texts).not.toContain("↑");
    const mark = scene.items.find((i) => i.role === "selected");
    const e = scene.items.find((i) => i.role === "token" && i.text === "è");
    expect(mark.x).toBe(e.x);
    view.destroy();
  });
});

describe("text view picture", () => {
  // The picture's rows as text: each token's text by the row it is drawn on.
  const rowsOf = (scene) => {
    const rows = new Map();
    for (const item of scene.items.filter((i) => i.type === "text" && i.role === "token")) rows.set(item.y, (rows.get(item.y) ?? "") + item.text);
    return [...rows.values()];
  };
  const words = Array.from({ length: 5000 }, (_, i) => (i % 97 === 96 ? " end.\n" : ` w${i}`));
  const values = Float32Array.from(words, (_, i) => ((i * 7919) % 1000) / 1000);
  const state = (selected) => ({ tokens: words, reading: words, notes: [], selected, values, message: "", head: 0, nHeads: 1,
    nKeyHeads: 1, direction: "from", aside: 0, layer: 0, model: "m" });

  it("breaks its lines between words, never between two tokens of one word", () => {
    // Words of two tokens ("spoon" + "ful"), on lines too short for many: no row starts inside a word.
    const pieces = Array.from({ length: 120 }, (_, i) => (i % 2 ? "ful" : ` spoon${i}`));
    const scene = textScene({ ...state(0), tokens: pieces, reading: pieces, values: new Float32Array(pieces.length).fill(0.5) },
      { lines: 1000, width: 300 });
    const rows = rowsOf(scene);
    expect(rows.length).toBeGreaterThan(3);
    expect(rows.join("")).toBe(pieces.join(""));
    for (const row of rows) expect(row.startsWith(" spoon")).toBe(true);
  });

  it("shows the lines around the selection as the live view breaks them, a block starting a line", () => {
    // Every line of the whole text as the flow shows it: each block (chunkBoundaries) from a new line.
    const starts = chunkBoundaries(words);
    const all = [];
    for (let k = 0; k + 1 < starts.length; k++) {
      const block = textScene({ ...state(starts[k]), tokens: words.slice(starts[k], starts[k + 1]),
        reading: words.slice(starts[k], starts[k + 1]), values: values.slice(starts[k], starts[k + 1]), selected: 0 },
      { lines: 10_000 });
      all.push(...rowsOf(block));
    }
    expect(all.join("").replace(/\n/g, "")).toBe(words.join("").replace(/\n/g, ""));
    for (const selected of [0, 5, starts[3] - 1, starts[3], 2500, 4990, 4999]) {
      const scene = textScene(state(selected), { lines: 12 });
      const rows = rowsOf(scene);
      expect(rows).toHaveLength(12);
      // Consecutive lines of the whole text, the selection's in the middle where the text allows.
      const at = all.findIndex((_, k) => rows.every((row, n) => all[k + n] === row));
      expect(at).toBeGreaterThanOrEqual(0);
      const mark = scene.items.find((i) => i.role === "selected");
      const ys = [...new Set(scene.items.filter((i) => i.type === "text" && i.role === "token").map((i) => i.y))];
      const row = ys.findIndex((y) => Math.abs(y - (mark.y + (mark.height) / 2)) < 1);
      expect(rows[row]).toContain(words[selected].replace("\n", ""));
      expect(at).toBe(Math.max(0, Math.min(at + row - 6, all.length - 12)));
    }
  });
});

describe("text view scrolling", () => {
  it("scrolls to a token chosen in the list, not to one clicked in the text (it is in view)", () => {
    const body = document.createElement("div");
    let chosen = -1;
    const view = createTextView(body, { onSelect: (i) => { chosen = i; } });
    const tokens = Array.from({ length: 40 }, (_, i) => ` t${i}`);
    const values = Float32Array.from(tokens, (_, i) => (i === 30 ? 0.9 : 0.1 / 39));
    const state = { tokens, notes: [], selected: 0, values, message: "", head: -1, nHeads: 2, nKeyHeads: 2, direction: "from", aside: 0, layer: 0, model: "m" };
    view.update(state);
    const flow = body.querySelector(".attnscope-text-flow");
    Object.defineProperty(flow, "clientHeight", { value: 100 });
    const spans = [...flow.querySelectorAll(".attnscope-text-token")];
    spans.forEach((span, i) => { Object.defineProperty(span, "offsetTop", { get: () => 50 * i }); });
    let scrolled = 0;
    Object.defineProperty(flow, "scrollTop", { get: () => 0, set: () => { scrolled += 1; } });
    spans[35].click();
    expect(chosen).toBe(35);
    view.update({ ...state, selected: 35 });
    view.scrollToSelected(); // what the adapter does after a selection
    expect(scrolled).toBe(0);
    body.querySelector(".attnscope-top-token").click(); // the list's first: token 30
    expect(chosen).toBe(30);
    view.update({ ...state, selected: 30 });
    view.scrollToSelected();
    expect(scrolled).toBe(1);
    view.destroy();
  });
});

describe("text view shading", () => {
  it("shades the tokens of the blocks in view at once and the rest when idle", async () => {
    const body = document.createElement("div");
    const view = createTextView(body, {});
    const n = 4096;
    const tokens = Array.from({ length: n }, (_, i) => ` t${i}`); // each starts a word: a block every 512
    const state = { tokens, notes: [], selected: 0, message: "", head: -1, nHeads: 2, nKeyHeads: 2, direction: "from", aside: 0, layer: 0, model: "m" };
    view.update({ ...state, values: null });
    const flow = body.querySelector(".attnscope-text-flow");
    const blocks = [...flow.children];
    expect(blocks.map((b) => b.className)).toEqual(Array(8).fill("attnscope-text-chunk"));
    expect(blocks.map((b) => b.firstChild.dataset.index)).toEqual(["0", "512", "1024", "1536", "2048", "2560", "3072", "3584"]);
    // A laid-out flow 100 px tall, each block 100 px, scrolled to the fifth block (tokens 2048–2559).
    Object.defineProperty(flow, "clientHeight", { value: 100 });
    Object.defineProperty(flow, "scrollTop", { value: 400 });
    blocks.forEach((b, k) => {
      Object.defineProperty(b, "offsetTop", { value: 100 * k });
      Object.defineProperty(b, "offsetHeight", { value: 100 });
    });
    // The blocks' places, and only a few tokens' (the lines in view, bisected for the colour scale).
    let reads = 0;
    for (const span of flow.querySelectorAll(".attnscope-text-token")) {
      const i = Number(span.dataset.index);
      Object.defineProperty(span, "offsetTop", { get() { reads += 1; return 100 * Math.floor(i / 512) + 12.5 * Math.floor((i % 512) / 64); } });
      Object.defineProperty(span, "offsetHeight", { value: 12.5 });
    }
    view.update({ ...state, values: new Float32Array(n).fill(0.5) });
    const shaded = () => [...flow.querySelectorAll(".attnscope-text-token")].filter((s) => s.style.background).map((s) => Number(s.dataset.index));
    const now = shaded();
    // The blocks in view: 400–500 px (one edge touching the next block's top is not in view).
    expect(now[0]).toBe(2048);
    expect(now.at(-1)).toBe(2559);
    expect(now).toHaveLength(512);
    expect(reads).toBeLessThan(40);
    expect(flow.dataset.shading).toBe("in view");
    // The rest a chunk of spans per idle callback (jsdom writes styles slowly: a few of them here).
    for (let k = 0; k < 300 && flow.dataset.shading !== "done"; k++) await new Promise((r) => setTimeout(r, 10));
    expect(shaded()).toHaveLength(n);
    expect(flow.dataset.shading).toBe("done");
    view.destroy();
  });
});

describe("saved page answers", () => {
  const answers = { answers: [{ type: "attention_rows", request: { layer: 0, head: -1, token: 5, direction: "from" }, content: { n_tokens: 9 }, buffer: "B" }] };
  it("answers the saved request, and says why not for others", () => {
    const state = { result_id: 3, layer: 0, direction: "from", focus_token: 5 };
    const hit = savedAnswer(answers, { type: "attention_rows", id: 1, layer: 0, head: -1, token: 5, direction: "from" }, state);
    expect(hit).toEqual({ content: { n_tokens: 9, result_id: 3 }, buffers: ["B"] });
    // The reader's choice (token 6, layer 1) is the state now; the message names what the page holds.
    const miss = savedAnswer(answers, { type: "attention_rows", id: 2, layer: 1, head: -1, token: 6, direction: "from" },
      { ...state, layer: 1, focus_token: 6 });
    expect(miss.error).toMatch(/^This saved page holds layer 0's whole maps and the attention from token 5\. /);
    // A saved page may be a slide beside a running kernel: it names what it cannot do, not a missing kernel.
    expect(miss.error).toMatch(/Another token, layer or direction needs the live widget: this saved copy cannot rerun the model/);
    expect(miss.error).not.toMatch(/kernel/);
    expect(savedAnswer(answers, { type: "attention_tile", layer: 0 }, state).error).toMatch(/Zooming in/);
  });
});

describe("head view on a long run", () => {
  it("draws the window the kernel answers, marks the selected token and selects on click", async () => {
    const { VIEWS } = await import("./views.js");
    const head = VIEWS.find((v) => v.name === "head");
    expect(head.modes).toContain("long");
    const tokens = Array.from({ length: 300 }, (_, i) => (i === 150 ? " café<b>" : `t${i}`));
    const traits = { long_context: true, tokens, token_notes: [], focus_token: 150, layer: 1, n_heads: 2, heads: [0, 1], result_id: 4, causal: true };
    const get = (name) => traits[name];
    const sent = [];
    const body = document.createElement("div");
    const view = head.create(body, { setTraits: (values) => sent.push(values), redraw: () => {} }, get);
    const asked = [];
    let answer = null;
    const long = { window: (params) => { asked.push(params); return answer; } };
    expect(head.draw(view, { get, long })).toBe("computing…");
    expect(asked[0]).toEqual({ result_id: 4, layer: 1, token: 150 });
    // A window of 4 tokens [148, 152): head 0 attends to the previous token, head 1 to the first,
    // with small weights, as a row spread over a long text has: drawn relative to the largest.
    const values = new Float32Array(2 * 4 * 4);
    for (let i = 0; i < 4; i++) { values[i * 4 + Math.max(0, i - 1)] = 0.0009; values[16 + i * 4] = 0.0004; }
    answer = { rows: [148, 152], n_tokens: 300, shape: [2, 4, 4], values, layer: 1, token: 150 };
    expect(head.draw(view, { get, long })).toBe("");
    const left = [...body.querySelectorAll(".attnscope-left .attnscope-token")];
    expect(left.map((r) => r.textContent)).toEqual(["t148", "t149", " café<b>", "t151"]);
    expect(body.querySelector("b")).toBeNull();
    expect(left[2].classList.contains("attnscope-selected")).toBe(true);
    const lines = view.lastLines();
    expect(lines).toHaveLength(8);
    expect(lines.filter((l) => l.head === 0).map((l) => [l.from, l.to])).toEqual([[0, 0], [1, 0], [2, 1], [3, 2]]);
    const caption = body.querySelector(".attnscope-window-note").textContent;
    expect(caption).toContain("Tokens 148–151 of 300, around token 150 “ café<b>”");
    expect(caption).toContain("relative to the window's largest, 0.00090");
    expect(lines.map((l) => l.weight)).toContain(1);
    // Hovering shows the exact weights, not the relative ones.
    left[2].dispatchEvent(new MouseEvent("mouseenter"));
    const right = [...body.querySelectorAll(".attnscope-right .attnscope-token")];
    expect(right[1].title).toBe("Attention from “ café<b>” to “t149” (the bar and the number):\nhead 0: 0.000900");
    expect(right[0].title).toBe("Attention from “ café<b>” to “t148” (the bar and the number):\nhead 1: 0.000400");
    left[2].dispatchEvent(new MouseEvent("mouseleave"));
    left[3].click();
    expect(sent).toEqual([{ focus_token: 151 }]);
    // The image keeps the caption and marks the selected token.
    const scene = view.scene({ title: "t" });
    expect(scene.items.some((i) => i.role === "subtitle" && i.text.startsWith("Tokens 148–151"))).toBe(true);
    expect(scene.items.filter((i) => i.type === "segment" && i.color === "#d62728")).toHaveLength(2);
    answer = { error: "token=999 is out of range" };
    expect(head.draw(view, { get, long })).toBe("token=999 is out of range");
    view.destroy();
  });

  it("draws a generation's selected output token's row alone, live and in the image; a hover still shows another's", async () => {
    const { VIEWS } = await import("./views.js");
    const head = VIEWS.find((v) => v.name === "head");
    // A prompt of 3 tokens and 3 written ones; the window is the whole run.
    const tokens = ["<s>", "a", "b", " c", " d", " e"];
    const traits = { long_context: true, tokens, token_notes: [], focus_token: 4, layer: 0, n_heads: 1, heads: [0],
      result_id: 1, causal: true, output_start: 3 };
    const get = (name) => traits[name];
    const body = document.createElement("div");
    const view = head.create(body, { setTraits: () => {}, redraw: () => {} }, get);
    const values = new Float32Array(36);
    for (let i = 0; i < 6; i++) for (let j = 0; j <= i; j++) values[i * 6 + j] = 1 / (i + 1); // every row spread evenly
    const long = { window: () => ({ rows: [0, 6], n_tokens: 6, shape: [1, 6, 6], values }) };
    expect(head.draw(view, { get, long })).toBe("");
    const rowsOf = (lines) => [...new Set(lines.map((l) => l.from))];
    expect(rowsOf(view.lastLines())).toEqual([4]); // step 2's row: what it looked at when written
    expect(view.lastLines()).toHaveLength(5);
    const caption = body.querySelector(".attnscope-window-note").textContent;
    expect(caption).toContain("(step 2 of 3), layer 0: only its row is drawn, what it looked at when the model wrote it:");
    // Its weights are shown beside the keys, as a hover shows them.
    const right = [...body.querySelectorAll(".attnscope-right .attnscope-token")];
    expect(right[0].title).toMatch(/^Attention from “ d” to “<s>”/);
    const left = [...body.querySelectorAll(".attnscope-left .attnscope-token")];
    left[1].dispatchEvent(new MouseEvent("mouseenter"));
    expect(rowsOf(view.lastLines())).toEqual([1]);
    left[1].dispatchEvent(new MouseEvent("mouseleave"));
    expect(rowsOf(view.lastLines())).toEqual([4]);
    // The image draws the same 5 lines, all from one row's height.
    const segments = view.scene({ title: "t" }).items.filter((i) => i.type === "lines").flatMap((i) => i.groups.flatMap((g) => g.segments));
    expect(segments).toHaveLength(5);
    expect(new Set(segments.map((segment) => segment[1])).size).toBe(1);
    expect(head.picture({ get, long }, { title: "t" }).items.some((i) => i.role === "subtitle" && /only its row is drawn/.test(i.text))).toBe(true);
    // Another output token: its row; a prompt token: every row, as on any long run.
    traits.focus_token = 5;
    head.draw(view, { get, long });
    expect(rowsOf(view.lastLines())).toEqual([5]);
    traits.focus_token = 2;
    head.draw(view, { get, long });
    expect(rowsOf(view.lastLines())).toEqual([0, 1, 2, 3, 4, 5]);
    expect(body.querySelector(".attnscope-window-note").textContent).not.toContain("only its row");
    view.destroy();
  });

  it("scales the lines without the columns of tokens set aside", async () => {
    const { VIEWS } = await import("./views.js");
    const head = VIEWS.find((v) => v.name === "head");
    const traits = { long_context: true, tokens: ["<s>", "a", "b"], token_notes: [], focus_token: 2, layer: 0, n_heads: 1,
      heads: [0], result_id: 1, causal: true, sink_aside: 0 };
    const get = (name) => traits[name];
    const view = head.create(document.createElement("div"), { setTraits: () => {}, redraw: () => {} }, get);
    // Rows of one head: most weight on the first token (a sink), a little on the others.
    const values = Float32Array.from([1, 0, 0, 0.98, 0.002, 0, 0.97, 0.001, 0.002]);
    const answer = { rows: [0, 3], n_tokens: 3, shape: [1, 3, 3], values };
    const long = { window: () => answer };
    head.draw(view, { get, long });
    expect(view.lastLines().filter((l) => l.to > 0)).toHaveLength(0); // too faint beside the sink
    traits.sink_aside = 1;
    head.draw(view, { get, long });
    const strong = view.lastLines().filter((l) => l.to > 0).map((l) => [l.from, l.to, l.weight]);
    expect(strong).toEqual([[1, 1, 1], [2, 1, 0.5], [2, 2, 1]]);
    view.destroy();
  });
});

describe("model view on a long run", () => {
  it("draws thumbnails the kernel refines in passes, saying how far they are", async () => {
    const { VIEWS } = await import("./views.js");
    const model = VIEWS.find((v) => v.name === "model");
    const traits = { long_context: true, tokens: Array.from({ length: 64 }, (_, i) => `t${i}`), thumbnails: {}, n_heads: 2,
      include_layers: null, include_heads: null, result_id: 3, masked_heads: [] };
    const get = (name) => traits[name];
    const body = document.createElement("div");
    const view = model.create(body, { setTraits: () => {}, redraw: () => {} }, get);
    let answer = null;
    const asked = [];
    const long = { thumbnails: (what) => { asked.push(what); return answer; } };
    expect(model.draw(view, { get, long, width: 600 })).toBe("loading thumbnails…");
    expect(asked[0]).toEqual({ result_id: 3, layers: null, heads: null });
    const values = new Float32Array(1 * 2 * 4 * 4).fill(0.01);
    values[0] = 0.9;
    answer = { values, shape: [1, 2, 4, 4], layers: [0], heads: [0, 1], n_tokens: 64, passesDone: 2, passes: 8 };
    expect(model.draw(view, { get, long, width: 600 })).toBe("");
    expect(body.querySelector("canvas.attnscope-thumbnails").dataset.cells).toBe("2");
    expect(body.querySelector(".attnscope-scale-note").textContent).toContain("Refining: each cell is the largest weight of 25% of its rows so far.");
    answer = { ...answer, passesDone: 8 };
    model.draw(view, { get, long, width: 600 });
    expect(body.querySelector(".attnscope-scale-note").textContent).not.toContain("Refining");
    answer = { error: "This saved page holds no thumbnails." };
    expect(model.draw(view, { get, long, width: 600 })).toBe("This saved page holds no thumbnails.");
  });

  it("draws weighed thumbnails refined in passes on one scale for every head shown, their largest so far (issue 47)", async () => {
    const { VIEWS } = await import("./views.js");
    const model = VIEWS.find((v) => v.name === "model");
    const traits = { long_context: true, tokens: Array.from({ length: 64 }, (_, i) => `t${i}`), thumbnails: {}, n_heads: 2,
      n_layers: 1, include_layers: null, include_heads: null, result_id: 3, masked_heads: [], weigh_by: "value_norm", one_scale: {},
      model_name: "m" };
    const get = (name) => traits[name];
    // Head 0 passes little (its largest ‖αf(x)‖ 0.2), head 1 much (1.6): a head's own scale draws both full.
    const values = new Float32Array(2 * 4 * 4).fill(0.01);
    values[0] = 0.2;
    values[16] = 1.6;
    const declared = { of: "‖αf(x)‖", measure: "‖αf(x)‖", over: "every layer and head shown" };
    let answer = { values, shape: [1, 2, 4, 4], layers: [0], heads: [0, 1], n_tokens: 64, passesDone: 2, passes: 8, one_scale: declared };
    const long = { thumbnails: () => answer };
    const darkest = (scene, index) => Math.max(0, ...scene.items.filter((item) => item.type === "lines")[index].groups.map((g) => g.alpha));
    const scene = model.picture({ get, long, width: 600 }, { title: "t" });
    expect(darkest(scene, 1)).toBe(1);
    expect(darkest(scene, 0)).toBeCloseTo(0.2 / 1.6, 1);
    const body = document.createElement("div");
    const view = model.create(body, { setTraits: () => {}, redraw: () => {} }, get);
    expect(model.draw(view, { get, long, width: 600 })).toBe("");
    const note = body.querySelector(".attnscope-scale-note").textContent;
    expect(note).toContain("Refining: each cell is the largest ‖αf(x)‖ of 25% of its rows so far, and the strongest line the largest of those.");
    expect(note).toContain("‖αf(x)‖, one scale for every layer and head shown: strongest line = 1.600, the largest ‖αf(x)‖ (layer 0, head 1)");
    // A later pass finds a larger value: the scale grows with it.
    const more = Float32Array.from(values);
    more[1] = 3.2;
    answer = { ...answer, values: more, passesDone: 8 };
    model.draw(view, { get, long, width: 600 });
    expect(body.querySelector(".attnscope-scale-note").textContent).toMatch(/^‖αf\(x\)‖, one scale .*strongest line = 3\.200, the largest ‖αf\(x\)‖ \(layer 0, head 0\)/);
    // Attention's passes keep each head's own scale.
    const plain = model.picture({ get, long: { thumbnails: () => ({ ...answer, values, one_scale: undefined }) }, width: 600 }, { title: "t" });
    expect([darkest(plain, 0), darkest(plain, 1)]).toEqual([1, 1]);
    view.destroy();
  });
});

it("names what the text and map views shade when weighed by value norm (Kobayashi et al.'s ‖αf(x)‖)", () => {
  const text = { tokens: ["a", "b"], selected: 1, direction: "from", head: -1, layer: 2 };
  expect(shadingTitle(text)).toMatch(/^Attention from/);
  expect(shadingTitle({ ...text, weighBy: "value_norm" })).toMatch(/^‖αf\(x\)‖ from/);
  expect(shadingTitle({ ...text, weighBy: "value_norm", direction: "to" })).toMatch(/^‖αf\(x\)‖ to/);
  const map = { region: wholeMap(8), tile: { exact: true, rows: [0, 8], passesDone: 1, passes: 1 }, n: 8, head: 0, layer: 1, reduce: "max" };
  expect(mapSubtitle(map)).not.toMatch(/αf/);
  expect(mapSubtitle({ ...map, weighBy: "value_norm" })).toMatch(/^‖αf\(x\)‖ \(α × value norm\)/);
});
