import { expect, it } from "vitest";
import { neuronMaths } from "./neuron_maths.js";

// q = [1, 0]; keys k0 = [2, 0], k1 = [0, 5], k2 = [1, 1]; values one-hot rows.
const base = { query: [1, 0], keys: [2, 0, 0, 5, 1, 1], d: 2, queryIndex: 1, scaling: 1,
  values: [1, 0, 0, 1, 3, 3], norms: [2, 4, 6] };

it("computes the scores, their softmax, α·v, the head's output and α‖f‖", () => {
  const r = neuronMaths(base);
  expect([...r.products]).toEqual([2, 0, 0, 0, 1, 0]);
  expect([...r.scores]).toEqual([2, 0, 1]);
  const e = [Math.exp(2), 1, Math.exp(1)];
  const total = e[0] + e[1] + e[2];
  r.softmax.forEach((a, j) => { expect(a).toBeCloseTo(e[j] / total, 12); });
  expect([...r.weighted]).toEqual([r.softmax[0], 0, 0, r.softmax[1], 3 * r.softmax[2], 3 * r.softmax[2]]);
  expect(r.output[0]).toBeCloseTo(r.softmax[0] + 3 * r.softmax[2], 12);
  expect(r.output[1]).toBeCloseTo(r.softmax[1] + 3 * r.softmax[2], 12);
  expect([...r.weightedNorms]).toEqual([2 * r.softmax[0], 4 * r.softmax[1], 6 * r.softmax[2]]);
  expect(r.sinkShare).toBe(0);
});

it("masks later keys when causal and adds a position bias", () => {
  const r = neuronMaths({ ...base, causal: true, bias: [0, 1, 0] });
  expect([...r.scores]).toEqual([2, 1, -Infinity]);
  expect(r.softmax[2]).toBe(0);
  expect(r.weighted[4]).toBe(0);
  expect(r.softmax[0] + r.softmax[1]).toBeCloseTo(1, 12);
});

it("keeps a sink's share out of the row: it sums to less than 1, never renormalised", () => {
  const r = neuronMaths({ ...base, sink: 2 });
  const e = [Math.exp(2), 1, Math.exp(1), Math.exp(2)];
  const total = e.reduce((a, b) => a + b);
  expect(r.sinkShare).toBeCloseTo(e[3] / total, 12);
  expect(r.softmax.reduce((a, b) => a + b)).toBeCloseTo(1 - e[3] / total, 12);
  expect(r.output[0]).toBeCloseTo(r.softmax[0] + 3 * r.softmax[2], 12);
});

it("stops at the softmax where no values were captured (cross-attention)", () => {
  const r = neuronMaths({ ...base, values: null, norms: null });
  expect(r.weighted).toBeNull();
  expect(r.output).toBeNull();
  expect(r.weightedNorms).toBeNull();
  expect(r.softmax).toHaveLength(3);
});
