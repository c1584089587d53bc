import { describe, expect, it } from "vitest";
import { savedAnswer, stepAnswer } from "./saved.js";

// float16 bits of a few exact halves: 0.5, 0.25, 0.125, 0.0625.
const HALF = { 0.5: 0x3800, 0.25: 0x3400, 0.125: 0x3000, 0.0625: 0x2c00 };
const part = (dtype, values) => {
  const view = new DataView(new ArrayBuffer(values.length * 2)); // uint16 keys or float16 weights
  values.forEach((v, i) => { view.setUint16(2 * i, dtype === "float16" ? HALF[v] : v, true); });
  return { data: view, dtype, shape: [values.length] };
};

// A generation of 6 tokens, the model's from token 3 (steps 1–3), the first 2 kept; one layer,
// 2 heads keeping 2 keys each, the mean 1.
const steps = {
  first: 3, steps: 3, kept: 2, layers: [0], n_tokens: 6, n_heads: 2, head_keys: 2, mean_keys: 1,
  heads: { // layer × head × step × key
    keys: part("uint16", [0, 3, /**/ 1, 4, /**/ 2, 0, /**/ 4, 3]),
    weights: part("float16", [0.5, 0.25, /**/ 0.5, 0.125, /**/ 0.25, 0.125, /**/ 0.5, 0.0625]),
    share: part("float16", [0.5, 0.5, 0.25, 0.5]),
  },
  mean: { keys: part("uint16", [0, 1]), weights: part("float16", [0.5, 0.25]), share: part("float16", [0.5, 0.25]) },
  window_starts: [0, 0], window_tokens: 128,
};
const state = { result_id: 7, weigh_by: "attention", layer: 0, direction: "from", focus_token: 5 };
const row = (answer) => Array.from(new Float32Array(answer.buffers[0].buffer));

describe("a generation's kept steps on a saved page", () => {
  it("rebuilds a kept step's row from its largest weights, the others 0, and says what it kept", () => {
    const answer = stepAnswer(steps, { type: "attention_rows", layer: 0, head: 1, token: 4, direction: "from" }, state);
    expect(row(answer)).toEqual([0, 0, 0, 0.0625, 0.5, 0]);
    expect(answer.content).toMatchObject({ layer: 0, head: 1, token: 4, n_tokens: 6, shape: [6], dtype: "float32", result_id: 7,
      weigh_by: "attention" });
    expect(answer.content.note).toBe("This saved page keeps this row's 2 largest weights (50% of its weight); the others show as 0.");
    const mean = stepAnswer(steps, { type: "attention_rows", layer: 0, head: -1, token: 3, direction: "from" }, state);
    expect(row(mean)).toEqual([0.5, 0, 0, 0, 0, 0]);
  });

  it("fills the head view's window with the kept rows in it: the prompt's rows stay empty", () => {
    const answer = stepAnswer(steps, { type: "attention_window", layer: 0, token: 3 }, state);
    expect(answer.content.rows).toEqual([0, 6]);
    expect(answer.content.shape).toEqual([2, 6, 6]);
    const values = row(answer);
    const at = (h, q) => values.slice((h * 6 + q) * 6, (h * 6 + q + 1) * 6);
    expect(at(0, 3)).toEqual([0.5, 0, 0, 0.25, 0, 0]);
    expect(at(1, 4)).toEqual([0, 0, 0, 0.0625, 0.5, 0]);
    for (const q of [0, 1, 2, 5]) expect(at(0, q).every((v) => v === 0)).toBe(true); // the prompt, and step 3 (not kept)
    expect(answer.content.note).toMatch(/lines from the prompt's tokens are not drawn/);
  });

  it("says why for a prompt token, a step past the kept ones and a layer not kept; leaves columns and tiles to the page", () => {
    const ask = (token, layer = 0) => stepAnswer(steps, { type: "attention_rows", layer, head: 0, token, direction: "from" }, state);
    expect(ask(1).error).toMatch(/^Token 1 is in the prompt\. This saved page keeps the rows of steps 1–2 \(tokens 3–4\): its row needs the live widget/);
    expect(ask(5).error).toMatch(/^Token 5 \(step 3\): steps after 2 of 3 are not kept\./);
    expect(ask(3, 1).error).toMatch(/^Layer 1 is not in this saved page/);
    expect(stepAnswer(steps, { type: "attention_rows", layer: 0, head: 0, token: 3, direction: "to" }, state)).toBeNull();
    expect(savedAnswer({ answers: [], steps }, { type: "attention_tile", layer: 0 }, state).error).toMatch(/Zooming in/);
    // What the page holds whole (the opening token's exact row) comes first.
    const whole = { type: "attention_rows", request: { layer: 0, head: 0, token: 4, direction: "from" }, content: { n_tokens: 6 }, buffer: "B" };
    expect(savedAnswer({ answers: [whole], steps }, { type: "attention_rows", layer: 0, head: 0, token: 4, direction: "from" }, state))
      .toEqual({ content: { n_tokens: 6, result_id: 7 }, buffers: ["B"] });
  });

  it("answers the model view's token_rows from a kept step: every kept layer × head, the others 0", () => {
    const answer = savedAnswer({ answers: [], steps }, { type: "token_rows", token: 3, layers: null, heads: null }, state);
    expect(answer.content).toMatchObject({ token: 3, layers: [0], heads: [0, 1], n_tokens: 6, shape: [1, 2, 1, 6], dtype: "float32",
      result_id: 7, weigh_by: "attention" });
    expect(row(answer)).toEqual([0.5, 0, 0, 0.25, 0, 0, /**/ 0.125, 0, 0.25, 0, 0, 0]);
    expect(answer.content.note).toBe("This saved page keeps each head's 2 largest weights of the row (at least 25% of its weight); the others show as 0.");
    const one = stepAnswer(steps, { type: "token_rows", token: 4, layers: [0], heads: [1] }, state);
    expect(one.content.shape).toEqual([1, 1, 1, 6]);
    expect(row(one)).toEqual([0, 0, 0, 0.0625, 0.5, 0]);
    expect(stepAnswer(steps, { type: "token_rows", token: 5, layers: null, heads: null }, state).error)
      .toMatch(/^Token 5 \(step 3\): steps after 2 of 3 are not kept\./);
  });
});
