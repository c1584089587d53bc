// A generation's output as the page holds it: what its Stop asks the kernel to keep.
import { expect, it } from "vitest";
import { outputShown } from "./output_tokens.js";

const getter = (traits) => (name) => traits[name];

it("counts the new tokens the page shows, which a Stop keeps (none where the run is no generation)", () => {
  expect(outputShown(getter({ tokens: ["a", "b", "c", "d", "e"], output_start: 3 }))).toBe(2);
  expect(outputShown(getter({ tokens: ["a", "b", "c"], output_start: 3 }))).toBe(0); // the prompt alone so far
  expect(outputShown(getter({ tokens: ["a", "b"], output_start: -1 }))).toBe(0); // not a generation
  expect(outputShown(getter({ tokens: ["a"], output_start: 4 }))).toBe(0); // lists behind the trait: nothing counted
  expect(outputShown(getter({}))).toBe(0);
});
