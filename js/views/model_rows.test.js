// @vitest-environment jsdom
// A generation's model view of the selected output token (issue 48 item 3): every cell draws that
// token's row (token_rows), its lines starting where the token sits, one scale when weighed by value
// norm, the caption saying what is drawn; a prompt token keeps the whole run's thumbnails.
import { describe, expect, it } from "vitest";
import { sceneToSvg } from "../drawing/scene.js";
import { CELL, modelScene, thumbnailEnds, thumbnailLineCache } from "./model_view.js";
import { VIEWS } from "./views.js";

const PAD = 8; // model_view.js: a cell's margin
const tokens = ["<s>", " The", " capital", " is", " Paris", "."];
// Token 4's row, one layer × 2 heads over 6 tokens: head 0 on token 1, head 1 on tokens 0 and 4.
const rowValues = () => Float32Array.from([0, 0.9, 0, 0, 0.1, 0, /**/ 0.5, 0, 0, 0, 0.5, 0]);
const rows = (values = rowValues()) => ({ token: 4, n_tokens: 6, layers: [0], heads: [0, 1], shape: [1, 2, 1, 6], values,
  result_id: 3, weigh_by: "attention" });

describe("the model view's scene of one token's row", () => {
  it("starts every line at the token's place on the left edge and ends it at its key's on the right", () => {
    const state = { thumbnails: { values: rowValues(), shape: [1, 2, 1, 6] }, layers: [0], heads: [0, 1], nHeads: 2, tokens,
      row: { token: 4, caption: "Token 4 “ Paris” (step 2 of 3): its row in every layer and head." } };
    const scene = modelScene(state, thumbnailLineCache(state), { title: "t" });
    const pitch = (CELL - 2 * PAD) / 6;
    const [left, top] = [64, 48];
    const segments = scene.items.filter((i) => i.type === "lines").flatMap((i) => i.groups.flatMap((g) => g.segments));
    expect(segments).toHaveLength(4); // head 0: 0.9 and 0.1 (≥ 10% of its largest); head 1: 0.5 and 0.5
    for (const [, y0] of segments) expect(y0).toBeCloseTo(top + PAD + 4.5 * pitch); // every cell: from token 4
    const ends = segments.map(([x0, , x1, y1]) => [Math.round(x0 - left), Math.round(x1 - left), Math.round((y1 - top - PAD) / pitch - 0.5) + 0]);
    expect(ends).toEqual([[PAD, CELL - PAD, 1], [PAD, CELL - PAD, 4], [CELL + PAD, 2 * CELL - PAD, 0], [CELL + PAD, 2 * CELL - PAD, 4]]);
    expect(sceneToSvg(scene)).toContain("M72 107L140 73"); // the SVG draws the same lines
    const said = scene.items.filter((i) => i.role === "scale").map((i) => i.text).join(" ");
    expect(said).toMatch(/^Token 4 “ Paris” \(step 2 of 3\): its row in every layer and head\. Line opacity/);
    // One geometry: a thumbnail's row 4 of 6 starts where the token's row does.
    const asThumbnail = thumbnailEnds([6, 6], 0, 0, CELL, CELL)({ from: 4, to: 1 });
    expect(thumbnailEnds([1, 6], 0, 0, CELL, CELL, { token: 4 })({ from: 0, to: 1 })).toEqual(asThumbnail);
  });
});

describe("the model view of a generation's selected token", () => {
  const model = VIEWS.find((v) => v.name === "model");
  function open(traits) {
    const all = { long_context: true, tokens, output_start: 3, focus_token: 4, thumbnails: {}, n_heads: 2, include_layers: null,
      include_heads: null, result_id: 3, weigh_by: "attention", masked_heads: [], ...traits };
    const get = (name) => all[name];
    const body = document.createElement("div");
    const view = model.create(body, { setTraits: () => {}, redraw: () => {} }, get);
    return { all, get, body, view };
  }

  it("asks for the token's rows and draws them in every cell, saying so", () => {
    const { get, body, view, all } = open();
    const asked = [];
    let answer = null;
    const long = { tokenRows: (p) => { asked.push(p); return answer; }, thumbnails: () => { throw new Error("not the pooled run"); } };
    expect(model.draw(view, { get, long, width: 600 })).toBe("computing the selected token's rows…");
    expect(asked[0]).toEqual({ result_id: 3, weigh_by: "attention", token: 4, layers: null, heads: null });
    answer = rows();
    expect(model.draw(view, { get, long, width: 600 })).toBe("");
    const canvas = body.querySelector("canvas.attnscope-thumbnails");
    expect(canvas.dataset.row).toBe("4");
    expect(canvas.dataset.cells).toBe("2");
    expect(canvas.dataset.lineCount).toBe("4");
    const note = body.querySelector(".attnscope-scale-note").textContent;
    expect(note).toContain("Token 4 “ Paris” (step 2 of 3): its row in every layer and head.");
    expect(note).toContain("each weight ÷ its head's largest");
    // Another output token: its own rows.
    all.focus_token = 5;
    answer = { ...rows(Float32Array.from([0, 0, 0, 0, 0, 1, /**/ 1, 0, 0, 0, 0, 0])), token: 5 };
    model.draw(view, { get, long, width: 600 });
    expect(canvas.dataset.row).toBe("5");
    expect(canvas.dataset.lineCount).toBe("2");
    expect(body.querySelector(".attnscope-scale-note").textContent).toContain("Token 5 “.” (step 3 of 3)");
  });

  it("weighed by value norm, draws every cell on one scale and says its largest", () => {
    const { get, body, view } = open({ weigh_by: "value_norm" });
    // ‖αf(x)‖: head 1 passes four times head 0's most.
    const values = Float32Array.from([0, 0.5, 0, 0, 0.04, 0, /**/ 2, 0, 0, 0, 0.1, 0]);
    const long = { tokenRows: () => ({ ...rows(values), weigh_by: "value_norm" }) };
    model.draw(view, { get, long, width: 600 });
    const note = body.querySelector(".attnscope-scale-note").textContent;
    expect(note).toContain("one scale for every layer and head: strongest line = 2.000");
    expect(note).toContain("the largest ‖αf(x)‖ (layer 0, head 1)"); // where the strongest is
    // Head 0's 0.04 is 2% of the one scale: under the faintest drawn; its 0.5 and head 1's 2 and 0.1 are drawn.
    expect(body.querySelector("canvas.attnscope-thumbnails").dataset.lineCount).toBe("3");
  });

  it("keeps the whole run's thumbnails for a prompt token, and shows why there are no rows", () => {
    const { get, view } = open({ focus_token: 2 });
    const long = { tokenRows: () => { throw new Error("a prompt token has no step"); }, thumbnails: () => null };
    expect(model.draw(view, { get, long, width: 600 })).toBe("loading thumbnails…");
    const saved = open();
    const error = "Token 4 (step 2): steps after 1 of 3 are not kept. This saved page keeps …";
    expect(model.draw(saved.view, { get: saved.get, long: { tokenRows: () => ({ error }) }, width: 600 })).toBe(error);
  });
});
