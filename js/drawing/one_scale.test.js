// @vitest-environment node
// Issue 45 item 1: a difference (|second − first|) is drawn on one scale for every layer and
// head, through the adapters' own pictures (the kernel's picture and the screen draw the same
// scenes), and says what its strongest line is; a uniform baseline is never given for it.
import { expect, it } from "vitest";
import { adapter as headAdapter } from "../views/head_view.js";
import { adapter as modelAdapter, SCALE_NOTE, zoomText } from "../views/model_view.js";
import { onOneScale } from "./one_scale.js";

const tokens = ["[CLS]", "the", "cat", "[SEP]"];
const n = tokens.length;
const [LAYERS, HEADS] = [6, 2];
// The heads: layer 0 head 0 changed by at most 0.035, layer 5 head 0 by 0.58 (the run's largest).
const SMALL = 0.035;
const LARGE = 0.58;

/** Thumbnails [L, H, n, n] as the kernel sends a difference: |difference| ÷ the run's largest. */
function differenceThumbnails() {
  const values = new Float32Array(LAYERS * HEADS * n * n);
  const cell = (layer, head, from, to) => ((layer * HEADS + head) * n + from) * n + to;
  for (let from = 0; from < n; from++) {
    for (let to = 0; to < n; to++) {
      values[cell(0, 0, from, to)] = (SMALL * ((from + to) % n)) / (n - 1) / LARGE; // up to 0.035
      values[cell(5, 0, from, to)] = (LARGE * ((from * to) % n)) / (n - 1) / LARGE; // up to 0.58
    }
  }
  return { values, shape: [LAYERS, HEADS, n, n] };
}

function context(traits, decoded) {
  const all = { tokens, key_tokens: [], n_heads: HEADS, n_layers: LAYERS, masked_heads: [], model_name: "|tuned − base|",
    long_context: false, ...traits };
  return { get: (name) => all[name], decoded: (name) => decoded[name], width: 900, maskMode: false };
}

const SCALE = { of: "|second − first|", largest: LARGE, layer: 5, head: 0 };
const thumbnailTraits = { thumbnails: { data: true, n_tokens: n, layers: [...Array(LAYERS).keys()], heads: [0, 1] } };

it("draws a difference's heads on one scale: a change of 0.035 is faint beside one of 0.58", () => {
  const thumbnails = differenceThumbnails();
  const shared = modelAdapter.picture(context({ ...thumbnailTraits, one_scale: SCALE }, { thumbnails }), { title: "t" });
  const lineGroups = shared.items.filter((item) => item.type === "lines");
  const darkestOf = (scene, index) => Math.max(0, ...scene.items.filter((item) => item.type === "lines")[index].groups.map((g) => g.alpha));
  // One lines item a cell, in layer-major order: layer 0 head 0 is the first, layer 5 head 0 the tenth.
  expect(lineGroups.length).toBe(LAYERS * HEADS);
  const [small, large] = [darkestOf(shared, 0), darkestOf(shared, 5 * HEADS)];
  expect(large).toBe(1);
  // The weights' opacity levels are 1/32 apart: the ratio is the changes', to within a level.
  expect(small / large).toBeCloseTo(SMALL / LARGE, 1);
  expect(small).toBeLessThan(0.1);
  // Attention itself keeps each head's own scale (broad heads as meshes): both heads full.
  const own = modelAdapter.picture(context({ ...thumbnailTraits, one_scale: {} }, { thumbnails }), { title: "t" });
  expect([darkestOf(own, 0), darkestOf(own, 5 * HEADS)]).toEqual([1, 1]);
});

it("says the difference's one scale in the model view's picture, not each head's", () => {
  const thumbnails = differenceThumbnails();
  const scene = modelAdapter.picture(context({ ...thumbnailTraits, one_scale: SCALE }, { thumbnails }), { title: "t" });
  const note = scene.items.filter((item) => item.role === "scale").map((item) => item.text).join(" ");
  expect(note).toContain("one scale for every layer and head");
  expect(note).toContain(`strongest line = ${LARGE.toFixed(3)}`);
  expect(note).toContain("layer 5, head 0");
  expect(note).not.toContain("its head's largest");
  const plain = modelAdapter.picture(context({ ...thumbnailTraits, one_scale: {} }, { thumbnails }), { title: "t" });
  expect(plain.items.filter((item) => item.role === "scale").map((item) => item.text).join(" ")).toBe(SCALE_NOTE);
});

it("gives an enlarged head's largest change against the strongest line, never a uniform baseline", () => {
  const thumbnails = differenceThumbnails();
  const state = { thumbnails, tokens, runScale: SCALE };
  const small = zoomText(state, 0, 0);
  expect(small).not.toContain("uniform");
  expect(small).toContain(`largest change ${SMALL.toFixed(3)}`);
  expect(small).toContain(`${Math.round((100 * SMALL) / LARGE)}% of the strongest line`);
  expect(zoomText(state, 5, 0)).toContain(`largest change ${LARGE.toFixed(3)}`);
  // Attention keeps its baseline: a uniform row's weight is what a broad head is read against.
  expect(zoomText({ thumbnails, tokens }, 5, 0)).toContain(`(uniform: ${(1 / n).toFixed(3)})`);
});

it("draws the head view's difference on the run's scale, and its picture says so", () => {
  const values = new Float32Array(HEADS * n * n).fill(SMALL / LARGE);
  const attention = { values, shape: [HEADS, n, n] };
  const traits = { attention: { layer: 0 }, layer: 0, heads: [0, 1], sentence_b_start: null, sentence_filter: "all",
    token_notes: [], key_token_notes: [], causal: false, one_scale: SCALE };
  const scene = headAdapter.picture(context(traits, { attention }), { title: "t" });
  const caption = scene.items.filter((item) => item.role === "subtitle").map((item) => item.text).join(" ");
  expect(caption).toContain("one scale for every layer and head");
  expect(caption).toContain("layer 5, head 0");
  const alphas = scene.items.filter((item) => item.type === "lines").flatMap((item) => item.groups.map((g) => g.alpha));
  expect(Math.max(...alphas)).toBeLessThan(0.1); // 0.035 of 0.58, not a full line
});

it("finds a long run's one scale in its pooled thumbnails: their largest, where it is, NaN never", () => {
  // 2 shown layers (3 and 5) × 2 shown heads (1 and 4) of 2 × 2 maps; the largest in layer 5, head 1.
  const values = Float32Array.from([0.1, 0.2, 0.3, 0.4, 0.5, NaN, 0.0, 0.6, 1.6, 0.8, 0.2, 0.0, 0.4, 0.4, 0.4, 0.4]);
  const declared = { of: "‖αf(x)‖", measure: "‖αf(x)‖", over: "every layer and head shown" };
  const { values: scaled, scale } = onOneScale(values, [2, 2, 2, 2], [3, 5], [1, 4], declared);
  expect(scale).toEqual({ ...declared, largest: Math.fround(1.6), layer: 5, head: 1 });
  expect(Array.from(scaled.slice(8, 12))).toEqual([1, 0.5, 0.125, 0].map((v) => expect.closeTo(v, 6)));
  expect(values[8]).toBeCloseTo(1.6, 6); // the answer's own values are kept
  const nothing = onOneScale(new Float32Array(16), [2, 2, 2, 2], [3, 5], [1, 4], declared);
  expect(nothing.scale.largest).toBe(0);
});

it("draws a long run's weighed thumbnails on the scale they carry (the one_scale trait is a short run's)", () => {
  // ‖αf(x)‖ ÷ 1.6, the largest of every head shown, as payloads.long_thumbnails_payload sends it.
  const values = new Float32Array(2 * 2 * 2 * 2);
  values.set([0.2 / 1.6, 0.1 / 1.6, 0.1 / 1.6, 0.2 / 1.6], 0); // layer 0 head 0 passes little
  values.set([1, 0.5, 0.5, 1], 12); // layer 1 head 1: the largest, 1.6
  const carried = { of: "‖αf(x)‖", measure: "‖αf(x)‖", over: "every layer and head shown", largest: 1.6, layer: 1, head: 1 };
  const traits = { tokens: ["a", "b"], n_heads: 2, n_layers: 2, long_context: true, one_scale: {},
    thumbnails: { data: true, n_tokens: 2, layers: [0, 1], heads: [0, 1], one_scale: carried } };
  const scene = modelAdapter.picture(context(traits, { thumbnails: { values, shape: [2, 2, 2, 2] } }), { title: "t" });
  const darkest = (index) => Math.max(0, ...scene.items.filter((item) => item.type === "lines")[index].groups.map((g) => g.alpha));
  expect(darkest(3)).toBe(1);
  expect(darkest(0)).toBeCloseTo(0.2 / 1.6, 1);
  const note = scene.items.filter((item) => item.role === "scale").map((item) => item.text).join(" ");
  expect(note).toContain("‖αf(x)‖, one scale for every layer and head shown: strongest line = 1.600, the largest ‖αf(x)‖ (layer 1, head 1)");
});
