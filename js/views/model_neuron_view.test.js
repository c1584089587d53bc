// @vitest-environment jsdom
import { expect, it, vi } from "vitest";
import { createModelView, thumbnailLines } from "./model_view.js";
import { cellWidth, createNeuronView, divergingColor, maxAbs } from "./neuron_view.js";

HTMLCanvasElement.prototype.getContext = () => null;

// 1 layer × 2 heads of 2 × 2 thumbnails.
const thumbnails = { shape: [1, 2, 2, 2], values: new Float32Array([0.9, 0.1, 0.0, 1.0, 0.5, 0.5, 0.01, 0.99]) };

it("lists a thumbnail's lines relative to the head's largest weight", () => {
  expect(thumbnailLines(thumbnails.values, thumbnails.shape, 0, 0)).toEqual([
    { from: 0, to: 0, weight: expect.closeTo(0.9), value: expect.closeTo(0.9) },
    { from: 0, to: 1, weight: expect.closeTo(0.1), value: expect.closeTo(0.1) },
    { from: 1, to: 1, weight: 1, value: 1 },
  ]);
  // 0.01 is under a tenth of this head's largest weight (0.99): left out.
  const second = thumbnailLines(thumbnails.values, thumbnails.shape, 0, 1);
  expect(second.map((l) => l.to)).toEqual([0, 1, 1]);
  expect(second[0].weight).toBeCloseTo(0.5 / 0.99);
});

it("shows a broad head: a uniform 1/512 head at full opacity, sampled over every row past the cap", () => {
  const size = 48;
  const values = new Float32Array(size * size).fill(1 / 512);
  const lines = thumbnailLines(values, [1, 1, size, size], 0, 0, 0.1, 600);
  expect(lines).toHaveLength(600);
  expect(lines.every((l) => l.weight === 1)).toBe(true);
  expect(new Set(lines.map((l) => l.from)).size).toBe(size); // not just the first rows
  expect(thumbnailLines(new Float32Array(4), [1, 1, 2, 2], 0, 0)).toEqual([]); // all zero: nothing
});

it("labels the model view's grid and counts its cells", () => {
  const container = document.createElement("div");
  const view = createModelView(container, { onOpenHead: vi.fn() });
  view.update({ thumbnails, layers: [3], heads: [4, 7], nHeads: 12 });
  expect([...container.querySelectorAll(".attnscope-grid-heads span")].map((s) => s.textContent)).toEqual(["Head 4", "Head 7"]);
  expect(container.querySelector(".attnscope-grid-layers span").textContent).toBe("Layer 3");
  expect(container.querySelector("canvas").dataset.cells).toBe("2");
  expect(container.querySelector("canvas").dataset.lineCount).toBe("6");
});

it("colours signed values blue or orange by magnitude", () => {
  expect(divergingColor(2, 4)).toBe("rgba(255,127,14,0.500)");
  expect(divergingColor(-4, 4)).toBe("rgba(31,119,180,1.000)");
  expect(divergingColor(-Infinity, 4)).toBe("rgba(0,0,0,0)"); // a causally masked score
  expect(maxAbs([1, -3, -Infinity, 2])).toBe(3);
  expect(cellWidth(64)).toBe(5);
  expect(cellWidth(1024)).toBe(2);
});

it("renders masked scores as 'masked' and tokens as text", () => {
  const container = document.createElement("div");
  const view = createNeuronView(container);
  const d = 2;
  view.update({
    tokens: ["<b>a</b>", "b"], nHeads: 2, head: 1, query: 0,
    data: { d, query: new Float32Array([1, 2]), keys: new Float32Array(4), products: new Float32Array(4),
      scores: new Float32Array([0.5, -Infinity]), softmax: new Float32Array([1, 0]) },
  });
  const numbers = [...container.querySelectorAll(".attnscope-neuron-number")].map((n) => n.textContent);
  expect(numbers).toEqual(["0.50", "masked", "1.000", "0.000"]);
  expect(container.querySelector("b")).toBeNull();
  expect(container.querySelector(".attnscope-selected").textContent).toBe("<b>a</b>");
});

it("labels the enlarged head with the tokens its pooled rows stand for", async () => {
  const { enlargedScene, pooledRowLabels } = await import("./model_view.js");
  expect(pooledRowLabels(["a", "b", "c", "d"], 2)).toEqual(["a …", "c …"]);
  expect(pooledRowLabels(["a", "b"], 2)).toEqual(["a", "b"]);
  const tokens = Array.from({ length: 6 }, (_, i) => `t${i}`);
  const values = new Float32Array(36).fill(1 / 6);
  const state = { thumbnails: { values, shape: [1, 1, 6, 6] }, nHeads: 1, tokens };
  const scene = enlargedScene(state, thumbnailLines(values, [1, 1, 6, 6], 0, 0), 0);
  const texts = (role) => scene.items.filter((i) => i.role === role).map((i) => i.text);
  expect(texts("token-left")).toEqual(tokens);
  expect(texts("token-right")).toEqual(tokens);
});

it("names on hover the bytes a continuation token holds, in the query and key columns", () => {
  const container = document.createElement("div");
  const view = createNeuronView(container);
  const notes = ["", "", "bytes 97 A5 of “日”, shown on an earlier token"];
  view.update({ tokens: ["a", " 日", "↑"], tokenNotes: notes, nHeads: 1, head: 0, query: 0, data: null, message: "" });
  const titles = (side) => [...container.querySelectorAll(`.attnscope-${side} .attnscope-token-text`)].map((t) => t.title);
  expect(titles("neuron-queries")).toEqual(notes);
  expect(titles("right")).toEqual(notes);
  // Notes that arrive later (same tokens) are still shown.
  view.update({ tokens: ["a", " 日", "↑"], tokenNotes: ["", "", "bytes 97"], nHeads: 1, head: 0, query: 0, data: null, message: "" });
  expect(titles("right")[2]).toBe("bytes 97");
});

it("keeps its rows of numbers from query to query and rewrites them", () => {
  const container = document.createElement("div");
  const view = createNeuronView(container);
  const data = (softmax, scores) => ({ d: 1, query: Float32Array.of(1), keys: Float32Array.of(1, 2), products: Float32Array.of(1, 2),
    scores: Float32Array.from(scores), softmax: Float32Array.from(softmax) });
  const state = { tokens: ["a", "b"], nHeads: 1, head: 0, query: 0, message: "" };
  view.update({ ...state, data: data([0.25, 0.75], [-1, 0.5]) });
  const rows = () => [...container.querySelectorAll(".attnscope-neuron-number")];
  const before = rows();
  view.update({ ...state, query: 1, data: data([1, 0], [2, -Infinity]) });
  expect(rows()).toEqual(before); // the same elements
  expect(rows().map((n) => n.textContent)).toEqual(["2.00", "masked", "1.000", "0.000"]);
  expect(container.querySelector(".attnscope-softmax-bar").style.width).toBe("60px");
  view.update({ tokens: ["a", "b", "c"], nHeads: 1, head: 0, query: 0, message: "", data: data([0.2, 0.3, 0.5], [0, 0, 1]) });
  expect(rows()).toHaveLength(6);
});

// Past the softmax (issue 47): numbers as neuron_maths.js gives them, for 2 keys of d = 2.
it("draws v, α·v with the head's output in the query's row, ‖f(x)‖ and α‖f(x)‖ after the softmax", async () => {
  const { neuronMaths } = await import("../drawing/neuron_maths.js");
  const { neuronScene } = await import("./neuron_view.js");
  const inputs = { query: [1, 0], keys: [2, 0, 0, 1], d: 2, queryIndex: 0, scaling: 1, values: [1, -1, 0.5, 2], norms: [3, 0.5] };
  const data = { d: 2, ...inputs, query: Float32Array.from(inputs.query), keys: Float32Array.from(inputs.keys),
    values: Float32Array.from(inputs.values), norms: Float32Array.from(inputs.norms), ...neuronMaths(inputs) };
  const container = document.createElement("div");
  const view = createNeuronView(container);
  view.update({ tokens: ["a", "b"], nHeads: 1, head: 0, query: 0, message: "", data });
  const titles = [...container.querySelectorAll(".attnscope-neuron-title")].map((t) => t.textContent);
  expect(titles).toEqual(expect.arrayContaining(["v (values)", "α·v", "‖f(x)‖", "α‖f(x)‖", "o = Σ α·v →"]));
  const column = (name) => [...container.querySelectorAll(`.attnscope-neuron-${name} .attnscope-neuron-number`)].map((n) => n.textContent);
  const [a0, a1] = data.softmax;
  expect(column("norms")).toEqual(["3.00", "0.50"]);
  expect(column("weighted-norms")).toEqual([(3 * a0).toFixed(3), (0.5 * a1).toFixed(3)]);
  expect(container.querySelector("canvas.attnscope-neuron-weighted").dataset.rows).toBe("2");
  const output = container.querySelector("canvas.attnscope-neuron-output");
  expect(output.title).toBe(`o = Σ_j α_j v_j: ${(a0 + 0.5 * a1).toFixed(3)}, ${(-a0 + 2 * a1).toFixed(3)}`);
  expect(container.querySelector(".attnscope-neuron-past").hidden).toBe(false);
  // The image has the same columns and the row of o under α·v.
  const scene = neuronScene({ tokens: ["a", "b"], head: 0, query: 0, data });
  const texts = (role) => scene.items.filter((i) => i.role === role).map((i) => i.text);
  expect(texts("column-title")).toEqual(["q, k (d = 2)", "q × k", "q·k / √d", "softmax α", "v (values)", "α·v",
    "‖f(x)‖", "α‖f(x)‖"]);
  expect(texts("norms")).toEqual(["3.00", "0.50"]);
  expect(texts("output-label")).toEqual(["o = Σ α·v →"]);
  const rasters = scene.items.filter((i) => i.type === "raster");
  expect(rasters).toHaveLength(6); // q, k, q × k, v, α·v, o
  expect(rasters[4].y - rasters[5].y).toBe(20); // o in q's row, above α·v's first key row
  expect(rasters[5].y).toBe(rasters[0].y);
  // Without values (cross-attention): the view stops at the softmax.
  const before = { ...data, values: null, weighted: null, output: null, norms: null, weightedNorms: null };
  view.update({ tokens: ["a", "b"], nHeads: 1, head: 0, query: 0, message: "", data: before });
  expect(container.querySelector(".attnscope-neuron-norms")).toBeNull();
  expect(container.querySelector(".attnscope-neuron-past").hidden).toBe(true);
});
