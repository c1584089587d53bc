// @vitest-environment jsdom
import { expect, it } from "vitest";
import { gridCellAt } from "./grid.js";
import { LINES_WIDTH, ROW_HEIGHT } from "../views/head_lines.js";
import { headScene } from "../views/head_view.js";
import { neuronScene } from "../views/neuron_view.js";
import { createScene, drawScene, sceneToSvg } from "./scene.js";
import { svgSafeText } from "./svg.js";

const texts = (scene, role) => scene.items.filter((item) => item.type === "text" && item.role === role);

it("puts query token j of the neuron view beside key row j, as the screen's table does", () => {
  const tokens = ["[CLS]", "the", "cat", "[SEP]"];
  const d = 4;
  const n = tokens.length;
  const data = {
    d, query: new Float32Array(d).fill(1), keys: new Float32Array(n * d).fill(0.5), products: new Float32Array(n * d).fill(0.5),
    scores: new Float32Array(n).fill(1), softmax: new Float32Array(n).fill(0.25),
  };
  const scene = neuronScene({ tokens, head: 0, query: 2, data });
  const queries = texts(scene, "query-token");
  const keys = texts(scene, "key-token");
  expect(queries.map((t) => t.text)).toEqual(tokens);
  expect(queries.map((t) => t.y)).toEqual(keys.map((t) => t.y)); // was one row off
  expect(keys[1].y - keys[0].y).toBe(ROW_HEIGHT);
  // The key rows of the k matrix start one row (q's) below the matrix's top: rasters of q, k and
  // q × k, a pixel row a screen pixel, each token's row ROW_HEIGHT pixels with a 2 px gap.
  const [q, k] = scene.items.filter((item) => item.type === "raster");
  expect(k.y - q.y).toBe(ROW_HEIGHT);
  expect(k.y + ROW_HEIGHT / 2).toBeCloseTo(keys[0].y, 5);
  expect([k.cols, k.rows, k.height]).toEqual([d, n * ROW_HEIGHT, n * ROW_HEIGHT]);
  const alphaAt = (row, col) => k.rgba[(row * d + col) * 4 + 3];
  expect([alphaAt(0, 0), alphaAt(ROW_HEIGHT - 3, 0), alphaAt(ROW_HEIGHT - 1, 0)]).toEqual([255, 255, 0]);
});

it("ends the head view's lines at the rows of their tokens", () => {
  const tokens = ["a", "b", "c"];
  const values = new Float32Array([0, 1, 0, 0, 0, 1, 1, 0, 0]);
  const scene = headScene({
    tokens, attention: { values, shape: [1, 3, 3] }, visibleHeads: [0], sentenceFilter: "all", sentenceBStart: null,
  });
  const left = texts(scene, "token-left");
  const right = texts(scene, "token-right");
  const [lines] = scene.items.filter((item) => item.type === "lines");
  const segments = lines.groups.flatMap((g) => g.segments);
  expect(segments).toHaveLength(3);
  for (const [x0, y0, x1, y1] of segments) {
    expect(left.some((t) => t.y === y0 && t.x === x0 - 6)).toBe(true);
    expect(right.some((t) => t.y === y1 && t.x === x1 + 6)).toBe(true);
    expect(x1 - x0).toBe(LINES_WIDTH);
  }
});

it("draws a scene as SVG with its texts where the scene puts them, as data", () => {
  const s = createScene(100, 50);
  s.text(10, 20, "<b>x</b>\u0000", { anchor: "end", role: "token-left" });
  s.rect(1, 2, 3, 4, "red", "masked");
  s.lines([{ weight: 1 }, { weight: 0.5 }], () => "blue", () => [0, 0, 10, 10]);
  const doc = new DOMParser().parseFromString(sceneToSvg(s.scene), "image/svg+xml");
  const text = doc.querySelector("text.token-left");
  expect([text.getAttribute("x"), text.getAttribute("y"), text.getAttribute("text-anchor")]).toEqual(["10", "20", "end"]);
  expect(text.textContent).toBe("<b>x</b>\u2400");
  expect(doc.querySelector("b")).toBeNull();
  expect(doc.querySelector("rect.masked").getAttribute("fill")).toBe("red");
  expect([...doc.querySelectorAll("path")].map((p) => p.dataset?.lines ?? p.getAttribute("data-lines"))).toEqual(["1", "1"]);
});

it("stops an SVG at maxBytes, and gives the same SVG where it fits", () => {
  const s = createScene(100, 50);
  for (let i = 0; i < 200; i++) s.rect(i, 2, 3, 4, "red", "token");
  const whole = sceneToSvg(s.scene);
  expect(sceneToSvg(s.scene, { maxBytes: whole.length })).toBe(whole);
  expect(sceneToSvg(s.scene, { maxBytes: whole.length / 2 })).toBeNull();
});

it("finds the grid cell under a point and nothing outside", () => {
  expect(gridCellAt(85, 1, 84, 2, 3)).toEqual({ row: 0, col: 1 });
  expect(gridCellAt(1, 170, 84, 2, 3)).toBeNull();
});

/** A canvas context that records where each text is drawn (drawScene translates to it). */
function recordingContext() {
  const drawn = [];
  let origin = [0, 0];
  const ignore = () => {};
  return {
    drawn,
    save: ignore, beginPath: ignore, moveTo: ignore, lineTo: ignore, stroke: ignore, fill: ignore, arc: ignore, fillRect: ignore, rotate: ignore,
    restore() { origin = [0, 0]; },
    translate(x, y) { origin = [x, y]; },
    fillText(text, x, y) { drawn.push([text, origin[0] + x, origin[1] + y]); },
  };
}

it("draws a view's scene as SVG and on a canvas with the same texts, in order, where the scene puts them", () => {
  const tokens = ["[CLS]", "a\u0000b", "<i>c</i>", "[SEP]"];
  const values = new Float32Array(16).fill(0.25);
  const scene = headScene({
    tokens, attention: { values, shape: [1, 4, 4] }, visibleHeads: [0], sentenceFilter: "all", sentenceBStart: null,
  }, { title: "m · layer 1" });
  const round = (v) => Math.round(v * 10) / 10;
  const want = scene.items.filter((item) => item.type === "text")
    .map((t) => [svgSafeText(t.text), round(t.x), round(t.y), t.anchor, t.role || null]);
  const doc = new DOMParser().parseFromString(sceneToSvg(scene), "image/svg+xml");
  const svg = [...doc.querySelectorAll("text")].map((t) => [
    // The anchor is written where it is not the root's "start" (inherited).
    t.textContent, Number(t.getAttribute("x")), Number(t.getAttribute("y")), t.getAttribute("text-anchor") ?? doc.documentElement.getAttribute("text-anchor"),
    t.getAttribute("class"),
  ]);
  expect(svg).toEqual(want);
  expect(svg.filter(([, , , , role]) => role === "token-right").map(([text]) => text)).toEqual(["[CLS]", "a\u2400b", "<i>c</i>", "[SEP]"]);
  const ctx = recordingContext();
  drawScene(ctx, scene);
  expect(ctx.drawn.map(([text, x, y]) => [text, round(x), round(y)])).toEqual(want.map(([text, x, y]) => [text, x, y]));
});
