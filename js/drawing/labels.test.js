import { expect, it } from "vitest";
import { HEAD_LABEL_EXAMPLES } from "../transport/contract.js";
import { headLabel, headName, headText, layerText } from "./labels.js";

it("names heads as the Python side does (src/attnscope/labels.py, through js/transport/contract.js)", () => {
  expect(HEAD_LABEL_EXAMPLES.length).toBeGreaterThan(3);
  for (const [layer, head, label, name] of HEAD_LABEL_EXAMPLES) {
    expect(headLabel(layer, head)).toBe(label);
    expect(headName(layer, head)).toBe(name);
  }
});

it("counts layers and heads from 0, as the Python API does", () => {
  expect(headLabel(7, 9)).toBe("7-9"); // Clark et al.'s 8-10
  expect(layerText(0)).toBe("Layer 0");
  expect(headText(11)).toBe("Head 11");
});
