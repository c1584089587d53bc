// @vitest-environment jsdom
import { expect, it, vi } from "vitest";
import { categoryColor, cellAt, createHeadMapView, HEATMAP_CELL, heatmapBar, heatmapImage, heatmapScene, isSigned } from "./head_map_view.js";
import { axisExtent, BEHAVIOUR_COLORS, createHeadScatterView, nearestPoint, scatterLayout } from "./head_scatter_view.js";
import { createMatrixView, matrixImage } from "./matrix_view.js";
import { BEHAVIOURS } from "../transport/contract.js";
import { createModelView } from "./model_view.js";
import { textWidth } from "../drawing/svg.js";

HTMLCanvasElement.prototype.getContext = () => null;

const move = (target, x, y, type = "mousemove") => target.dispatchEvent(new MouseEvent(type, { clientX: x, clientY: y, bubbles: true }));

// 2 layers × 3 heads.
const measures = [
  { key: "sep", label: "Attention to [SEP]", values: Float32Array.from([0.1, 0.2, 0.3, 0.4, 0.5, NaN]) },
  { key: "cls", label: "Attention to [CLS]", values: Float32Array.from([0.9, 0.8, 0.7, 0.6, 0.5, 0.4]) },
];

it("finds the cell under the pointer, including the last one, and nothing outside", () => {
  expect(cellAt(0, 0, 28, 2, 3)).toEqual({ layer: 0, head: 0 });
  expect(cellAt(83, 55, 28, 2, 3)).toEqual({ layer: 1, head: 2 });
  expect(cellAt(84, 10, 28, 2, 3)).toBeNull();
  expect(cellAt(10, 56, 28, 2, 3)).toBeNull();
  expect(cellAt(-1, 10, 28, 2, 3)).toBeNull();
});

it("heatmap: a measure of categories (heads' roles) colours each head by its category and names them", () => {
  const roles = { key: "role", label: "Role", categories: ["none", "positional", "rare words", "syntactic: nsubj"],
    values: Float32Array.from([1, 0, 0, 3, 0, NaN]) };
  const container = document.createElement("div");
  const view = createHeadMapView(container, {});
  view.update({ nLayers: 2, nHeads: 3, measures: [roles], measure: "role" });
  // The legend names the categories present (not "rare words"), each with its colour.
  const items = [...container.querySelectorAll(".attnscope-legend-item")];
  expect(items.map((item) => item.textContent)).toEqual(["none", "positional", "syntactic: nsubj"]);
  expect(items[1].querySelector(".attnscope-category").style.background).toBe(hexToRgb(categoryColor(1)));
  const canvas = container.querySelector("canvas.attnscope-headmap");
  move(canvas, 3, 3);
  expect(container.querySelector(".attnscope-tooltip").textContent).toBe("0-0 · Role: positional");
  move(canvas, 3, HEATMAP_CELL + 3);
  expect(container.querySelector(".attnscope-tooltip").textContent).toBe("1-0 · Role: syntactic: nsubj");
  // The picture: each cell in its category's colour, NaN grey, the legend's names, no "0 to" range.
  const scene = heatmapScene({ nLayers: 2, nHeads: 3 }, roles, 3, { title: "m" });
  const cells = scene.items.filter((item) => item.type === "rect" && item.width === HEATMAP_CELL - 1).map((item) => item.fill);
  expect(cells).toEqual([categoryColor(1), categoryColor(0), categoryColor(0), categoryColor(3), categoryColor(0), "#bbb"]);
  const texts = scene.items.filter((item) => item.type === "text").map((item) => item.text);
  expect(texts).toContain("m · Role");
  expect(texts).toEqual(expect.arrayContaining(["none", "positional", "syntactic: nsubj"]));
  expect(texts).not.toContain("rare words");
});

const hexToRgb = (hex) => `rgb(${[1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)).join(", ")})`;

it("heatmap: lists the measures, switches between them, shows values and opens heads", () => {
  const container = document.createElement("div");
  const onOpenHead = vi.fn();
  const onMeasure = vi.fn();
  const view = createHeadMapView(container, { onOpenHead, onMeasure });
  view.update({ nLayers: 2, nHeads: 3, measures, measure: "sep" });
  const select = container.querySelector("select.attnscope-measure");
  const canvas = container.querySelector("canvas.attnscope-headmap");
  expect([...select.options].map((o) => o.textContent)).toEqual(["Attention to [SEP]", "Attention to [CLS]"]);
  expect(canvas.dataset.cells).toBe("6");
  expect(canvas.dataset.measure).toBe("sep");
  expect([...container.querySelectorAll(".attnscope-headmap-rows span")].map((s) => s.textContent)).toEqual(["Layer 0", "Layer 1"]);

  move(canvas, HEATMAP_CELL * 2 + 3, HEATMAP_CELL + 3); // layer 1, head 2: NaN
  const tooltip = container.querySelector(".attnscope-tooltip");
  expect(tooltip.hidden).toBe(false);
  expect(tooltip.textContent).toBe("1-2 · Attention to [SEP]: n/a");
  move(canvas, HEATMAP_CELL + 3, 3);
  expect(tooltip.textContent).toBe("0-1 · Attention to [SEP]: 0.200");

  select.value = "cls";
  select.dispatchEvent(new Event("change"));
  expect(canvas.dataset.measure).toBe("cls");
  move(canvas, HEATMAP_CELL + 3, 3);
  expect(tooltip.textContent).toBe("0-1 · Attention to [CLS]: 0.800");
  // The reader's choice goes to the widget (analysis_choice), which draws it from then on; a
  // measure the kernel names (show_analysis, a write from Python) is shown as it comes.
  expect(onMeasure.mock.calls).toEqual([["cls"]]);
  view.update({ nLayers: 2, nHeads: 3, measures: [...measures], measure: "cls" });
  expect(canvas.dataset.measure).toBe("cls");
  expect(select.value).toBe("cls");
  view.update({ nLayers: 2, nHeads: 3, measures: [...measures], measure: "sep" });
  expect([canvas.dataset.measure, select.value]).toEqual(["sep", "sep"]);
  view.update({ nLayers: 2, nHeads: 3, measures: [...measures], measure: "gone" }); // not one of its measures: the first
  expect(canvas.dataset.measure).toBe("sep");
  expect(onMeasure).toHaveBeenCalledTimes(1); // what the kernel sends is not written back

  move(canvas, 3, HEATMAP_CELL + 3, "click");
  expect(onOpenHead).toHaveBeenCalledWith(1, 0);
  move(canvas, 0, 0, "mouseleave");
  expect(tooltip.hidden).toBe(true);
});

it("fits points into the canvas and survives identical points", () => {
  const fitted = scatterLayout(Float32Array.from([0, 0, 10, 0, 0, 5]), 400, 400, 10);
  expect(Math.min(...fitted.xy)).toBeGreaterThanOrEqual(10);
  expect(Math.max(...fitted.xy)).toBeLessThanOrEqual(390);
  expect(fitted.xy[2] - fitted.xy[0]).toBeCloseTo(380); // the widest span fills the padded width
  // Sized to the points' extent: about half as tall as wide, not a square with an empty half.
  expect([fitted.width, fitted.height]).toEqual([400, 210]);
  expect(fitted.xy[5] - fitted.xy[1]).toBeCloseTo(190); // one scale on both axes
  const same = scatterLayout(Float32Array.from([3, 3, 3, 3]), 100, 100, 10);
  expect([...same.xy]).toEqual([50, 50, 50, 50]);
  expect(nearestPoint(52, 50, Float32Array.from([10, 10, 50, 50]), 8)).toBe(1);
  expect(nearestPoint(70, 70, Float32Array.from([10, 10, 50, 50]), 8)).toBe(-1);
});

it("leaves a head alone far out of the plot's extent and draws it on the edge, not a cluster", () => {
  // 40 heads in a 10 × 10 square; one far below it (as MiniLM's only previous-token head).
  const grid = Array.from({ length: 40 }, (_, i) => [i % 8 * (10 / 7), Math.floor(i / 8) * 2.5]).flat();
  expect(axisExtent([...grid.filter((_, i) => i % 2), 40])).toEqual([0, 10]);
  expect(axisExtent([...grid.filter((_, i) => i % 2), 40, 40.5])).toEqual([0, 40.5]); // two together: a cluster
  expect(axisExtent([0, 1, 2, 40])).toEqual([0, 40]); // too few to call any far out
  const layout = scatterLayout(Float32Array.from([...grid, 5, 40]), 400, 400, 16);
  expect(layout.far).toBe(1);
  expect([layout.width, layout.height]).toEqual([400, 400]); // the square of the 40, not 4 × taller than wide
  expect([...layout.off.slice(80)]).toEqual([0, 1]); // the far head lies below
  expect(layout.xy[81]).toBeCloseTo(400 - 16); // on the bottom edge
  expect([...layout.off.slice(0, 80)].every((d) => d === 0)).toBe(true);
});

it("scatter: colours by behaviour or layer, with the legend in its one scene; hovers and opens a head", () => {
  const container = document.createElement("div");
  const onOpenHead = vi.fn();
  const onColor = vi.fn();
  const view = createHeadScatterView(container, { onOpenHead, onColor });
  // 1 layer × 2 heads, far apart; thumbnails 1 × 2 × 2 × 2.
  const thumbnails = { values: new Float32Array(8).fill(0.5), shape: [1, 2, 2, 2] };
  view.update({ nLayers: 1, nHeads: 2, points: Float32Array.from([0, 0, 1, 0]), behaviours: ["[SEP]", "broad"], colorBy: "behaviour", thumbnails });
  const canvas = container.querySelector("canvas.attnscope-scatter");
  expect(canvas.dataset.points).toBe("2");
  expect(canvas.dataset.colorBy).toBe("behaviour");
  const legend = (scene) => scene.items.filter((i) => i.role === "legend" && i.type === "text").map((i) => i.text);
  expect(legend(view.scene())).toEqual(["broad", "[SEP]"]);
  // Ringed: layer 0's dark purple vanished on the dark theme, and yellow is faint on white.
  expect(view.scene().items.filter((i) => i.type === "circle").every((i) => i.stroke === "#8c8c8c")).toBe(true);
  expect(canvas.getAttribute("aria-label")).toMatch(/colours: broad, \[SEP\]$/);
  const screen = canvas.dataset.positions.split(",").map(Number);
  expect(screen).toHaveLength(4);
  move(canvas, screen[2] + 1, screen[3]);
  expect(container.querySelector(".attnscope-tooltip").textContent).toBe("0-1 · broad");
  expect(container.querySelector(".attnscope-tooltip-map").hidden).toBe(false);
  move(canvas, screen[0], screen[1] + 2, "click");
  expect(onOpenHead).toHaveBeenCalledWith(0, 0);
  const select = container.querySelector("select.attnscope-color-by");
  select.value = "layer";
  select.dispatchEvent(new Event("change"));
  expect(canvas.dataset.colorBy).toBe("layer");
  expect(legend(view.scene())).toEqual(["Layer 0"]);
  // The choice is the widget's (analysis_choice.color): written out, and drawn as the widget sends it back.
  expect(onColor.mock.calls).toEqual([["layer"]]);
  const points = Float32Array.from([0, 0, 1, 0]);
  view.update({ nLayers: 1, nHeads: 2, points, behaviours: ["[SEP]", "broad"], colorBy: "layer", thumbnails });
  expect([canvas.dataset.colorBy, select.value]).toEqual(["layer", "layer"]);
  view.update({ nLayers: 1, nHeads: 2, points, behaviours: ["[SEP]", "broad"], colorBy: "behaviour", thumbnails });
  expect(canvas.dataset.colorBy).toBe("behaviour");
  expect(onColor).toHaveBeenCalledTimes(1);
});

it("the scatter's picture colours as the widget's analysis_choice says", async () => {
  const { adapter } = await import("./analysis_view.js");
  const analysis = { kind: "head_distances", layout: "scatter", n_layers: 1, n_heads: 2, note: "", measures: [],
    points: [0, 0, 1, 0], behaviours: ["[SEP]", "broad"] };
  const legendOf = (choice) => adapter.picture({ get: (name) => ({ analysis, analysis_choice: choice, thumbnails: {} })[name],
    decoded: () => null, width: 400 }, {}).items.filter((i) => i.role === "legend" && i.type === "text").map((i) => i.text);
  expect(legendOf({ color: "layer" })).toEqual(["Layer 0"]);
  expect(legendOf({})).toEqual(["broad", "[SEP]"]);
});

it("matrix: token labels are text, never HTML; the layer chosen is the widget's", () => {
  const container = document.createElement("div");
  const onChoice = vi.fn();
  const view = createMatrixView(container, { onChoice });
  const tokens = ["[CLS]", "<img src=x onerror=alert(1)>", "[SEP]"];
  const values = new Float32Array(2 * 9).map((_, i) => (i % 4 === 0 ? 1 : 0.1));
  view.update({ title: "Rollout", tokens, values, shape: [2, 3, 3] }); // no choice: the last layer
  const canvas = container.querySelector("canvas.attnscope-matrix");
  expect(canvas.dataset.n).toBe("3");
  expect(canvas.dataset.layer).toBe("1");
  expect(container.querySelector("img")).toBeNull();
  expect([...container.querySelectorAll(".attnscope-matrix-left span")].map((s) => s.textContent)).toEqual(tokens);
  move(canvas, 28 + 2, 2); // row 0 ([CLS]) → column 1
  expect(container.querySelector(".attnscope-tooltip").textContent).toBe("“[CLS]” (row) ← “<img src=x onerror=alert(1)>” (column): 0.100");
  // A continuation token's hover card and label name the character whose bytes it holds.
  view.update({ title: "Rollout", tokens: ["[CLS]", "日", "↑"], notes: ["", "", "bytes 97 of “日”"], values, shape: [2, 3, 3] });
  move(canvas, 2 * 28 + 2, 2);
  expect(container.querySelector(".attnscope-tooltip").textContent).toBe("“[CLS]” (row) ← “↑” (bytes 97 of “日”) (column): 0.100");
  expect(container.querySelectorAll(".attnscope-matrix-left span")[2].title).toBe("bytes 97 of “日”");
  const select = container.querySelector("select.attnscope-matrix-layer");
  select.value = "0";
  select.dispatchEvent(new Event("change"));
  expect(canvas.dataset.layer).toBe("0"); // drawn at once
  expect(onChoice.mock.calls).toEqual([[{ layer: 0, leave_out_special: true, rows_to_1: false }]]);
  // The widget sends it back (rollout_choice) with each new run: drawn, and its picture too.
  const chosen = { title: "Rollout", tokens, values: values.slice(), shape: [2, 3, 3], choice: { layer: 0 }, layerLabel: (i) => `through ${i + 1}` };
  view.update(chosen);
  expect(canvas.dataset.layer).toBe("0");
  expect([...select.options].map((o) => o.textContent)).toEqual(["through 1", "through 2"]);
  expect(select.value).toBe("0");
  const captionOf = (scene) => scene.items.filter((i) => i.role === "subtitle").map((i) => i.text).join(" ");
  expect(captionOf(matrixImage(chosen, { title: "m" }))).toMatch(/^through 1/);
  // A layer the run does not have (another part's) falls back to the last, on screen and in pictures.
  view.update({ ...chosen, choice: { layer: 7 } });
  expect(canvas.dataset.layer).toBe("1");
  expect(captionOf(matrixImage({ ...chosen, choice: { layer: 7 } }, { title: "m" }))).toMatch(/^through 2/);
  expect(onChoice).toHaveBeenCalledTimes(1); // what the widget sends is not written back
});

it("model view: masked heads are counted, and clicks toggle masks in mask mode", () => {
  const container = document.createElement("div");
  const onOpenHead = vi.fn();
  const onToggleMask = vi.fn();
  const view = createModelView(container, { onOpenHead, onToggleMask });
  const thumbnails = { shape: [1, 2, 2, 2], values: new Float32Array(8).fill(0.5) };
  view.update({ thumbnails, layers: [0], heads: [0, 1], nHeads: 2, masked: [[0, 1]], maskMode: false });
  const canvas = container.querySelector("canvas");
  expect(canvas.dataset.masked).toBe("1");
  move(canvas, 84 + 5, 5, "click");
  expect(onOpenHead).toHaveBeenCalledWith(0, 1);
  view.update({ thumbnails, layers: [0], heads: [0, 1], nHeads: 2, masked: [], maskMode: true });
  expect(canvas.dataset.masked).toBe("0");
  move(canvas, 5, 5, "click");
  expect(onToggleMask).toHaveBeenCalledWith(0, 0);
  expect(onOpenHead).toHaveBeenCalledTimes(1);
});

it("every drawable view exports SVG with its text escaped and its lines counted", async () => {
  const { createHeadView } = await import("./head_view.js");
  const container = document.createElement("div");
  const view = createHeadView(container, {});
  const tokens = ["[CLS]", "<b>&</b>", "[SEP]"];
  const values = new Float32Array([0.5, 0.5, 0, 0, 1, 0, 0.2, 0.3, 0.5]);
  view.update({ tokens, sentenceBStart: null, attention: { values, shape: [1, 3, 3] }, visibleHeads: [0], sentenceFilter: "all" });
  const svg = view.toSvg({ title: "model · layer 1" });
  expect(svg.startsWith("<svg")).toBe(true);
  expect(svg).toContain("&lt;b&gt;&amp;&lt;/b&gt;");
  expect(svg).not.toContain("<b>");
  const doc = new DOMParser().parseFromString(svg, "image/svg+xml");
  const drawn = [...doc.querySelectorAll("path")].reduce((n, p) => n + Number(p.getAttribute("data-lines")), 0);
  expect(drawn).toBe(view.lastLines().length); // the same lines as on screen
  expect(drawn).toBe(6);
  view.destroy(); // its line tiles are drawn on timers

  const heatmap = createHeadMapView(document.createElement("div"), {});
  heatmap.update({ nLayers: 2, nHeads: 3, measures, measure: "sep" });
  const heat = new DOMParser().parseFromString(heatmap.toSvg({ title: "m" }), "image/svg+xml");
  expect(heat.querySelectorAll("rect:not(.legend-bar)").length).toBe(1 + 6); // background + one per head
  // The colour bar goes with the figure: its label and its ends in numbers.
  expect(heat.querySelectorAll("rect.legend-bar").length).toBeGreaterThan(8);
  expect([...heat.querySelectorAll("text.legend-tick")].map((t) => t.textContent)).toEqual(["0.00", "0.50"]);
  expect(heat.querySelector("text").textContent).toBe("m · Attention to [SEP] (0 to 0.50)");

  const modelView = createModelView(document.createElement("div"), {});
  const thumbnails = { shape: [1, 2, 2, 2], values: new Float32Array(8).fill(0.5) };
  modelView.update({ thumbnails, layers: [0], heads: [0, 1], nHeads: 2, masked: [[0, 1]] });
  const grid = new DOMParser().parseFromString(modelView.toSvg(), "image/svg+xml");
  expect(grid.querySelectorAll("rect.masked").length).toBe(1);
  expect([...grid.querySelectorAll("text")].map((t) => t.textContent)).toContain("Head 1");
});

it("rollout without [CLS]/[SEP]: their rows and columns go, and rows can be rescaled to 1", async () => {
  const { matrixShown } = await import("./matrix_view.js");
  const state = { tokens: ["[CLS]", "a", "b", "[SEP]"], shape: [1, 4, 4], special: [0, 3],
    values: Float32Array.from([1, 0, 0, 0, 0.5, 0.25, 0.05, 0.2, 0.6, 0.1, 0.1, 0.2, 0, 0, 0, 1]) };
  expect(matrixShown(state)).toMatchObject({ tokens: state.tokens, shape: [1, 4, 4] });
  const dropped = matrixShown(state, { dropSpecial: true });
  expect(dropped.tokens).toEqual(["a", "b"]);
  expect([...dropped.values].map((v) => +v.toFixed(3))).toEqual([0.25, 0.05, 0.1, 0.1]);
  // A token's note (the bytes of a split character) follows it when specials are left out.
  expect(matrixShown({ ...state, notes: ["", "", "bytes 97 of “日”", ""] }, { dropSpecial: true }).notes).toEqual(["", "bytes 97 of “日”"]);
  const normed = matrixShown(state, { dropSpecial: true, rowNorm: true });
  expect([...normed.values].map((v) => +v.toFixed(3))).toEqual([0.833, 0.167, 0.5, 0.5]);
  expect(normed.changes).toEqual(["without [CLS] / [SEP]", "each row to 1"]);
});

it("rollout opens without its special tokens, on screen and in pictures, and says so; its box shows them again", () => {
  const container = document.createElement("div");
  const view = createMatrixView(container);
  const state = { title: "Rollout", tokens: ["<s>", "a", "b", "</s>"], shape: [1, 4, 4], special: [0, 3],
    values: Float32Array.from([1, 0, 0, 0, 0.5, 0.25, 0.05, 0.2, 0.6, 0.1, 0.1, 0.2, 0, 0, 0, 1]) };
  view.update(state);
  const canvas = container.querySelector("canvas.attnscope-matrix");
  const box = container.querySelector("input.attnscope-matrix-drop-special");
  expect(canvas.dataset.n).toBe("2");
  expect(box.checked).toBe(true);
  expect(box.parentElement.textContent).toBe("Leave out <s> / </s>");
  // Under the title, wrapped to the narrow picture: the layer, then what is left out.
  const captionOf = (scene) => scene.items.filter((i) => i.role === "subtitle").map((i) => i.text).join(" ");
  expect(captionOf(view.scene({ title: "m" }))).toBe("Layer 0 · without <s> / </s>");
  const picture = matrixImage(state, { title: "m" });
  expect(picture.items.filter((i) => i.role === "row-label").map((i) => i.text)).toEqual(["a", "b"]);
  expect(captionOf(picture)).toBe("Layer 0 · without <s> / </s>");
  for (const line of picture.items.filter((i) => i.role === "subtitle")) expect(6 + textWidth(line.text, 11)).toBeLessThanOrEqual(picture.width);
  box.checked = false;
  box.dispatchEvent(new Event("change"));
  expect(canvas.dataset.n).toBe("4");
  expect(captionOf(view.scene({ title: "m" }))).toBe("Layer 0");
  // The widget keeps the choice (rollout_choice) and sends it back with a new run: the box, the
  // matrix and the picture follow it.
  const choice = { layer: 0, leave_out_special: false, rows_to_1: false };
  view.update({ ...state, values: state.values.slice(), choice });
  expect([box.checked, canvas.dataset.n]).toEqual([false, "4"]);
  const kept = matrixImage({ ...state, choice }, { title: "m" });
  expect(kept.items.filter((i) => i.role === "row-label").map((i) => i.text)).toEqual(["<s>", "a", "b", "</s>"]);
  expect(captionOf(kept)).toBe("Layer 0");
  expect(captionOf(matrixImage({ ...state, choice: { rows_to_1: true } }, { title: "m" }))).toBe("Layer 0 · without <s> / </s> · each row to 1");
});

it("heatmap: ±∞ is drawn at the end of the scale it lies beyond and said as ∞; NaN is missing", () => {
  const container = document.createElement("div");
  const view = createHeadMapView(container);
  const values = Float32Array.from([0.5, Infinity, -Infinity, NaN]);
  view.update({ nLayers: 2, nHeads: 2, measures: [{ key: "raw", label: "Raw", values, max: 0.5 }], measure: "raw" });
  const canvas = container.querySelector("canvas.attnscope-headmap");
  const tooltip = container.querySelector(".attnscope-tooltip");
  const said = (layer, head) => {
    move(canvas, HEATMAP_CELL * head + 3, HEATMAP_CELL * layer + 3);
    return tooltip.textContent;
  };
  expect([said(0, 0), said(0, 1), said(1, 0), said(1, 1)]).toEqual(["0-0 · Raw: 0.500", "0-1 · Raw: ∞", "1-0 · Raw: −∞", "1-1 · Raw: n/a"]);
});

it("colours every behaviour the kernel names, each its own colour, other grey", () => {
  expect(Object.keys(BEHAVIOUR_COLORS)).toEqual(BEHAVIOURS);
  const colours = BEHAVIOURS.filter((name) => name !== "other").map((name) => BEHAVIOUR_COLORS[name]);
  expect(new Set(colours).size).toBe(colours.length);
  expect(colours).not.toContain(BEHAVIOUR_COLORS.other);
  expect(BEHAVIOUR_COLORS.other).toBe("#9e9e9e");
});

it("heatmap of a layout of its own (value_flow: layers × kinds of token): the columns' names, and no head to open", () => {
  const container = document.createElement("div");
  const onOpenHead = vi.fn();
  const view = createHeadMapView(container, { onOpenHead });
  const columns = [{ label: "1st", name: "[CLS] / first token" }, { label: "SEP", name: "[SEP]" }];
  const alpha = { key: "alpha", label: "Mean α received", values: Float32Array.from([0.5, 0.3, 0.1, 0.2]) };
  view.update({ nLayers: 2, nHeads: 2, measures: [alpha], measure: "alpha", columns });
  expect([...container.querySelectorAll(".attnscope-headmap-columns > *")].map((n) => n.textContent)).toEqual(["1st", "SEP"]);
  const canvas = container.querySelector("canvas.attnscope-headmap");
  move(canvas, HEATMAP_CELL + 3, HEATMAP_CELL + 3);
  expect(container.querySelector(".attnscope-tooltip").textContent).toMatch(/\[SEP\] · Mean α received: 0\.2/);
  canvas.dispatchEvent(new MouseEvent("click", { clientX: 3, clientY: 3, bubbles: true }));
  expect(onOpenHead).not.toHaveBeenCalled();
  const texts = heatmapScene({ nLayers: 2, nHeads: 2, columns }, alpha, 0.5, { title: "m" }).items
    .filter((item) => item.type === "text").map((item) => item.text);
  expect(texts).toEqual(expect.arrayContaining(["1st", "SEP"]));
  expect(texts).not.toContain("0");
});

it("the analysis tab draws the layout its payload names, from the generated table of layouts", async () => {
  const { adapter } = await import("./analysis_view.js");
  const { LAYOUTS } = await import("./layout_modules.js");
  expect(Object.keys(LAYOUTS)).toEqual(expect.arrayContaining(["heatmap", "scatter", "finder"]));
  const payload = { kind: "some_analysis", n_layers: 2, n_heads: 3, note: "A note.", measure: "sep",
    measures: [{ key: "sep", label: "Attention to [SEP]", max: 0.5, values: [0.1, 0.2, 0.3, 0.4, 0.5, null] }] };
  const context = (analysis) => ({ get: (name) => ({ analysis, thumbnails: {}, analysis_choice: {} })[name], decoded: () => null, width: 400 });
  const heatmap = adapter.picture(context({ ...payload, layout: "heatmap" }), { title: "t" });
  expect(heatmap.items.some((item) => item.type === "text" && item.text.includes("Attention to [SEP]"))).toBe(true);
  const scatter = adapter.picture(context({ ...payload, layout: "scatter", measures: [], points: [0, 0, 1, 1, 2, 0, 0, 2, 1, 0, 2, 2],
    behaviours: Array(6).fill("broad") }), {});
  expect(scatter.items.filter((item) => item.type === "circle").length).toBeGreaterThanOrEqual(6);
  // A layout this page was not built with is said, not thrown.
  expect(adapter.picture(context({ ...payload, layout: "bars" }), {})).toMatch(/no bars layout/);
});

it("a heatmap's picture draws the measure the widget's analysis_choice names, else the analysis's own", async () => {
  const { adapter } = await import("./analysis_view.js");
  const payload = { kind: "some_analysis", layout: "heatmap", n_layers: 2, n_heads: 3, note: "", measure: "sep", measures: [
    { key: "sep", label: "Attention to [SEP]", max: 0.5, values: [0.1, 0.2, 0.3, 0.4, 0.5, null] },
    { key: "cls", label: "Attention to [CLS]", max: 0.9, values: [0.9, 0.8, 0.7, 0.6, 0.5, 0.4] }] };
  const titleOf = (choice) => adapter.picture({ get: (name) => ({ analysis: payload, analysis_choice: choice })[name] }, { title: "t" })
    .items.find((item) => item.type === "text").text;
  expect(titleOf({ measure: "cls" })).toBe("t · Attention to [CLS] (0 to 0.90)");
  expect(titleOf({})).toBe("t · Attention to [SEP] (0 to 0.50)");
  expect(titleOf(undefined)).toBe("t · Attention to [SEP] (0 to 0.50)"); // a page saved before the trait
  expect(titleOf({ measure: "gone" })).toBe("t · Attention to [SEP] (0 to 0.50)");
});

it("draws a signed measure's heatmap about 0, blue below and orange above, its bar and title from −max to max", () => {
  const measure = { key: "delta", label: "Loss change when disabled", values: Float32Array.from([0.75, -0.014, -0.005, 0.002]) };
  expect(isSigned(measure)).toBe(true);
  expect(isSigned({ ...measure, values: Float32Array.from([0, 0.3]) })).toBe(false);
  const bar = heatmapBar(measure, 0.75);
  expect(bar.ticks.map((t) => t.text)).toEqual(["-0.75", "0", "0.75"]);
  const scene = heatmapScene({ nLayers: 2, nHeads: 2 }, measure, 0.75, { title: "" });
  const cells = scene.items.filter((i) => i.type === "rect" && !i.role).map((i) => i.fill);
  // -0.014 and 0.002 were one dark purple apiece on viridis from 0: now they part by sign.
  expect(cells[1].startsWith("rgba(31,119,180,")).toBe(true);
  expect(cells[3].startsWith("rgba(255,127,14,")).toBe(true);
  expect(cells[0]).toBe("rgba(255,127,14,1.000)");
  const title = scene.items.find((i) => i.type === "text" && i.role === "title").text;
  expect(title).toContain("(−0.75 to 0.75)");
});

it("scales a signed measure by its largest magnitude, though the kernel's max is its largest value", () => {
  // The kernel writes max = the largest value (0.3): a fall of 0.9 was cut to the bar's end.
  const measure = { key: "delta", label: "Δ log p", values: Float32Array.from([0.3, -0.9, 0, 0.1]), max: 0.3 };
  const title = heatmapImage({ nLayers: 2, nHeads: 2, measures: [measure], measure: "delta" }).items
    .find((i) => i.type === "text" && i.role === "title").text;
  expect(title).toContain("(−0.90 to 0.90)");
});

it("starts a measure's scale at its declared min: pruning steps count from 1, not 0", () => {
  const measure = { key: "step", label: "Removed at step (1 = first)", values: Float32Array.from([1, 2, 3, 72]), integer: true, min: 1, max: 72 };
  expect(heatmapBar(measure, 72).ticks.map((t) => t.text)[0]).toBe("1");
  const scene = heatmapImage({ nLayers: 2, nHeads: 2, measures: [measure], measure: "step" });
  expect(scene.items.find((i) => i.type === "text" && i.role === "title").text).toContain("(1 to 72)");
  const cells = scene.items.filter((i) => i.type === "rect" && i.width === HEATMAP_CELL - 1).map((i) => i.fill);
  // The first head removed is the scale's first colour, the last its last.
  const ends = heatmapScene({ nLayers: 1, nHeads: 2 }, { ...measure, values: Float32Array.from([0, 72]), min: 0 }, 72, { title: "" })
    .items.filter((i) => i.type === "rect" && i.width === HEATMAP_CELL - 1).map((i) => i.fill);
  expect(cells[0]).toBe(ends[0]);
  expect(cells[3]).toBe(ends[1]);
});

it("greys only a category named none: the patterns' first class, heterogeneous, has a colour of its own", () => {
  const patterns = ["heterogeneous", "vertical", "diagonal", "vertical + diagonal", "block"];
  const colours = patterns.map((_, i) => categoryColor(i, patterns));
  expect(new Set(colours).size).toBe(patterns.length);
  expect(colours).not.toContain("#e4e4e4");
  expect(categoryColor(0, ["none", "positional"])).toBe("#e4e4e4");
  const measure = { key: "pattern", label: "Pattern", categories: patterns, values: Float32Array.from([0, 1, 4, 0]) };
  const cells = heatmapScene({ nLayers: 2, nHeads: 2 }, measure, 4, { title: "" }).items
    .filter((item) => item.type === "rect" && item.width === HEATMAP_CELL - 1).map((item) => item.fill);
  expect(cells).toEqual([colours[0], colours[1], colours[4], colours[0]]);
});
