// @vitest-environment jsdom
import { describe, expect, it } from "vitest";
import { createLineTiles, strokeBand, strokeGroups, tilesBetween, TILE_HEIGHT } from "./line_tiles.js";

describe("tilesBetween", () => {
  it("gives the tiles a band meets, within the plot", () => {
    expect(tilesBetween(0, 1, 1000, 256)).toEqual([0, 1]);
    expect(tilesBetween(255, 257, 1000, 256)).toEqual([0, 2]);
    expect(tilesBetween(-500, 5000, 1000, 256)).toEqual([0, 4]); // 1000 px: 4 tiles, the last short
    expect(tilesBetween(2000, 3000, 1000, 256)).toEqual([4, 4]); // past the end: none
  });
});

describe("strokeBand", () => {
  const ends = ({ from, to }) => [0, from, 100, to];
  const lines = [{ from: 10, to: 20, weight: 1 }, { from: 300, to: 0, weight: 0.5 }, { from: 600, to: 700, weight: 1 }];
  const groups = strokeGroups(lines, () => "#000", ends);
  // A context that notes each line's start (in the band's own px) and each stroke's opacity.
  const recorded = (top, bottom, pad) => {
    const starts = [];
    const strokes = [];
    const ctx = { moveTo: (_x, y) => starts.push(y + top), lineTo() {}, beginPath() {},
      stroke() { strokes.push(ctx.globalAlpha); } };
    strokeBand(ctx, groups, top, bottom, 1, pad);
    return { starts: starts.sort((a, b) => a - b), strokes };
  };

  it("strokes lines with a part in the band, whichever end is higher, a stroke per group", () => {
    expect(recorded(0, 256, 0).starts).toEqual([10, 300]);
    expect(recorded(0, 256, 0).strokes).toEqual([1, 0.5]);
    expect(recorded(256, 512, 0)).toEqual({ starts: [300], strokes: [0.5] });
    expect(recorded(512, 768, 0)).toEqual({ starts: [600], strokes: [1] });
    expect(recorded(768, 1024, 0)).toEqual({ starts: [], strokes: [] });
  });

  it("counts the line's width as slack at the band's edges", () => {
    expect(recorded(21, 100, 0).starts).toEqual([300]);
    expect(recorded(21, 100, 2).starts).toEqual([10, 300]);
  });
});

describe("createLineTiles", () => {
  it("sizes the plot and draws the top tiles while there is no layout", () => {
    const track = document.createElement("div");
    document.body.appendChild(track);
    const tiles = createLineTiles(track, { width: 100 });
    tiles.show({ lines: [], colorOf: () => "#000", ends: () => [0, 0, 0, 0], lineWidth: 1, height: 20 * 500 });
    expect(track.style.height).toBe("10000px");
    const drawn = tiles.current();
    expect(drawn[0]).toBe(0);
    expect(drawn.length).toBeGreaterThan(0);
    expect(drawn.length * TILE_HEIGHT).toBeLessThan(10000); // not the whole plot
    expect(track.querySelectorAll("canvas.attnscope-lines-tile")).toHaveLength(drawn.length);
    tiles.show({ lines: [], colorOf: () => "#000", ends: () => [0, 0, 0, 0], lineWidth: 1, height: 100 });
    expect(tiles.current()).toEqual([0]); // one short tile; the others dropped
    expect(track.querySelectorAll("canvas")).toHaveLength(1);
    tiles.destroy();
  });

  it("draws new lines where the plot shows, under a body that hides its overflow and has no height", () => {
    // JupyterLab 4.6: <body class="jp-ThemedContainer" style="overflow: hidden">, 0 px tall, the
    // notebook positioned inside. The plot is on screen: a new layer's lines must be drawn.
    const rect = (top, bottom) => () => ({ top, bottom, height: bottom - top, left: 0, right: 100, width: 100 });
    const scroller = document.createElement("div");
    scroller.style.overflowY = "auto";
    scroller.getBoundingClientRect = rect(0, 900);
    const track = document.createElement("div");
    track.getBoundingClientRect = rect(300, 800);
    scroller.appendChild(track);
    document.body.appendChild(scroller);
    document.body.style.overflow = "hidden";
    const bodyRect = document.body.getBoundingClientRect;
    document.body.getBoundingClientRect = rect(0, 0);
    try {
      const tiles = createLineTiles(track, { width: 100 });
      const show = () => tiles.show({ lines: [], colorOf: () => "#000", ends: () => [0, 0, 0, 0], lineWidth: 1, height: 500 });
      show();
      expect(tiles.current()).toEqual([0, 1]);
      show(); // another layer
      expect(tiles.current()).toEqual([0, 1]);
      tiles.destroy();
    } finally {
      document.body.getBoundingClientRect = bodyRect;
      document.body.style.overflow = "";
      scroller.remove();
    }
  });

  it("draws what scrolls into view inside a shadow root (marimo)", async () => {
    const rect = (top, bottom) => () => ({ top, bottom, height: bottom - top, left: 0, right: 100, width: 100 });
    const host = document.body.appendChild(document.createElement("div"));
    const scroller = document.createElement("div");
    scroller.style.overflowY = "auto";
    scroller.getBoundingClientRect = rect(0, 300);
    host.attachShadow({ mode: "open" }).appendChild(scroller);
    const track = scroller.appendChild(document.createElement("div"));
    let trackTop = 0;
    track.getBoundingClientRect = () => rect(trackTop, trackTop + 5000)();
    const tiles = createLineTiles(track, { width: 100 });
    tiles.show({ lines: [], colorOf: () => "#000", ends: () => [0, 0, 0, 0], lineWidth: 1, height: 5000 });
    expect(tiles.current()[0]).toBe(0);
    trackTop = -3000; // scrolled down by 3000 px
    scroller.dispatchEvent(new Event("scroll")); // neither bubbling nor composed, as browsers send it
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(tiles.current()).toContain(Math.floor(3000 / TILE_HEIGHT));
    tiles.destroy();
    host.remove();
  });
});
