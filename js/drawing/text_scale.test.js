// @vitest-environment jsdom
// The text view's colour scale (issue 45 item 4): taken from the text shown, the tokens set aside
// and the selected token's own weight left out, and said under the bars, on screen and in the picture.
import { describe, expect, it, vi } from "vitest";
import { formatWeight, shadeOf, textScale, textScaleNote } from "./text_scale.js";
import { textScene } from "../views/text_scene.js";
import { createTextView, SCROLL_REST_MS } from "../views/text_view.js";

// The blue's opacity, as written ("rgba(33,113,181,0.50)") or as jsdom reads it back ("rgb(33, 113, 181)" at 1).
const alphaOf = (color) => {
  const parts = /rgba?\(33,\s*113,\s*181(?:,\s*([\d.]+))?\)/.exec(color);
  return parts ? Number(parts[1] ?? 1) : Number.NaN;
};

// A long row with a sink (token 0), a selected token weighing much on itself, and small weights
// that differ from one part of the text to another.
function sinkRow(n, selected) {
  const values = Float32Array.from({ length: n }, (_, i) => (0.002 + 0.03 * (((i * 7919) % 1000) / 1000)) * (1 + Math.floor(i / 1000)));
  values[0] = 0.5;
  values[selected] = 0.9;
  return values;
}
// The flow as a browser lays it out: 100 px tall, scrolled to scrollTop(), each block of 512
// tokens 100 px, in 8 lines of 64.
function layOut(flow, scrollTop) {
  Object.defineProperty(flow, "clientHeight", { value: 100 });
  Object.defineProperty(flow, "scrollTop", { get: scrollTop });
  [...flow.children].forEach((b, k) => {
    Object.defineProperty(b, "offsetTop", { value: 100 * k });
    Object.defineProperty(b, "offsetHeight", { value: 100 });
  });
  for (const span of flow.querySelectorAll(".attnscope-text-token")) {
    const i = Number(span.dataset.index);
    Object.defineProperty(span, "offsetTop", { value: 100 * Math.floor(i / 512) + 12.5 * Math.floor((i % 512) / 64) });
    Object.defineProperty(span, "offsetHeight", { value: 12.5 });
  }
}
const largestIn = (values, lo, hi, skip) => Math.max(...Array.from(values.slice(lo, hi)).filter((_, k) => !skip.includes(lo + k)));

describe("text scale", () => {
  it("tops out at the largest weight in view, not at a sink or the selected token's own weight", () => {
    const values = sinkRow(3000, 1500);
    const scale = textScale(values, { aside: 1, selected: 1500, lo: 1400, hi: 1600 });
    expect(scale.max).toBe(largestIn(values, 1400, 1600, [1500]));
    expect(scale.max).toBeLessThan(0.1); // neither the sink's 0.5 nor the token's own 0.9
    const shade = shadeOf(values, scale);
    const top = Array.from(values).findIndex((v, i) => i >= 1400 && i < 1600 && i !== 1500 && v === scale.max);
    expect(shade(top)).toBe("rgba(33,113,181,1.00)");
    expect(shade(1500)).toBe("rgba(33,113,181,1.00)"); // above the top: full colour
    expect(shade(0)).toBe("rgba(128,128,128,1.00)"); // the sink on its own grey scale
    // Weights out of view do not count; those in view do, a first token not set aside among them.
    const later = textScale(values, { aside: 1, selected: 1500, lo: 2500, hi: 2700 });
    expect(later.max).toBe(largestIn(values, 2500, 2700, []));
    expect(later.max).toBeGreaterThan(scale.max);
    expect(textScale(values, { aside: 0, selected: 1500, lo: 0, hi: 200 }).max).toBe(0.5);
    // Nothing in view above 0 (a causal row's later tokens): the whole text's largest, said so.
    values.fill(0, 1501);
    const empty = textScale(values, { aside: 1, selected: 1500, lo: 2000, hi: 2100 });
    expect(empty.max).toBe(largestIn(values, 1, 3000, [1500]));
    expect(textScaleNote(empty)).toContain("(none of the text in view is above 0)");
  });

  it("writes a long text's small weights to two significant figures, as the bar's ticks", () => {
    expect([0.5, 0.066, 0.0014, 0.00061, 3.2e-6].map(formatWeight)).toEqual(["0.500", "0.066", "0.0014", "0.00061", "3.2e-6"]);
  });

  it("says how the top was taken", () => {
    const values = sinkRow(3000, 1500);
    const scale = textScale(values, { aside: 1, selected: 1500, lo: 1400, hi: 1600 });
    expect(textScaleNote(scale)).toBe(`colour full at ${formatWeight(scale.max)}, the largest of the text in view `
      + "(the selected token's own 0.900 and the set-aside first token left out; largest anywhere 0.500, token 0)");
    // The selected token out of view: its own weight is not named.
    const plain = textScale(values, { aside: 4, selected: 1500, lo: 2900, hi: 3000 });
    expect(textScaleNote(plain, "the lines shown")).toBe(`colour full at ${formatWeight(plain.max)}, the largest of the lines shown `
      + "(the 4 set-aside first tokens left out; largest anywhere 0.500, token 0)");
  });
});

describe("text view picture scale", () => {
  it("shades the lines it shows on their own scale and says so", () => {
    const tokens = Array.from({ length: 3000 }, (_, i) => ` w${i}`);
    const values = sinkRow(3000, 2000);
    const scene = textScene({ tokens, notes: [], selected: 2000, values, message: "", head: -1, nHeads: 2, nKeyHeads: 2,
      direction: "from", aside: 1, layer: 0, model: "m" }, { lines: 12 });
    const drawn = scene.items.filter((i) => i.type === "text" && i.role === "token").map((i) => Number(i.text.slice(2)));
    expect(drawn).toContain(2000);
    expect(drawn).not.toContain(0);
    const top = largestIn(values, drawn[0], drawn.at(-1) + 1, [2000]);
    const alphas = scene.items.filter((i) => i.role === "token" && i.type === "rect").map((i) => alphaOf(i.fill));
    expect(Math.max(...alphas)).toBe(1); // the largest drawn is at full colour, not 0.03 of the token's own 0.9
    expect(alphas.filter((a) => a >= 0.3).length).toBeGreaterThan(alphas.length / 4);
    const note = scene.items.filter((i) => i.role === "legend-note").map((i) => i.text).join(" ");
    expect(note).toContain(`colour full at ${formatWeight(top)}, the largest of the lines shown`);
    expect(note).toContain("largest anywhere 0.500, token 0");
    const ticks = scene.items.filter((i) => i.role === "legend-tick").map((i) => i.text);
    expect(ticks).toContain(formatWeight(top));
    expect(Math.max(...scene.items.filter((i) => i.type === "text").map((i) => i.y))).toBeLessThan(scene.height);
  });
});

describe("text view on screen", () => {
  it("scales to the lines in view and rescales once a scroll rests", () => {
    vi.useFakeTimers();
    try {
      const body = document.createElement("div");
      const view = createTextView(body, {});
      const n = 2048;
      const tokens = Array.from({ length: n }, (_, i) => ` t${i}`); // a block every 512 tokens
      const state = { tokens, notes: [], selected: 900, message: "", head: -1, nHeads: 2, nKeyHeads: 2, direction: "from", aside: 1, layer: 0, model: "m" };
      view.update({ ...state, values: null });
      const flow = body.querySelector(".attnscope-text-flow");
      let scrollTop = 130;
      layOut(flow, () => scrollTop);
      const values = sinkRow(n, 900);
      values[600] = 0.4; // in a block in view, on a line above it
      view.update({ ...state, values });
      // The lines from 130 to 230 px: the third to eighth of the second block, the first three of the third.
      const [lo, hi] = [512 + 2 * 64, 1024 + 3 * 64];
      expect(flow.dataset.scaledBy).toBe(`${lo},${hi}`);
      const top = largestIn(values, lo, hi, [900]);
      const note = () => body.querySelector(".attnscope-text-scale").textContent;
      expect(note()).toContain(`colour full at ${formatWeight(top)}, the largest of the text in view (the selected token's own 0.900`);
      const spans = [...flow.querySelectorAll(".attnscope-text-token")];
      const alpha = (i) => alphaOf(spans[i].style.background);
      const peak = Array.from(values).findIndex((v, i) => i >= lo && i < hi && i !== 900 && v === top);
      expect(alpha(peak)).toBe(1);
      const seen = spans.slice(lo, hi).map((s) => alphaOf(s.style.background)).filter((_, k) => lo + k !== 900);
      expect(seen.filter((a) => a >= 0.3).length).toBeGreaterThan(seen.length / 4);
      // Scrolled to the end: no rescale while scrolling, then the scale of the text now in view.
      scrollTop = 330;
      flow.dispatchEvent(new Event("scroll"));
      vi.advanceTimersByTime(SCROLL_REST_MS / 2);
      expect(flow.dataset.scaledBy).toBe(`${lo},${hi}`);
      vi.advanceTimersByTime(SCROLL_REST_MS);
      const [lo2, hi2] = [1536 + 2 * 64, n];
      expect(flow.dataset.scaledBy).toBe(`${lo2},${hi2}`);
      const top2 = largestIn(values, lo2, hi2, []);
      expect(top2).not.toBe(top);
      expect(note()).toContain(`colour full at ${formatWeight(top2)}, the largest of the text in view`);
      expect(note()).not.toContain("selected token's own"); // out of view now
      const peak2 = Array.from(values).findIndex((v, i) => i >= lo2 && v === top2);
      expect(alpha(peak2)).toBe(1);
      expect(body.querySelector(".attnscope-colorbar-ticks").textContent).toContain(formatWeight(top2));
      view.destroy();
    } finally {
      vi.useRealTimers();
    }
  }, 30_000); // jsdom writes styles slowly: the 2,048 spans' shading twice

  it("says what the text now in view leaves out when a scroll keeps the top (rows cross as float16)", () => {
    vi.useFakeTimers();
    try {
      const body = document.createElement("div");
      const view = createTextView(body, {});
      const n = 1024;
      const tokens = Array.from({ length: n }, (_, i) => ` t${i}`); // two blocks of 512
      const values = new Float32Array(n).fill(0.01);
      [values[0], values[100], values[200], values[700]] = [0.5, 0.9, 0.05, 0.05]; // the sink, the selected, one top, the same top
      let scrollTop = 0;
      view.update({ tokens, notes: [], selected: 100, message: "", head: -1, nHeads: 2, nKeyHeads: 2, direction: "from", aside: 1,
        layer: 0, model: "m", values: null });
      const flow = body.querySelector(".attnscope-text-flow");
      layOut(flow, () => scrollTop);
      view.update({ tokens, notes: [], selected: 100, message: "", head: -1, nHeads: 2, nKeyHeads: 2, direction: "from", aside: 1,
        layer: 0, model: "m", values });
      const note = () => body.querySelector(".attnscope-text-scale").textContent;
      expect(note()).toBe("colour full at 0.050, the largest of the text in view (the selected token's own 0.900 and the set-aside first token left out; largest anywhere 0.500, token 0)");
      scrollTop = 100;
      flow.dispatchEvent(new Event("scroll"));
      vi.advanceTimersByTime(2 * SCROLL_REST_MS);
      expect(flow.dataset.scaledBy).toBe(`512,${n}`);
      expect(note()).toBe("colour full at 0.050, the largest of the text in view (the set-aside first token left out; largest anywhere 0.500, token 0)");
      view.destroy();
    } finally {
      vi.useRealTimers();
    }
  }, 30_000);
});
