// @vitest-environment node
// Keys in pictures (legend.js): every entry there, with its colour, inside the picture and clear
// of its neighbours, however many entries and however narrow the picture.
import { expect, it } from "vitest";
import { categoryColor, categoryLegend, HEATMAP_CELL, heatmapScene } from "../views/head_map_view.js";
import { headScene } from "../views/head_view.js";
import { keyLayout } from "./legend.js";
import { textWidth } from "./svg.js";

const ROLES = ["none", "positional", "rare words", "syntactic: nsubj", "syntactic: obj", "syntactic: dobj", "syntactic: amod",
  "syntactic: advmod"];

/** Each text of `role` in the scene with the box it takes (by the layout's own width estimate). */
const boxes = (scene, role) => scene.items.filter((i) => i.type === role.type && i.role === role.name)
  .map((i) => (i.type === "text" ? { text: i.text, x0: i.x, x1: i.x + textWidth(i.text, i.size), y0: i.y - i.size / 2, y1: i.y + i.size / 2 }
    : { fill: i.fill, x0: i.x, x1: i.x + i.width, y0: i.y, y1: i.y + i.height }));
const overlap = (a, b) => a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;

function expectApart(entries, scene) {
  for (const [i, a] of entries.entries()) {
    expect(a.x0 >= 0 && a.x1 <= scene.width && a.y0 >= 0 && a.y1 <= scene.height, JSON.stringify(a)).toBe(true);
    for (const b of entries.slice(i + 1)) expect(overlap(a, b), `${JSON.stringify(a)} and ${JSON.stringify(b)}`).toBe(false);
  }
}

it.each([[12, 6], [2, 2]])("a categorical map of %i heads keys every category present, wrapped to the map", (nHeads, nLayers) => {
  const values = Float32Array.from({ length: nLayers * nHeads }, (_, i) => (i === 1 ? NaN : i % ROLES.length));
  const roles = { key: "role", label: "Role", categories: ROLES, values };
  const scene = heatmapScene({ nLayers, nHeads }, roles, 1, { title: "" });
  const names = boxes(scene, { type: "text", name: "legend" });
  const swatches = boxes(scene, { type: "rect", name: "legend-swatch" });
  const present = ROLES.filter((_, i) => values.includes(i));
  expect(names.map((n) => n.text)).toEqual(present);
  // Each name's swatch just left of it, in the colour of that category's cells.
  const cells = scene.items.filter((i) => i.type === "rect" && i.width === HEATMAP_CELL - 1);
  names.forEach((name, k) => {
    const swatch = swatches[k];
    expect(name.x0 - swatch.x1).toBeGreaterThan(0);
    expect(name.x0 - swatch.x1).toBeLessThan(8);
    expect(Math.abs((swatch.y0 + swatch.y1) / 2 - (name.y0 + name.y1) / 2)).toBeLessThan(1);
    const index = ROLES.indexOf(name.text);
    expect(swatch.fill).toBe(categoryColor(index));
    expect(cells.filter((_, c) => values[c] === index).every((c) => c.fill === swatch.fill)).toBe(true);
  });
  expectApart([...names, ...swatches], scene);
  // The key wraps rather than widening the picture (scaled down to fit an output, it would shrink every label).
  const mapWidth = 64 + nHeads * HEATMAP_CELL + 8;
  const widest = Math.max(...present.map((name) => 14 + textWidth(name, 11)));
  expect(scene.width).toBe(Math.max(mapWidth, 154, 12 + widest));
  expect(new Set(names.map((n) => n.y0)).size).toBeGreaterThan(1);
  // The screen's key and the picture's come from one description.
  expect(categoryLegend(roles)).toEqual(names.map((n, k) => [n.text, swatches[k].fill]));
});

it("lays a key out in rows no wider than asked, an entry wider than that alone on its row", () => {
  const key = ROLES.map((name, i) => [name, categoryColor(i)]);
  for (const width of [40, 150, 300, 2000]) {
    const { entries, rows } = keyLayout(key, width);
    expect(entries.map((e) => e.name)).toEqual(ROLES);
    for (const e of entries) {
      const right = e.x + 14 + textWidth(e.name, 11);
      expect(right <= width || e.x === 0, `${e.name} at ${width}`).toBe(true);
    }
    expect(rows).toBe(new Set(entries.map((e) => e.row)).size);
  }
  expect(keyLayout(key, 2000).rows).toBe(1);
  expect(keyLayout(key, 40).rows).toBe(ROLES.length);
});

it("a head view picture of 32 heads shows every head's swatch inside it, above the tokens", () => {
  const tokens = ["[CLS]", "a", "b", "[SEP]"];
  const n = tokens.length;
  const scene = headScene({ tokens, attention: { values: new Float32Array(32 * n * n).fill(1 / n), shape: [32, n, n] },
    visibleHeads: Array.from({ length: 32 }, (_, h) => h), sentenceFilter: "all", sentenceBStart: null }, { title: "t" });
  const swatches = boxes(scene, { type: "rect", name: "swatch" });
  expect(swatches).toHaveLength(32);
  expectApart(swatches, scene);
  const firstToken = Math.min(...boxes(scene, { type: "text", name: "token-left" }).map((t) => t.y0));
  expect(Math.max(...swatches.map((s) => s.y1))).toBeLessThan(firstToken);
});
