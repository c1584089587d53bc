import { expect, it } from "vitest";
import { headColors } from "./colors.js";

it("gives every one of BERT's 12 heads its own colour", () => {
  const colors = headColors(12);
  expect(colors).toHaveLength(12);
  expect(new Set(colors).size).toBe(12);
});

it("stays distinct for models with many heads", () => {
  for (const n of [16, 32, 40]) expect(new Set(headColors(n)).size).toBe(n);
});
