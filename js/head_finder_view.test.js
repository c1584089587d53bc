// @vitest-environment jsdom
import { afterEach, describe, expect, it, vi } from "vitest";
import cases from "../tests/data/filter_cases.json";
import { compileFilter, createHeadFinderView, headRows } from "./head_finder_view.js";

// jsdom has no canvas: the scatter is not painted, the table and examples are.
HTMLCanvasElement.prototype.getContext = () => null;
afterEach(() => document.body.replaceChildren());

describe("compileFilter", () => {
  // The same cases as tests/test_head_finder.py: one grammar in both languages.
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

// Two layers × two heads, three metrics; head 1-0 has two examples.
const state = {
  nLayers: 2, nHeads: 2,
  measures: [
    { key: "entropy", values: Float32Array.from([1, 2, 3, 4]) },
    { key: "sink_rate", values: Float32Array.from([0.9, 0.1, 0.8, 0.2]) },
    { key: "prev_token", values: Float32Array.from([0, 0.5, 0.7, 0.1]) },
  ],
  finder: {
    examples: {
      "1-0": [[4, 1, 0.9, [[0, 0.9], [1, 0.05]], [[0, 4]]], [7, 2, 0.5, [[2, 0.5]], [[0, 4]]]],
      // A long document: the query in its context, its strongest key far before it.
      "1-1": [[9, 3000, 0.7, [[40, 0.7]], [[37, 44], [2998, 3003]]]],
    },
    docs: { 4: { pieces: [[0, ["[CLS]", "the", "<b>cat</b>", "[SEP]"]]], n: 4, text: "the <b>cat</b>", text_b: null },
      7: { pieces: [[0, ["[CLS]", "a", "dog", "[SEP]"]]], n: 4, text: "a dog", text_b: "it barks" },
      9: { pieces: [[37, ["a", "b", "c", "key", "d", "e", "f"]], [2998, ["x", "y", "query", "z", "w"]]], n: 5000,
        text: "long", text_b: null } },
  },
};

function mount() {
  const callbacks = { onOpenHead: vi.fn(), onOpenExample: vi.fn(() => true) };
  const box = document.body.appendChild(document.createElement("div"));
  const view = createHeadFinderView(box, callbacks);
  view.update(state);
  return { box, view, callbacks, rows: () => [...box.querySelectorAll("tbody tr")].map((tr) => tr.dataset.head) };
}

describe("createHeadFinderView", () => {
  it("lists every head, and the heads a filter keeps, with the count", () => {
    const { box, view, rows } = mount();
    expect(headRows(state).map((r) => r.label)).toEqual(["0-0", "0-1", "1-0", "1-1"]);
    expect(rows()).toEqual(["0-0", "0-1", "1-0", "1-1"]);
    expect(view.filter("sink_rate > 0.5 and layer >= 1")).toBe(1);
    expect(rows()).toEqual(["1-0"]);
    expect(box.querySelector(".attnscope-hint").textContent).toBe("1 of 4 heads");
    view.filter("nonsense >");
    expect(box.querySelector(".attnscope-finder-problem").hidden).toBe(false);
    expect(rows()).toHaveLength(4); // a filter that does not read keeps every head, and says why
  });

  it("sorts by a column, and a click on a head lists its examples as text, its query marked", () => {
    const { box, callbacks, rows } = mount();
    const entropy = [...box.querySelectorAll("th")].find((th) => th.textContent.startsWith("entropy"));
    entropy.click();
    expect(rows()).toEqual(["1-1", "1-0", "0-1", "0-0"]); // largest first
    box.querySelector('tr[data-head="1-0"]').click();
    const examples = [...box.querySelectorAll(".attnscope-finder-example")];
    expect(examples).toHaveLength(2);
    expect(examples[0].querySelector("mark").textContent).toBe("the");
    expect(examples[0].querySelector("u").textContent).toBe("[CLS]");
    expect(examples[0].innerHTML).not.toContain("<b>"); // token text is data, never markup
    examples[1].dispatchEvent(new KeyboardEvent("keydown", { key: "Enter" }));
    expect(callbacks.onOpenExample).toHaveBeenCalledWith({ text: "a dog", text_b: "it barks" }, 1, 0, 2);
    box.querySelector(".attnscope-finder-open").click();
    expect(callbacks.onOpenHead).toHaveBeenCalledWith(1, 0);
  });

  it("shows a long document's example as a line: the query in context, a far key beside it, … between", () => {
    const { box } = mount();
    box.querySelector('tr[data-head="1-1"]').click();
    const example = box.querySelector(".attnscope-finder-example");
    expect(example.querySelector("mark").textContent).toBe("query");
    expect(example.querySelector("u").textContent).toBe("key");
    expect(example.textContent.replace(/^[^:]*: /, "").trim()).toBe("… a b c key d e f … x y query z w …");
  });

  it("says so where an example cannot be opened (a saved copy)", () => {
    const { box, callbacks } = mount();
    callbacks.onOpenExample.mockReturnValue(false);
    box.querySelector('tr[data-head="1-0"]').dispatchEvent(new KeyboardEvent("keydown", { key: "Enter" }));
    box.querySelector(".attnscope-finder-example").click();
    expect(box.querySelector(".attnscope-finder-problem").textContent).toMatch(/saved copy/);
  });
});
