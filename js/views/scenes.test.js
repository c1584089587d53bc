// @vitest-environment node
// The views' scene functions are pure: plain data in, plain data out, no DOM (this file runs
// without one), so what the screen and the images show can be checked here.
import { expect, it } from "vitest";
import { heatmapScene } from "./head_map_view.js";
import { scatterScene } from "./head_scatter_view.js";
import { matrixCell, matrixScene } from "./matrix_view.js";
import { gridCellAt, gridSceneLabels } from "../drawing/grid.js";
import { headScene } from "./head_view.js";
import { CELL, modelScene, thumbnailLines } from "./model_view.js";
import { neuronScene } from "./neuron_view.js";
import { createScene } from "../drawing/scene.js";

const tokens = ["[CLS]", "the", "<b>cat</b>", "[SEP]"];
const n = tokens.length;
const texts = (scene, role) => scene.items.filter((item) => item.type === "text" && item.role === role);
const uniform = (length) => new Float32Array(length).fill(1 / n);

function everyScene() {
  const d = 3;
  const thumbnails = { shape: [2, 2, n, n], values: uniform(4 * n * n) };
  const lineCache = [0, 1].map((row) => [0, 1].map((col) => thumbnailLines(thumbnails.values, thumbnails.shape, row, col)));
  const measure = { key: "sep", label: "Attention to [SEP]", values: Float32Array.from([0.1, NaN, 0.3, 0.4]) };
  return {
    head: headScene({ tokens, attention: { values: uniform(2 * n * n), shape: [2, n, n] }, visibleHeads: [0, 1], sentenceFilter: "all", sentenceBStart: null }, { title: "t" }),
    neuron: neuronScene({ tokens, head: 0, query: 1, data: {
      d, query: Float32Array.from([1, -1, 0]), keys: uniform(n * d), products: uniform(n * d), scores: Float32Array.from([1, 2, -Infinity, 0]), softmax: uniform(n),
    } }, { title: "t" }),
    model: modelScene({ thumbnails, layers: [0, 1], heads: [0, 1], nHeads: 2, masked: [[1, 0]] }, lineCache, { title: "t" }),
    heatmap: heatmapScene({ nLayers: 2, nHeads: 2 }, measure, 0.4, { title: "t" }),
    scatter: scatterScene({ nLayers: 2, nHeads: 2, points: Float32Array.from([0, 0, 1, 0, 0, 1, 1, 1]), behaviours: null }, "layer", { title: "t" }),
    matrix: matrixScene({ tokens, values: uniform(n * n), shape: [1, n, n] }, 0, { title: "t" }),
  };
}

it("lays out every view without a DOM, as plain JSON data", () => {
  expect(typeof document).toBe("undefined");
  for (const [view, scene] of Object.entries(everyScene())) {
    // Plain data: numbers, strings and (a raster's pixels) typed arrays; no nodes, no functions.
    const data = { ...scene, items: scene.items.map((item) => (item.rgba ? { ...item, rgba: Array.from(item.rgba) } : item)) };
    expect(JSON.parse(JSON.stringify(data)), view).toEqual(data);
    for (const item of scene.items) if (item.type === "raster") expect(item.rgba.length, view).toBe(item.cols * item.rows * 4);
    expect(scene.width, view).toBeGreaterThan(0);
    expect(scene.height, view).toBeGreaterThan(0);
    for (const item of scene.items) {
      if (item.type !== "text") continue;
      expect(item.x >= 0 && item.x <= scene.width && item.y >= 0 && item.y <= scene.height, `${view}: ${item.text}`).toBe(true);
    }
  }
});

it("keeps token text as data in the scene, for the sinks to escape", () => {
  const { head, neuron, matrix } = everyScene();
  expect(texts(head, "token-left").map((t) => t.text)).toEqual(tokens);
  expect(texts(neuron, "key-token").map((t) => t.text)).toEqual(tokens);
  expect(texts(matrix, "row-label").map((t) => t.text)).toEqual(tokens);
});

it("finds every grid cell back from any point inside it, and nothing outside", () => {
  const cell = 28;
  for (let row = 0; row < 3; row++) {
    for (let col = 0; col < 4; col++) {
      for (const [dx, dy] of [[0, 0], [cell / 2, cell / 2], [cell - 0.01, cell - 0.01]]) {
        expect(gridCellAt(col * cell + dx, row * cell + dy, cell, 3, 4)).toEqual({ row, col });
      }
    }
  }
  for (const [x, y] of [[-0.01, 0], [0, -0.01], [4 * cell, 0], [0, 3 * cell]]) expect(gridCellAt(x, y, cell, 3, 4)).toBeNull();
});

it("puts the grid's labels on the rows and columns that hit-testing finds there", () => {
  const [left, top, cell] = [64, 48, CELL];
  const s = createScene(400, 400);
  gridSceneLabels(s, { left, top, cell, columnTexts: ["Head 0", "Head 1", "Head 2"], rowTexts: ["Layer 0", "Layer 1"] });
  texts(s.scene, "row-label").forEach((label, row) => { expect(gridCellAt(0, label.y - top, cell, 2, 3)?.row).toBe(row); });
  texts(s.scene, "col-label").forEach((label, col) => { expect(gridCellAt(label.x - left, 0, cell, 2, 3)?.col).toBe(col); });
});

it("draws the model view's lines and masks inside their grid cells", () => {
  const { model } = everyScene();
  const [left, top] = [64, 48];
  const cellOf = (x, y) => gridCellAt(x - left, y - top, CELL, 2, 2);
  const lines = model.items.filter((item) => item.type === "lines");
  expect(lines).toHaveLength(4); // one per layer × head, row by row
  lines.forEach((item, i) => {
    for (const [x0, y0, x1, y1] of item.groups.flatMap((g) => g.segments)) {
      const want = { row: Math.floor(i / 2), col: i % 2 };
      expect(cellOf(x0, y0)).toEqual(want);
      expect(cellOf(x1, y1)).toEqual(want);
    }
  });
  const [mask] = model.items.filter((item) => item.type === "rect" && item.role === "masked");
  expect(cellOf(mask.x + 1, mask.y + 1)).toEqual({ row: 1, col: 0 });
  expect(texts(model, "row-label").map((t) => t.text)).toEqual(["Layer 0", "Layer 1"]);
});

it("labels the matrix's rows and columns at its cells' centres", () => {
  const { matrix } = everyScene();
  const cell = matrixCell(n);
  // The cells are one raster, a pixel a cell, spread over n cells a side.
  const [cells] = matrix.items.filter((item) => item.type === "raster");
  expect([cells.cols, cells.rows, cells.width, cells.height]).toEqual([n, n, n * cell, n * cell]);
  texts(matrix, "row-label").forEach((label, row) => { expect(label.y).toBe(cells.y + (row + 0.5) * cell); });
  texts(matrix, "col-label").forEach((label, col) => { expect(label.x).toBe(cells.x + (col + 0.5) * cell); });
  // On screen (labels: false) the same cells, at the canvas's origin.
  const screen = matrixScene({ tokens, values: uniform(n * n), shape: [1, n, n] }, 0, { labels: false });
  expect(screen.items.map((item) => item.type)).toEqual(["raster"]);
  expect([screen.items[0].x, screen.items[0].y, screen.width]).toEqual([0, 0, n * cell]);
});

it("shows the scatter's legend beside its points, on screen and in images alike (one scene)", () => {
  const { scatter } = everyScene();
  expect(texts(scatter, "legend").map((t) => t.text)).toEqual(["Layer 0", "Layer 1"]);
  expect(scatter.items.filter((item) => item.type === "circle")).toHaveLength(4 + 2);
  const screen = scatterScene({ nLayers: 2, nHeads: 2, points: Float32Array.from([0, 0, 1, 0, 0, 1, 1, 1]), behaviours: null }, "layer", { labels: false });
  // The screen's scene is the image's without its title row: the same items, 24 px higher.
  const lifted = scatter.items.filter((item) => item.role !== "title").map((item) => (item.type === "circle" ? { ...item, cy: item.cy - 24 } : { ...item, y: item.y - 24 }));
  expect(screen.items).toEqual(lifted);
  expect(texts(screen, "title")).toHaveLength(0);
});

it("marks a head far out with an arrow on the plot's edge, and says so in the legend", () => {
  const points = Float32Array.from([...Array.from({ length: 40 }, (_, i) => [i % 8, Math.floor(i / 8)]).flat(), 3, 40]);
  const behaviours = [...Array(40).fill("other"), "previous token"];
  const scene = scatterScene({ nLayers: 41, nHeads: 1, points, behaviours, width: 700 }, "behaviour", { title: "t" });
  expect(texts(scene, "legend").map((t) => t.text)).toEqual(["previous token", "other", "far out: drawn on the edge"]);
  const far = scene.items.filter((item) => item.type === "circle" && item.role === "point").at(-1);
  const arrows = scene.items.filter((item) => item.type === "segment");
  expect(arrows).toHaveLength(6); // the far head's and the legend's, three strokes each
  expect(arrows[0].y1).toBeGreaterThan(far.cy); // pointing down, where the head lies
  expect(far.cy + 5).toBeLessThanOrEqual(scene.height);
  expect(scene.width).toBeLessThanOrEqual(700);
});

it("heatmap: +∞ fills like the top of the scale, −∞ like the bottom, NaN grey", () => {
  const measure = { key: "raw", label: "Raw", values: Float32Array.from([1, Infinity, 0, -Infinity, NaN, 0.5]) };
  const fills = heatmapScene({ nLayers: 2, nHeads: 3 }, measure, 1, { labels: false }).items.filter((i) => i.type === "rect").map((i) => i.fill);
  expect(fills[1]).toBe(fills[0]);
  expect(fills[3]).toBe(fills[2]);
  expect(fills[4]).toBe("#bbb");
  expect(new Set(fills).size).toBe(4);
});
