import { describe, expect, it } from "vitest";
import { createGrowing } from "./growing.js";

// A model the test writes as the kernel's messages do (each trait a new object), and a kernel
// whose "growing_lists" answers the test gives by hand.
function page(traits) {
  const state = { grown: {}, ...traits };
  const listeners = new Map();
  const model = {
    get: (name) => state[name],
    on: (event, fn) => listeners.set(event, [...(listeners.get(event) ?? []), fn]),
    off: (event, fn) => listeners.set(event, (listeners.get(event) ?? []).filter((f) => f !== fn)),
    message(changes) {
      Object.assign(state, changes);
      for (const name of Object.keys(changes)) for (const fn of listeners.get(`change:${name}`) ?? []) fn();
    },
  };
  const asked = [];
  let changes = 0;
  const growing = createGrowing(model, () => new Promise((resolve) => asked.push(resolve)), () => { changes += 1; });
  growing.apply();
  return { model, growing, asked, changes: () => changes, listeners };
}

// What the kernel sends for a step (generation_widget.growth): from `start` on, `tail`, over the
// lists as they were at `before`.
const step = (parts) => ({ grown: parts });

describe("createGrowing", () => {
  it("grows each list by the steps, in order, without the lists crossing again", () => {
    const p = page({ tokens: ["The", " cat"], token_reading: ["The", " cat"], token_notes: ["", ""], text: "The cat" });
    p.model.message(step({ tokens: [2, [" sat"], 2], token_reading: [2, [" sat"], 2], token_notes: [2, [""], 2], text: [7, " sat", 7] }));
    p.model.message(step({ tokens: [3, ["."], 3], token_reading: [3, ["."], 3], token_notes: [3, [""], 3], text: [11, ".", 11] }));
    expect(p.growing.get("tokens")).toEqual(["The", " cat", " sat", "."]);
    expect(p.growing.get("token_reading")).toEqual(["The", " cat", " sat", "."]);
    expect(p.growing.get("text")).toBe("The cat sat.");
    expect(p.growing.get("layer")).toBe(undefined); // other traits as the model has them
    expect(p.asked).toHaveLength(0);
  });

  it("replaces what a step changed before its new token (a character completed by the next byte)", () => {
    const p = page({ tokens: ["a", "\u00f0"], token_reading: ["a", ""], text: "a" });
    p.model.message(step({ tokens: [2, ["\u0141"], 2], token_reading: [1, ["🙂", ""], 2], text: [1, "🙂", 1] }));
    expect(p.growing.get("token_reading")).toEqual(["a", "🙂", ""]);
    // Text lengths are UTF-16 units, as the kernel counts them: the emoji is two.
    p.model.message(step({ tokens: [3, ["b"], 3], token_reading: [3, ["b"], 3], text: [3, "b", 3] }));
    expect(p.growing.get("text")).toBe("a🙂b");
  });

  it("applies a step once: the same step again, or an older one, changes nothing", () => {
    const p = page({ tokens: ["a"] });
    const first = step({ tokens: [1, ["b"], 1] });
    p.model.message(first);
    p.model.message(step({ tokens: [2, ["c"], 2] }));
    p.model.message({ grown: { ...first.grown } }); // a view that reads the model's last step again
    expect(p.growing.get("tokens")).toEqual(["a", "b", "c"]);
  });

  it("takes the lists whole when the kernel sends them again, and grows those", () => {
    const p = page({ tokens: ["a"] });
    p.model.message(step({ tokens: [1, ["b"], 1] }));
    const whole = ["A", "b"]; // another show (a setting changed) sends them whole, with grown {}
    p.model.message({ tokens: whole, grown: {} });
    expect(p.growing.get("tokens")).toBe(whole);
    p.model.message(step({ tokens: [2, ["c"], 2] }));
    expect(p.growing.get("tokens")).toEqual(["A", "b", "c"]);
  });

  it("a view opened while the model writes asks for the lists, then grows them", async () => {
    // The model's lists are the prompt's; its last step grew lists of 3 tokens.
    const p = page({ tokens: ["a"], grown: { tokens: [3, ["d"], 3] } });
    expect(p.asked).toHaveLength(1);
    expect(p.growing.get("tokens")).toEqual(["a"]); // not a step applied over the wrong lists
    p.model.message(step({ tokens: [4, ["e"], 4] })); // a step while it asks: asks once
    expect(p.asked).toHaveLength(1);
    p.asked[0]({ content: { tokens: ["a", "b", "c", "d", "e"], result_id: 5 } });
    await new Promise((r) => setTimeout(r, 0));
    expect(p.growing.get("tokens")).toEqual(["a", "b", "c", "d", "e"]);
    expect(p.changes()).toBe(1);
    p.model.message(step({ tokens: [5, ["f"], 5] }));
    expect(p.growing.get("tokens")).toEqual(["a", "b", "c", "d", "e", "f"]);
  });

  it("stops listening when the view goes", () => {
    const p = page({ tokens: ["a"] });
    p.growing.destroy();
    p.model.message(step({ tokens: [1, ["b"], 1] }));
    expect(p.growing.get("tokens")).toEqual(["a"]);
    expect(p.listeners.get("change:grown")).toHaveLength(0);
  });
});
