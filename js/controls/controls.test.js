// @vitest-environment jsdom
import { afterEach, expect, it, vi } from "vitest";
import { VIEWS as DECLARED } from "../transport/contract.js";
import { asOneLine, createControls, editedText } from "./controls.js";

const VIEWS = DECLARED.filter((view) => ["head", "model", "analysis"].includes(view.name));
const BASE = { view: "head", parts: [], masked_heads: [], model_name: "m", n_layers: 3, layer: 1, sentence_filter: "all",
  sentence_b_start: null, attention_part: "encoder", word_level: false, neuron_unavailable: "", analysis: {},
  result_id: 0, text: "the cat", text_b: null, editable: true, notice: "", error: "", show_change: false, mask_summary: "" };

function mount(state = {}, { shadow = false } = {}) {
  const values = { ...BASE, ...state };
  const get = (name) => values[name];
  const actions = { setTraits: vi.fn((v) => Object.assign(values, v)), sendRequest: vi.fn(), saveImage: vi.fn(), redraw: vi.fn() };
  const root = document.createElement("div");
  // marimo draws each widget inside a shadow root.
  if (shadow) document.body.appendChild(document.createElement("div")).attachShadow({ mode: "open" }).appendChild(root);
  else document.body.appendChild(root);
  const controls = createControls(root, VIEWS, actions);
  controls.update(get);
  return { root, values, get, actions, controls, input: root.querySelector("input.attnscope-text") };
}

afterEach(() => {
  vi.useRealTimers();
  document.body.replaceChildren();
});

it("shows the state: layers counted from 0 (the tooltip says so), the open tab, no analysis tab without an analysis", () => {
  const { root } = mount();
  expect([...root.querySelectorAll(".attnscope-layer option")].map((o) => o.textContent)).toEqual(["0", "1", "2"]);
  expect(root.querySelector(".attnscope-layer").closest("label").title).toMatch(/counted from 0/);
  expect(root.querySelector(".attnscope-layer").value).toBe("1");
  expect(root.querySelector('[data-view="head"]').getAttribute("aria-selected")).toBe("true");
  expect(root.querySelector('[data-view="analysis"]').hidden).toBe(true);
});

it("writes control changes as traits", () => {
  const { root, actions } = mount();
  root.querySelector('[data-view="model"]').click();
  expect(actions.setTraits).toHaveBeenLastCalledWith({ view: "model" });
  const layer = root.querySelector(".attnscope-layer");
  layer.value = "2";
  layer.dispatchEvent(new Event("change"));
  expect(actions.setTraits).toHaveBeenLastCalledWith({ layer: 2 });
});

it("sends an edit after a pause with a new id, and is computing until that id is answered", () => {
  vi.useFakeTimers();
  const { values, get, actions, controls, input } = mount();
  input.focus();
  input.value = "the dog";
  input.dispatchEvent(new Event("input"));
  expect(controls.editor.computing()).toBe(true);
  expect(actions.sendRequest).not.toHaveBeenCalled();
  vi.advanceTimersByTime(400);
  expect(actions.sendRequest).toHaveBeenCalledWith({ id: 1, text: "the dog", text_b: null });
  // An answer to an older request does not overwrite what is typed.
  controls.update(get);
  expect(input.value).toBe("the dog");
  expect(controls.editor.computing()).toBe(true);
  Object.assign(values, { result_id: 1, text: "the dog" });
  controls.update(get);
  expect(controls.editor.computing()).toBe(false);
});

it("keeps one edit in flight: what is typed meanwhile goes as one edit, the newest, once answered", () => {
  vi.useFakeTimers();
  const { values, get, actions, controls, input } = mount();
  input.focus();
  input.value = "the dog";
  input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter" }));
  expect(actions.sendRequest).toHaveBeenCalledTimes(1);
  controls.update(get);
  for (const text of ["the dog b", "the dog ba", "the dog barks"]) {
    input.value = text;
    input.dispatchEvent(new Event("input"));
    vi.advanceTimersByTime(400); // a pause long enough to send, were nothing in flight
  }
  input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter" }));
  expect(actions.sendRequest).toHaveBeenCalledTimes(1);
  expect(controls.editor.computing()).toBe(true);
  Object.assign(values, { result_id: 1, text: "the dog" });
  controls.update(get); // the first answer: the newest text goes, once
  expect(actions.sendRequest).toHaveBeenCalledTimes(2);
  expect(actions.sendRequest).toHaveBeenLastCalledWith({ id: 2, text: "the dog barks", text_b: null });
  expect(input.value).toBe("the dog barks");
  expect(controls.editor.computing()).toBe(true);
  Object.assign(values, { result_id: 2, text: "the dog barks" });
  controls.update(get);
  expect(actions.sendRequest).toHaveBeenCalledTimes(2);
  expect(controls.editor.computing()).toBe(false);
});

it("never overwrites what is typed inside a shadow root (marimo)", () => {
  vi.useFakeTimers();
  const { get, actions, controls, input } = mount({}, { shadow: true });
  input.focus();
  input.value = "the dog";
  input.dispatchEvent(new Event("input"));
  controls.update(get); // the redraw an edit asks for, before the kernel has answered
  expect(input.value).toBe("the dog");
  input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter" }));
  expect(actions.sendRequest).toHaveBeenCalledWith({ id: 1, text: "the dog", text_b: null });
});

it("keeps a failed edit's text so it can be fixed", () => {
  vi.useFakeTimers();
  const { values, get, controls, input } = mount();
  input.value = "x".repeat(5);
  input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter" }));
  Object.assign(values, { result_id: 1, error: "text too long", text: "the cat" });
  input.blur();
  controls.update(get);
  expect(input.value).toBe("xxxxx");
  expect(input.closest("div").parentElement.querySelector(".attnscope-error").textContent).toBe("text too long");
});

it("hides the editor for precomputed attention", () => {
  const { root } = mount({ editable: false });
  expect(root.querySelector(".attnscope-editor").hidden).toBe(true);
});

it("leaves idle the controls a view does not use, as src/attnscope/widget/views.py declares them", () => {
  for (const view of DECLARED.filter((v) => v.modes.includes("short"))) {
    const values = { ...BASE, view: view.name };
    const root = document.body.appendChild(document.createElement("div"));
    createControls(root, DECLARED, { setTraits: vi.fn(), sendRequest: vi.fn(), saveImage: vi.fn(), redraw: vi.fn() })
      .update((name) => values[name]);
    const idle = (selector) => root.querySelector(selector).closest("label").classList.contains("attnscope-idle");
    expect(idle("select.attnscope-layer")).toBe(!view.controls.includes("layer"));
    expect(idle("input.attnscope-words")).toBe(!view.controls.includes("words"));
    document.body.replaceChildren();
  }
});

it("offers the Compare choice only while two models are compared, and writes it as a trait", () => {
  const one = mount();
  expect(one.root.querySelector(".attnscope-compare").closest("label").hidden).toBe(true);
  const { root, actions, get, controls } = mount({ compared_model: "tuned", compare_shown: "first" });
  const choice = root.querySelector(".attnscope-compare");
  expect(choice.closest("label").hidden).toBe(false);
  expect(choice.closest("label").title).toMatch(/Second model: tuned/);
  expect([...choice.options].map((o) => o.value)).toEqual(["first", "second", "difference"]);
  choice.value = "difference";
  choice.dispatchEvent(new Event("change"));
  expect(actions.setTraits).toHaveBeenLastCalledWith({ compare_shown: "difference" });
  controls.update(get);
  expect(choice.value).toBe("difference");
});

it("offers Weigh by where a view draws weights, writes it as a trait, and says why a run cannot be weighed", () => {
  const { root, actions, get, controls, values } = mount({ weigh_by: "attention", weigh_unavailable: "" });
  const choice = root.querySelector(".attnscope-weigh");
  const label = choice.closest("label");
  expect(label.hidden).toBe(false);
  expect(label.title).toMatch(/Kobayashi et al. 2020/);
  expect([...choice.options].map((o) => o.value)).toEqual(["attention", "value_norm"]);
  choice.value = "value_norm";
  choice.dispatchEvent(new Event("change"));
  expect(actions.setTraits).toHaveBeenLastCalledWith({ weigh_by: "value_norm" });
  controls.update(get);
  expect(choice.value).toBe("value_norm");
  // The analysis tab draws no attention weights: Weigh by is idle there (its room kept).
  values.view = "analysis";
  controls.update(get);
  expect(label.classList.contains("attnscope-idle")).toBe(true);
  // Precomputed attention has no values: the control is off, and its title says why.
  const without = mount({ weigh_by: "attention", weigh_unavailable: "Weighing by value norm needs what each key passes" });
  expect(without.root.querySelector(".attnscope-weigh").closest("label").hidden).toBe(true);
  const kept = mount({ weigh_by: "value_norm", weigh_unavailable: "Weighing by value norm is for self-attention" });
  const keptChoice = kept.root.querySelector(".attnscope-weigh");
  expect(keptChoice.disabled).toBe(true);
  expect(keptChoice.closest("label").title).toMatch(/self-attention/);
  // A saved copy keeps the weighing it was saved with.
  const saved = createControls(document.body.appendChild(document.createElement("div")), VIEWS, actions, { page: true });
  saved.update((name) => ({ ...BASE, weigh_by: "value_norm", weigh_unavailable: "" })[name]);
  expect(document.querySelectorAll(".attnscope-weigh")[3].disabled).toBe(true);
});

it("opens another text as if typed and sent at once (the head finder's examples), never in a saved copy", () => {
  const { root, actions, controls, values } = mount({ result_id: 3 });
  expect(controls.editor.open("a dog barks", "it is loud")).toBe(true);
  expect(actions.sendRequest).toHaveBeenLastCalledWith({ id: 4, text: "a dog barks", text_b: "it is loud" });
  expect(root.querySelector("input.attnscope-text").value).toBe("a dog barks");
  values.result_id = 4;
  expect(controls.editor.open("a cat", null, { layer: 2, head: 5, query: 7 })).toBe(true);
  expect(actions.sendRequest).toHaveBeenLastCalledWith({ id: 5, text: "a cat", text_b: null, open: { layer: 2, head: 5, query: 7 } });
  const saved = createControls(document.body.appendChild(document.createElement("div")), VIEWS, actions, { page: true });
  saved.update((name) => values[name]);
  expect(saved.editor.open("a cat", null)).toBe(false);
});

it("shows Stop while the kernel generates: a click sends stop once, and it goes when generating ends", () => {
  const stop = vi.fn();
  const values = { ...BASE, generating: true };
  const get = (name) => values[name];
  const root = document.body.appendChild(document.createElement("div"));
  const controls = createControls(root, VIEWS, { setTraits: vi.fn(), sendRequest: vi.fn(), saveImage: vi.fn(),
    redraw: vi.fn(), stop });
  controls.update(get);
  const button = root.querySelector(".attnscope-stop");
  expect(button.hidden).toBe(false);
  expect(button.textContent).toBe("Stop");
  button.click();
  expect(stop).toHaveBeenCalledTimes(1);
  expect(button.disabled).toBe(true);
  values.generating = false;
  controls.update(get);
  expect(button.hidden).toBe(true);
  expect(button.disabled).toBe(false);
  // A saved copy has no kernel to stop.
  const saved = createControls(document.body.appendChild(document.createElement("div")), VIEWS,
    { setTraits: vi.fn(), sendRequest: vi.fn(), saveImage: vi.fn(), redraw: vi.fn(), stop }, { page: true });
  saved.update(get);
  values.generating = true;
  saved.update(get);
  expect(document.body.lastChild.querySelector(".attnscope-stop").hidden).toBe(true);
});

it("shows a text's line breaks as spaces in the one-line field, and an edit keeps them where it did not reach", () => {
  const text = "It was cold even in winter.\nHer brother, who\nlived far away, came.";
  const { input, actions } = mount({ text });
  expect(input.value).toBe("It was cold even in winter. Her brother, who lived far away, came."); // not "winter.Her"
  input.value = input.value.replace("far away", "nearby");
  input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter" }));
  expect(actions.sendRequest).toHaveBeenLastCalledWith({ id: 1, text: "It was cold even in winter.\nHer brother, who\nlived nearby, came.", text_b: null });
});

it("reads an edit of the one-line field back into the text with its line breaks", () => {
  const original = "a\nb c\r\nd";
  expect(asOneLine(original)).toBe("a b c  d");
  expect(editedText(original, asOneLine(original))).toBe(original); // unedited: the text as run
  expect(editedText(original, "a b X c  d")).toBe("a\nb X c\r\nd");
  expect(editedText(original, "Za b c  d")).toBe("Za\nb c\r\nd");
  expect(editedText(original, "a b c  dZ")).toBe("a\nb c\r\ndZ");
  expect(editedText(original, "")).toBe("");
  expect(editedText(original, "a d")).toBe("a\nd"); // the kept space was a line break; the ones cut go with the cut
  expect(editedText("", "new")).toBe("new");
});
