// @vitest-environment jsdom
import { afterEach, describe, expect, it, vi } from "vitest";
import { headRows } from "./finder_plot.js";
import { createHeadFinderView } from "./head_finder_view.js";

// jsdom has no canvas: the scatter is not painted, the table and examples are.
HTMLCanvasElement.prototype.getContext = () => null;
afterEach(() => document.body.replaceChildren());

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
  const callbacks = { onOpenHead: vi.fn(), onOpenExample: vi.fn(() => true), onChoice: vi.fn() };
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

  it("keeps the keyboard on a column's header when Enter sorts by it", () => {
    const { box, rows } = mount();
    const entropy = [...box.querySelectorAll("th")].find((th) => th.textContent.startsWith("entropy"));
    entropy.focus();
    entropy.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter" }));
    expect(rows()).toEqual(["1-1", "1-0", "0-1", "0-0"]);
    expect(document.activeElement?.tagName).toBe("TH");
    expect(document.activeElement?.textContent).toBe("entropy ↓");
  });

  it("shows a long document's example as a line: the query in context, a far key beside it, … between", () => {
    const { box } = mount();
    box.querySelector('tr[data-head="1-1"]').click();
    const example = box.querySelector(".attnscope-finder-example");
    expect(example.querySelector("mark").textContent).toBe("query");
    expect(example.querySelector("u").textContent).toBe("key");
    expect(example.textContent.replace(/^[^:]*: /, "").trim()).toBe("… a b c key d e f … x y query z w …");
  });

  it("reads an example as its text when the kernel sends running pieces: hikers, not hike ##rs", () => {
    const box = document.body.appendChild(document.createElement("div"));
    const view = createHeadFinderView(box, {});
    const running = { pieces: [[0, [" [CLS] ", "The", " hike", "rs", " <b>slept</b>", ".", " [SEP] "]]], n: 7, running: true,
      text: "The hikers <b>slept</b>.", text_b: null };
    view.update({ ...state, finder: { examples: { "0-0": [[3, 3, 0.8, [[2, 0.8]], [[0, 7]]]] }, docs: { 3: running } },
      choice: { head: "0-0" } });
    const example = box.querySelector(".attnscope-finder-example");
    expect(example.textContent.replace(/\s+/g, " ")).toMatch(/text 3: \[CLS\] The hikers <b>slept<\/b>\. \[SEP\] $/); // as HTML lays it out
    expect(example.querySelector("mark").textContent).toBe("rs");
    expect(example.querySelector("u").textContent).toBe("hike");
    expect(example.querySelector("b")).toBeNull(); // token text is data, never markup
  });

  it("says so where an example cannot be opened (a saved copy)", () => {
    const { box, callbacks } = mount();
    callbacks.onOpenExample.mockReturnValue(false);
    box.querySelector('tr[data-head="1-0"]').dispatchEvent(new KeyboardEvent("keydown", { key: "Enter" }));
    box.querySelector(".attnscope-finder-example").click();
    expect(box.querySelector(".attnscope-finder-problem").textContent).toMatch(/saved copy/);
  });
});

// The scene's texts' strings (its own tests: finder_plot.test.js).
const texts = (scene) => scene.items.filter((item) => item.type === "text").map((item) => item.text);

describe("createHeadFinderView's choice", () => {
  it("hands each change of axes, colour, filter and head on, and draws the choice a state brings", () => {
    const { box, view, callbacks } = mount();
    const [x, y, colour] = box.querySelectorAll("select");
    expect([x.value, y.value, colour.value]).toEqual(["entropy", "sink_rate", "prev_token"]);
    x.value = "prev_token";
    x.dispatchEvent(new Event("change"));
    expect(callbacks.onChoice).toHaveBeenLastCalledWith({ x: "prev_token", y: "sink_rate", color: "prev_token", filter: "", head: null });
    const canvas = box.querySelector("canvas");
    expect(canvas.dataset.x).toBe("prev_token");
    view.filter("layer >= 1");
    expect(callbacks.onChoice).toHaveBeenLastCalledWith(expect.objectContaining({ x: "prev_token", filter: "layer >= 1" }));
    // A click on a point picks the head drawn there (jsdom's canvas is at 0, 0).
    const at = canvas.dataset.positions.split(",").map(Number);
    canvas.dispatchEvent(new MouseEvent("click", { clientX: at[6] + 2, clientY: at[7] - 1 }));
    expect(callbacks.onChoice).toHaveBeenLastCalledWith(expect.objectContaining({ head: "1-1" }));
    expect(box.querySelector("tr.attnscope-selected").dataset.head).toBe("1-1");
    // The widget's state (a saved page reopened, the kernel's refusal) wins over what the view had.
    const calls = callbacks.onChoice.mock.calls.length;
    view.update({ ...state, choice: { y: "entropy", filter: "sink_rate > 0.5", head: "1-0" } });
    expect([x.value, y.value, colour.value]).toEqual(["entropy", "entropy", "prev_token"]);
    expect(box.querySelector("input.attnscope-finder-filter").value).toBe("sink_rate > 0.5");
    expect(box.querySelectorAll("tbody tr")).toHaveLength(2);
    expect(box.querySelector("tr.attnscope-selected").dataset.head).toBe("1-0");
    expect(box.querySelectorAll(".attnscope-finder-example")).toHaveLength(2);
    expect(callbacks.onChoice.mock.calls.length).toBe(calls); // drawing a state writes nothing back
    // Its images are the same scene, with the title.
    expect(texts(view.scene({ title: "m" }))).toEqual(expect.arrayContaining(["m", "entropy", "colour: prev_token", "Head 1-0 is ringed."]));
  });
});
