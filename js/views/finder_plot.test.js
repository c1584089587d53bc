import { describe, expect, it } from "vitest";
import cases from "../../tests/data/filter_cases.json";
import { interpolateViridis } from "d3-scale-chromatic";
import { sceneToSvg } from "../drawing/scene.js";
import { textWidth } from "../drawing/svg.js";
import { cellText, compileFilter, finderChoice, finderPlot, finderScene, LISTED } from "./finder_plot.js";

describe("compileFilter", () => {
  // The same cases as tests/analyses/test_head_finder.py: one grammar in both languages.
  const names = ["layer", "head", "sink_rate", "entropy", "prev_token"];

  it("keeps what the kernel's filter keeps", () => {
    for (const [expression, labels] of cases.keeps) {
      const keep = compileFilter(expression, names);
      expect(cases.heads.filter((h) => keep(h)).map((h) => h.label), expression).toEqual(labels);
    }
  });

  it("refuses what the kernel's filter refuses, saying what", () => {
    for (const expression of cases.refused) expect(() => compileFilter(expression, names), expression).toThrow(/The filter/);
    expect(() => compileFilter("weird > 1", names)).toThrow(/no metric: use layer, head/);
  });
});

// Two layers × two heads, three metrics (the view's tests add examples: head_finder_view.test.js).
const state = {
  nLayers: 2, nHeads: 2,
  measures: [
    { key: "entropy", values: Float32Array.from([1, 2, 3, 4]) },
    { key: "sink_rate", values: Float32Array.from([0.9, 0.1, 0.8, 0.2]) },
    { key: "prev_token", values: Float32Array.from([0, 0.5, 0.7, 0.1]) },
  ],
};

// The scene's items of one kind: circles by role, texts' strings.
const circles = (scene, role) => scene.items.filter((item) => item.type === "circle" && item.role === role);
const texts = (scene) => scene.items.filter((item) => item.type === "text").map((item) => item.text);
const defaults = finderChoice(state.measures.map((m) => m.key), {});

describe("finderPlot: the scatter's one scene", () => {
  it("puts each head where its metrics are, larger x right and larger y up, coloured by its colour metric", () => {
    expect(defaults).toEqual({ x: "entropy", y: "sink_rate", color: "prev_token", filter: "", head: null });
    const { scene, xy, kept } = finderPlot(state, defaults, { labels: false });
    expect(kept.size).toBe(4);
    const x = (i) => xy[2 * i];
    const y = (i) => xy[2 * i + 1];
    // entropy 1, 2, 3, 4: evenly across; sink_rate 0.9, 0.1, 0.8, 0.2: 0.9 the highest point.
    expect((x(1) - x(0)) / (x(3) - x(0))).toBeCloseTo(1 / 3, 5);
    expect(y(0)).toBeLessThan(y(2));
    expect(y(2)).toBeLessThan(y(3));
    expect(y(3)).toBeLessThan(y(1));
    expect((y(3) - y(0)) / (y(1) - y(0))).toBeCloseTo(0.7 / 0.8, 5);
    // The circles are drawn where xy says (the screen's clicks read xy), in viridis from 0.2 to 1.
    const points = circles(scene, "point");
    expect(points.map((c) => [c.cx, c.cy])).toEqual([0, 1, 2, 3].map((i) => [x(i), y(i)]));
    expect(points[0].fill).toBe(interpolateViridis(0.2)); // prev_token 0, the smallest
    expect(points[2].fill).toBe(interpolateViridis(1)); // prev_token 0.7, the largest
    expect(circles(scene, "faded")).toEqual([]);
    expect(circles(scene, "selected")).toEqual([]);
    expect(scene.background).toBe(false); // on screen: the page's background shows through
    expect(texts(scene)).not.toContain(""); // no title on screen
  });

  it("names both axes with their ends in numbers and has a colour bar of the colour metric", () => {
    const scene = finderScene({ ...state, choice: { x: "prev_token", y: "entropy", color: "sink_rate" } }, { title: "m" });
    const all = texts(scene);
    expect(all[0]).toBe("m");
    expect(all).toEqual(expect.arrayContaining(["prev_token", "entropy", "colour: sink_rate"]));
    const ticks = scene.items.filter((item) => item.role === "tick").map((item) => item.text);
    expect(ticks).toEqual(["0.00", "0.70", "1.00", "4.00"]); // x's ends, then y's
    expect(scene.items.filter((item) => item.role === "legend-tick").map((item) => item.text)).toEqual(["0.10", "0.90"]);
    expect(scene.items.filter((item) => item.role === "legend-bar").length).toBeGreaterThan(8);
    const yName = scene.items.find((item) => item.text === "entropy");
    expect(yName.rotate).toBe(-90);
    expect(yName.color).toBeNull(); // the theme's text colour, on screen and in images
  });

  it("fades the heads the filter drops, drawn first and smaller, and says so in a picture", () => {
    const choice = { ...defaults, filter: "layer >= 1" };
    const { scene, kept } = finderPlot(state, choice, { title: "m" });
    expect([...kept]).toEqual([2, 3]);
    const [faded, points] = [circles(scene, "faded"), circles(scene, "point")];
    expect([faded.length, points.length]).toEqual([2, 2]);
    expect(faded[0].r).toBeLessThan(points[0].r);
    expect(scene.items.indexOf(faded.at(-1))).toBeLessThan(scene.items.indexOf(points[0])); // kept on top
    expect(texts(scene).join(" ")).toContain("The filter “layer >= 1” keeps 2 of 4 heads; the others are faded.");
    // A filter that does not read keeps every head, and the picture says why.
    const wrong = finderPlot(state, { ...defaults, filter: "nonsense >" }, { title: "m" });
    expect(wrong.kept.size).toBe(4);
    expect(wrong.problem).toMatch(/The filter/);
    expect(circles(wrong.scene, "faded")).toEqual([]);
    expect(texts(wrong.scene).join(" ")).toContain("Every head is drawn.");
  });

  it("rings the chosen head over its point, in the SVG too", () => {
    const { scene, xy } = finderPlot(state, { ...defaults, head: "1-0", filter: "layer < 1" }, { title: "m" });
    const [ring] = circles(scene, "selected");
    expect([ring.cx, ring.cy]).toEqual([xy[4], xy[5]]);
    expect(ring.fill).toBe("none");
    expect(ring.r).toBeGreaterThan(circles(scene, "faded")[0].r);
    expect(scene.items.at(-1)).toBe(ring);
    expect(texts(scene)).toContain("Head 1-0 is ringed.");
    const svg = sceneToSvg(scene);
    expect(svg).toMatch(/<circle [^>]*fill="none" stroke="#d62728" stroke-width="2" class="selected"\/>/);
    expect(finderPlot(state, { ...defaults, head: "7-7" }).scene.items.some((item) => item.role === "selected")).toBe(false);
  });

  it("thins a picture to maxPoints: the dropped heads first, then the kept of the smallest colour values", () => {
    const choice = { ...defaults, filter: "head == 0 or layer == 0" }; // keeps 0-0, 0-1, 1-0
    const { scene } = finderPlot(state, choice, { title: "m", maxPoints: 2 });
    expect(circles(scene, "faded")).toEqual([]);
    const points = circles(scene, "point");
    expect(points.map((c) => c.fill)).toEqual([interpolateViridis(0.2 + 0.8 * (0.5 / 0.7)), interpolateViridis(1)]); // 0-1, 1-0
    expect(texts(scene).join(" ")).toContain("the 2 of the largest prev_token are drawn");
  });
});


// Four layers × six heads spread over the plot, prev_token (the colour) all different: 0-0 the
// smallest, 3-5 the largest.
const spread = {
  nLayers: 4, nHeads: 6,
  measures: [
    { key: "entropy", values: Float32Array.from({ length: 24 }, (_, i) => (i * 7) % 24) },
    { key: "sink_rate", values: Float32Array.from({ length: 24 }, (_, i) => (i * 11) % 24) },
    { key: "prev_token", values: Float32Array.from({ length: 24 }, (_, i) => i / 23) },
  ],
};
const label = (i) => `${Math.floor(i / 6)}-${i % 6}`;
const named = (scene) => scene.items.filter((item) => item.role === "point-name");
const listCells = (scene) => scene.items.filter((item) => item.role === "list-cell");
// A name's box as the layout reckons it (svg.js textWidth), 9 px text centred on its y.
const nameBox = ({ x, y, text, anchor, size }) => {
  const width = textWidth(text, size);
  const left = anchor === "start" ? x : anchor === "end" ? x - width : x - width / 2;
  return { x0: left, x1: left + width, y0: y - size / 2, y1: y + size / 2 };
};
const apart = (a, b) => a.x1 <= b.x0 || b.x1 <= a.x0 || a.y1 <= b.y0 || b.y1 <= a.y0;

describe("finderPlot's image names its points and lists them (issue 45: the picture dropped the table)", () => {
  const choice = finderChoice(["entropy", "sink_rate", "prev_token"], {});

  it("names the kept heads of the largest colour at their points, and lists them with the table's numbers", () => {
    const { scene, xy, listed } = finderPlot(spread, choice, { title: "m" });
    const strongest = Array.from({ length: LISTED }, (_, k) => 23 - k); // prev_token is i / 23
    expect(listed).toEqual(strongest);
    // Each name by its own point: beside it, or with a leader line from the point's edge to the
    // name; inside the plot's box or its margins; over no other name and no other point.
    const names = named(scene);
    expect(names.map((n) => n.text).sort()).toEqual(strongest.map(label).sort());
    const boxes = names.map(nameBox);
    const segments = scene.items.filter((item) => item.type === "segment");
    const [left, bottom] = [segments[0].x0, segments[1].y0];
    names.forEach((name, k) => {
      const i = strongest[strongest.map(label).indexOf(name.text)];
      const [px, py] = [xy[2 * i], xy[2 * i + 1]];
      const box = boxes[k];
      const gap = Math.hypot(Math.max(box.x0 - px, 0, px - box.x1), Math.max(box.y0 - py, 0, py - box.y1));
      const leader = segments.find((seg) => Math.abs(Math.hypot(seg.x0 - px, seg.y0 - py) - 4) < 0.01
        && seg.x1 >= box.x0 - 0.01 && seg.x1 <= box.x1 + 0.01 && seg.y1 >= box.y0 - 1.01 && seg.y1 <= box.y1 + 1.01);
      expect(gap <= 9 || leader !== undefined, `${name.text} is ${gap} px from its point, with no leader`).toBe(true);
      expect(box.x0).toBeGreaterThan(left);
      expect(box.y1).toBeLessThan(bottom);
      boxes.forEach((other, j) => { if (j !== k) expect(apart(box, other), `${name.text} over ${names[j].text}`).toBe(true); });
      for (let j = 0; j < 24; j++) {
        if (j === i) continue;
        const dot = { x0: xy[2 * j] - 4, x1: xy[2 * j] + 4, y0: xy[2 * j + 1] - 4, y1: xy[2 * j + 1] + 4 };
        expect(apart(box, dot), `${name.text} over the point of ${label(j)}`).toBe(true);
      }
    });
    // The list: a row per named head, strongest first, its cells as the screen's table writes them.
    const rows = listCells(scene);
    const byColumn = (x) => rows.filter((cell) => cell.x === x).map((cell) => cell.text);
    const columns = [...new Set(rows.map((cell) => cell.x))];
    expect(columns).toHaveLength(4);
    const heads = strongest.map((i) => ({ label: label(i), entropy: spread.measures[0].values[i],
      sink_rate: spread.measures[1].values[i], prev_token: spread.measures[2].values[i] }));
    expect(byColumn(columns[0])).toEqual(heads.map((h) => h.label));
    ["entropy", "sink_rate", "prev_token"].forEach((key, c) => {
      expect(byColumn(columns[c + 1])).toEqual(heads.map((h) => cellText(h, key)));
    });
    expect(scene.items.filter((item) => item.role === "list-head").map((item) => item.text))
      .toEqual(["head", "entropy", "sink_rate", "prev_token"]);
    // Right of the plot, inside the image; and the image says what it leaves out.
    expect(Math.min(...rows.map((cell) => cell.x))).toBeGreaterThan(left + 300);
    expect(Math.max(...rows.map((cell) => cell.x))).toBeLessThanOrEqual(scene.width);
    expect(texts(scene).join(" ")).toContain(`Named at their points and listed on the right: the ${LISTED} heads of the largest `
      + `prev_token. The other ${24 - LISTED} heads drawn are not named.`);
    const svg = sceneToSvg(scene);
    for (const i of strongest) expect(svg).toContain(`class="point-name">${label(i)}</text>`);
  });

  it("is the screen's plot: the same points, moved down under the image's notes; the screen names none", () => {
    const screen = finderPlot(spread, choice, { labels: false });
    const image = finderPlot(spread, choice, { title: "m" });
    expect(named(screen.scene)).toEqual([]);
    expect(listCells(screen.scene)).toEqual([]);
    expect(screen.listed).toEqual([]);
    const dy = image.xy[1] - screen.xy[1];
    expect(dy).toBeGreaterThan(0);
    for (let i = 0; i < 24; i++) {
      expect(image.xy[2 * i]).toBeCloseTo(screen.xy[2 * i], 4);
      expect(image.xy[2 * i + 1] - screen.xy[2 * i + 1]).toBeCloseTo(dy, 4);
    }
  });

  it("lists the ringed head after the strongest, in the ring's colour, and only the heads the filter keeps", () => {
    const { scene, listed } = finderPlot(spread, { ...choice, head: "0-1", filter: "layer >= 2" }, { title: "m" });
    expect(listed).toEqual([23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 1]); // 2-0 … 3-5, then 0-1 (faded)
    const last = listCells(scene).filter((cell) => cell.text === "0-1");
    expect(last).toHaveLength(1);
    expect(last[0].color).toBe("#d62728");
    expect(named(scene).map((n) => n.text)).toContain("0-1");
    expect(texts(scene).join(" ")).toContain("Named at their points and listed on the right: the 12 kept heads of the largest "
      + "prev_token and the ringed head. The other 11 heads drawn are not named.");
  });

  it("leaves out a name with no room, and says that the list's numbers place it", () => {
    // Every head at one point: a name in each of the places around it at most.
    const piled = { nLayers: 1, nHeads: 12, measures: [
      { key: "entropy", values: new Float32Array(12).fill(1) },
      { key: "sink_rate", values: new Float32Array(12).fill(0.5) },
      { key: "prev_token", values: Float32Array.from({ length: 12 }, (_, i) => i) }] };
    const { scene, listed } = finderPlot(piled, choice, { title: "m" });
    const names = named(scene);
    expect(listed).toHaveLength(12);
    expect(names.length).toBeGreaterThan(0);
    expect(names.length).toBeLessThan(12);
    expect(names[0].text).toBe("0-11"); // the strongest are placed first
    expect(listCells(scene).filter((cell) => cell.x === listCells(scene)[0].x)).toHaveLength(12);
    expect(names.length).toBeLessThanOrEqual(16);
    expect(texts(scene).join(" ")).toContain(`${12 - names.length} of the names had no room: the list's numbers place those heads.`);
  });
});

describe("finderPlot's axes", () => {
  it("start at 0 for a share whose smallest value is near 0, at its smallest otherwise", () => {
    const shares = {
      nLayers: 1, nHeads: 3,
      measures: [
        { key: "prev_token", values: Float32Array.from([4.5e-9, 0.02, 0.97]) },
        { key: "entropy", values: Float32Array.from([2, 2.5, 3]) },
      ],
    };
    const { scene } = finderPlot(shares, finderChoice(["prev_token", "entropy"], { x: "prev_token", y: "entropy" }), { labels: false });
    const ticks = scene.items.filter((item) => item.role === "tick").map((item) => item.text);
    expect(ticks).toEqual(["0.00", "0.97", "2.00", "3.00"]); // not "4.5e-9" at the corner
  });
});
