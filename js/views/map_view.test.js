// @vitest-environment jsdom
// The map view of a long input (js/map_view.js): zoom and pan, what it asks for, sampling a tile
// into the region shown, colour scales with sinks set aside and clipped, its labels, and on screen
// its theme, its wheel gesture and its hover card. (The other long-input views: long_views.test.js.)
import { describe, expect, it, vi } from "vitest";
import { axisMarks, mapScene, panRegion, regionSamples, regionScale, SETTLE_MS, tileRequest, wholeMap, zoomRegion } from "./map_view.js";

describe("map zoom", () => {
  it("zooms around the pointer and stays inside the map", () => {
    const n = 8192;
    const inside = zoomRegion(wholeMap(n), 0.5, 4096, 1000, n);
    expect(inside.r1 - inside.r0).toBeCloseTo(4096);
    expect(inside.r0).toBeCloseTo(2048); // the pointer's row keeps its place
    expect(inside.c0).toBeCloseTo(500);
    const out = zoomRegion(inside, 10, 4096, 1000, n);
    expect(out).toEqual(wholeMap(n));
    let deep = wholeMap(n);
    for (let i = 0; i < 40; i++) deep = zoomRegion(deep, 0.5, 100, 100, n);
    expect(deep.r1 - deep.r0).toBe(8); // never below 8 tokens a side
    expect(panRegion(deep, -500, 10000, n)).toMatchObject({ r0: 0, c1: n });
  });

  it("asks for whole tokens, the overview at 256 blocks", () => {
    expect(tileRequest(wholeMap(8192), 8192)).toEqual({ rows: [0, 8192], cols: [0, 8192], bins: 256 });
    expect(tileRequest(wholeMap(100), 100)).toEqual({ rows: [0, 100], cols: [0, 100], bins: 100 });
    expect(tileRequest({ r0: 10.5, r1: 40.2, c0: 0, c1: 12 }, 8192)).toEqual({ rows: [10, 41], cols: [0, 12], bins: 256 });
  });
});

describe("map sampling", () => {
  // A 4 × 4 overview of 8 tokens: block (a, b) holds 10·a + b.
  const overview = { rows: [0, 8], cols: [0, 8], shape: [4, 4], values: Float32Array.from({ length: 16 }, (_, i) => 10 * Math.floor(i / 4) + (i % 4)) };

  it("samples the block holding each position of the region", () => {
    const whole = regionSamples(overview, wholeMap(8));
    expect([whole.rows, whole.cols]).toEqual([4, 4]);
    expect(Array.from(whole.values)).toEqual(Array.from(overview.values));
    const zoomed = regionSamples(overview, { r0: 4, r1: 8, c0: 0, c1: 4 });
    expect([zoomed.rows, zoomed.cols]).toEqual([2, 2]);
    expect(Array.from(zoomed.values)).toEqual([20, 21, 30, 31]);
    expect(Array.from(zoomed.colFirst)).toEqual([0, 2]);
  });

  it("sets aside the blocks holding the first tokens, on their own scale", () => {
    const samples = regionSamples(overview, wholeMap(8));
    const plain = regionScale(samples, 0);
    expect(plain.asideMax).toBeLessThan(1e-9);
    const aside = regionScale(samples, 1); // the first block's column holds token 0
    expect(aside.asideMax).toBe(30);
    expect(aside.largest).toBe(33);
  });

  it("clips the colour at the 99.5th percentile and says so in images", () => {
    const values = new Float32Array(400).fill(0.01);
    values[0] = 1; // a first row's weight of 1
    const tile = { rows: [0, 20], cols: [0, 20], shape: [20, 20], values, exact: true };
    const scale = regionScale(regionSamples(tile, wholeMap(20)), 0);
    expect(scale.max).toBeCloseTo(0.01);
    expect(scale.largest).toBe(1);
    const { scene } = mapScene({ tokens: Array.from({ length: 20 }, (_, i) => `t${i}`), n: 20, region: wholeMap(20), tile, aside: 0,
      selected: 3, head: -1, layer: 0, reduce: "max", model: "m" }, 300);
    const texts = scene.items.filter((i) => i.type === "text").map((i) => i.text);
    expect(texts.some((t) => t.includes("99.5th percentile; largest 1.000"))).toBe(true);
    expect(texts.some((t) => t.includes("exact"))).toBe(true);
    // 15 px a token: the tokens label both axes.
    expect(scene.items.filter((i) => i.role === "row-label").map((i) => i.text)).toEqual(Array.from({ length: 20 }, (_, i) => `t${i}`));
    const raster = scene.items.find((i) => i.type === "raster");
    expect([raster.cols, raster.rows, raster.rgba.length]).toEqual([20, 20, 1600]);
    expect(raster.rgba[3]).toBe(255);
    expect(raster.rgba[7]).toBe(255); // 0.01 is at the clip: full colour
  });

  it("writes a long text's small largest weight as the bar's ticks do, not as 0.000", () => {
    const values = new Float32Array(400).fill(1e-4); // 8,000 tokens: each weight about 1/8,000
    values[0] = 3e-4;
    const tile = { rows: [0, 20], cols: [0, 20], shape: [20, 20], values, exact: true };
    const { scene } = mapScene({ tokens: Array.from({ length: 20 }, (_, i) => `t${i}`), n: 20, region: wholeMap(20), tile, aside: 0,
      selected: 3, head: -1, layer: 0, reduce: "max", model: "m" }, 300);
    const legend = scene.items.filter((i) => i.role === "legend").map((i) => i.text).join(" ");
    expect(legend).toContain("largest 3.0e-4");
    expect(legend).not.toContain("0.000");
  });

  it("labels positions, not tokens, while cells are small", () => {
    const marks = axisMarks(0, 8192, 560, []);
    expect(marks.every((m) => !m.token)).toBe(true);
    expect(marks.map((m) => m.text)).toContain("4000");
  });
});

describe("map on screen", () => {
  it("draws its axis labels in the widget's theme", async () => {
    const { createMapView } = await import("./map_view.js");
    const styles = [];
    const ctx = new Proxy({}, {
      get: (target, name) => (name in target ? target[name] : () => {}),
      set: (target, name, value) => { if (name === "fillStyle") styles.push(value); target[name] = value; return true; },
    });
    const original = HTMLCanvasElement.prototype.getContext;
    HTMLCanvasElement.prototype.getContext = () => ctx;
    globalThis.ImageData ??= class { constructor(data, width, height) { Object.assign(this, { data, width, height }); } };
    try {
      const widget = document.createElement("div");
      widget.className = "attnscope-root attnscope-dark";
      const view = createMapView(widget);
      view.region(20);
      const tile = { rows: [0, 20], cols: [0, 20], shape: [20, 20], values: new Float32Array(400).fill(0.05), exact: true };
      view.update({ tokens: Array.from({ length: 20 }, (_, i) => `t${i}`), notes: [], n: 20, tile, aside: 0, selected: 0,
        head: 0, nHeads: 2, nKeyHeads: 2, layer: 0, reduce: "max", model: "m", width: 600, message: "" });
      expect(styles).toContain("#eee");
      expect(styles).not.toContain("#222");
    } finally {
      HTMLCanvasElement.prototype.getContext = original;
    }
  });
});

describe("map zoom on screen", () => {
  it("redraws at each wheel event and asks for one region once the gesture rests", async () => {
    const { createMapView } = await import("./map_view.js");
    const original = HTMLCanvasElement.prototype.getContext;
    HTMLCanvasElement.prototype.getContext = () => null;
    vi.useFakeTimers();
    try {
      let redraws = 0;
      const body = document.createElement("div");
      const view = createMapView(body, { onZoom: () => { redraws++; } });
      const n = 1000;
      view.region(n);
      const canvas = body.querySelector("canvas.attnscope-map");
      expect(view.settled(n)).toEqual(wholeMap(n));
      const wheel = () => canvas.dispatchEvent(new WheelEvent("wheel", { clientX: 300, clientY: 300, deltaY: -100, bubbles: true, cancelable: true }));
      for (let k = 0; k < 5; k++) { wheel(); vi.advanceTimersByTime(30); } // a wheel turned: events 30 ms apart
      expect(redraws).toBe(5);
      expect(view.settled(n)).toEqual(wholeMap(n)); // nothing asked for mid-gesture
      vi.advanceTimersByTime(SETTLE_MS - 30 - 1);
      expect(view.settled(n)).toEqual(wholeMap(n));
      vi.advanceTimersByTime(1);
      expect(view.settled(n)).toEqual(view.region(n));
      expect(view.region(n)).not.toEqual(wholeMap(n));
      expect(redraws).toBe(6); // and a redraw that asks for it
      view.destroy();
    } finally {
      vi.useRealTimers();
      HTMLCanvasElement.prototype.getContext = original;
    }
  });
});

describe("map hover card", () => {
  it("says what is under a still pointer after a wheel zoom, not what was there before", async () => {
    const { createMapView } = await import("./map_view.js");
    const original = HTMLCanvasElement.prototype.getContext;
    HTMLCanvasElement.prototype.getContext = () => null;
    try {
      const body = document.createElement("div");
      let redraws = 0;
      const view = createMapView(body, { onZoom: () => { redraws++; } });
      const n = 1000;
      const tokens = Array.from({ length: n }, (_, i) => `t${i}`);
      // The overview pools 10 × 10 tokens a block; the exact tile, as the kernel answers a zoom.
      const overview = { rows: [0, n], cols: [0, n], shape: [100, 100], values: new Float32Array(100 * 100).fill(0.02), exact: false };
      const exact = { rows: [0, n], cols: [0, n], shape: [n, n], values: new Float32Array(n * n).fill(0.001), exact: true };
      const state = { tokens, notes: [], n, tile: overview, aside: 0, selected: 0, head: 0, nHeads: 2, nKeyHeads: 2, layer: 0,
        reduce: "max", model: "m", width: 600, message: "" };
      view.region(n);
      view.update(state);
      const canvas = body.querySelector("canvas.attnscope-map");
      const card = body.querySelector(".attnscope-tooltip");
      // jsdom lays nothing out: the canvas's client box is at 0, 0, so client px are canvas px.
      const top = Number(canvas.dataset.top); // the room its column labels take
      expect(top).toBeGreaterThan(0);
      const at = { clientX: 96 + 246, clientY: top + 246, bubbles: true }; // the middle of a 492 px map (margin 96 on the left)
      canvas.dispatchEvent(new MouseEvent("pointermove", at));
      expect(card.textContent).toBe("around “t500” (500) → “t500” (500): max of the block 0.0200");
      canvas.dispatchEvent(new WheelEvent("wheel", { ...at, deltaY: -400, cancelable: true }));
      expect(redraws).toBe(1);
      view.update({ ...state, tile: exact }); // the redraw, with the kernel's exact tile
      expect(card.hidden).toBe(false);
      // Token labels may take other room than positions did (the map moves by the difference):
      // the card names what is under the pointer now, as a move to the same place says.
      const still = card.textContent;
      expect(still).toMatch(/^“t\d+” \(\d+\) → “t500” \(500\): 0\.0010$/);
      canvas.dispatchEvent(new MouseEvent("pointermove", at));
      expect(card.textContent).toBe(still);
      const shift = Number(canvas.dataset.top) - top;
      canvas.dispatchEvent(new MouseEvent("pointermove", { ...at, clientY: at.clientY + shift })); // the zoom's own point
      expect(card.textContent).toBe("“t500” (500) → “t500” (500): 0.0010");
      view.destroy();
    } finally {
      HTMLCanvasElement.prototype.getContext = original;
    }
  });
});
