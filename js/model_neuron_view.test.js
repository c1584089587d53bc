// @vitest-environment jsdom
import { expect, it, vi } from "vitest";
import { createModelView, thumbnailLines } from "./model_view.js";
import { cellWidth, createNeuronView, divergingColor, maxAbs } from "./neuron_view.js";

HTMLCanvasElement.prototype.getContext = () => null;

// 1 layer × 2 heads of 2 × 2 thumbnails.
const thumbnails = { shape: [1, 2, 2, 2], values: new Float32Array([0.9, 0.1, 0.0, 1.0, 0.5, 0.5, 0.01, 0.99]) };

it("lists a thumbnail's lines above the threshold", () => {
  expect(thumbnailLines(thumbnails.values, thumbnails.shape, 0, 0)).toEqual([
    { from: 0, to: 0, weight: expect.closeTo(0.9) }, { from: 0, to: 1, weight: expect.closeTo(0.1) },
    { from: 1, to: 1, weight: 1 },
  ]);
  expect(thumbnailLines(thumbnails.values, thumbnails.shape, 0, 1).map((l) => l.to)).toEqual([0, 1, 1]);
});

it("labels the model view's grid and counts its cells", () => {
  const container = document.createElement("div");
  const view = createModelView(container, { onOpenHead: vi.fn() });
  view.update({ thumbnails, layers: [3], heads: [4, 7], nHeads: 12 });
  expect([...container.querySelectorAll(".attnscope-grid-heads span")].map((s) => s.textContent)).toEqual(["Head 5", "Head 8"]);
  expect(container.querySelector(".attnscope-grid-layers span").textContent).toBe("Layer 4");
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
