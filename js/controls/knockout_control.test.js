// @vitest-environment jsdom
import { afterEach, expect, it, vi } from "vitest";
import { createKnockoutControl, knockoutLine, knockoutState, SAVED_PAGE } from "./knockout_control.js";

const TRAITS = {
  knockout_control: { position: 3, output: "next token" }, layer: 2, n_heads: 4, heads: [0, 1, 2, 3],
  tokens: ["[CLS]", "the", "<b>", "of", "[SEP]"], token_notes: [], causal: true, result_id: 5,
};
const stateOf = (traits = {}, page = false) => knockoutState((name) => ({ ...TRAITS, ...traits })[name], page);

function mount(ask) {
  const parent = document.body.appendChild(document.createElement("div"));
  return { parent, control: createKnockoutControl(parent, { ask }) };
}

const flush = () => new Promise((resolve) => setTimeout(resolve, 0));

afterEach(() => document.body.replaceChildren());

it("asks the kernel to knock out the chosen head, or its line from the predicted token, and says Δ log p", async () => {
  const answer = { layer: 2, head: 1, key: 2, position: 3, target: "paris", log_p: -1.5, log_p_knocked: -2.25, delta: -0.75,
    masked: false, result_id: 5 };
  const ask = vi.fn(() => Promise.resolve({ content: answer }));
  const { parent, control } = mount(ask);
  control.update(stateOf());
  const head = parent.querySelector(".attnscope-knockout-head");
  const key = parent.querySelector(".attnscope-knockout-key");
  expect([...head.options].map((o) => o.textContent)).toEqual(["Head 0", "Head 1", "Head 2", "Head 3"]);
  // A causal model's predicted token reads the tokens up to it: the whole head, or a line to one of them.
  expect([...key.options].map((o) => o.value)).toEqual(["-1", "0", "1", "2", "3"]);
  expect(key.options[3].textContent).toBe("its line “of” → “<b>” (token 2)"); // text, never HTML
  expect(parent.querySelector("b")).toBeNull();
  head.value = "1";
  key.value = "2";
  parent.querySelector(".attnscope-knockout-run").click();
  expect(ask).toHaveBeenCalledWith("knockout", { layer: 2, head: 1, key: 2, result_id: 5 });
  expect(parent.querySelector(".attnscope-knockout-result").textContent).toBe("knocking out…");
  await flush();
  expect(parent.querySelector(".attnscope-knockout-result").textContent)
    .toBe("line “of” → “<b>” blocked in layer 2, head 1: log p of “paris” −1.500 → −2.250, Δ −0.750");
  // Another layer: the line spoke of the last one, and goes.
  control.update(stateOf({ layer: 3 }));
  expect(parent.querySelector(".attnscope-knockout-result").textContent).toBe("");
  // A head shown alone is the one the control knocks out.
  control.update(stateOf({ heads: [3] }));
  expect(head.value).toBe("3");
});

it("says the kernel's error, and drops an answer for another text", async () => {
  let reject;
  const ask = vi.fn(() => new Promise((_, no) => { reject = no; }));
  const { parent, control } = mount(ask);
  control.update(stateOf({ causal: false, knockout_control: { position: 1, output: "masked token" } }));
  expect(parent.querySelector(".attnscope-knockout-key").options.length).toBe(1 + 5); // an encoder reads every token
  parent.querySelector(".attnscope-knockout-run").click();
  reject(new Error("head=9 is too large"));
  await flush();
  expect(parent.querySelector(".attnscope-knockout-result").textContent).toBe("head=9 is too large");
  parent.querySelector(".attnscope-knockout-run").click();
  control.update(stateOf({ result_id: 6 }));
  reject(new Error("late"));
  await flush();
  expect(parent.querySelector(".attnscope-knockout-result").textContent).toBe("");
});

it("says why where the run cannot be scored, and on a saved page, instead of offering a broken control", () => {
  const ask = vi.fn();
  const { parent, control } = mount(ask);
  const why = parent.querySelector(".attnscope-knockout-why");
  control.update(stateOf({ knockout_control: { unavailable: "all-MiniLM-L6-v2 (embedded) is an encoder with no masked-LM head" } }));
  expect(why.hidden).toBe(false);
  expect(why.textContent).toContain("no masked-LM head");
  // Folded under one line: said where asked, not a paragraph under every view.
  const folded = parent.querySelector(".attnscope-knockout-unavailable");
  expect(folded.open).toBe(false);
  expect(folded.querySelector("summary").textContent).toBe("Knockout: not available here");
  expect(parent.querySelector(".attnscope-knockout-run").hidden).toBe(true);
  expect(parent.querySelector(".attnscope-knockout-head").closest("label").hidden).toBe(true);
  control.update(stateOf({}, true));
  expect(why.textContent).toBe(SAVED_PAGE);
  control.update(stateOf({ knockout_control: {} })); // nothing said yet (an older page): nothing shown
  expect(why.hidden).toBe(true);
  expect(parent.querySelector(".attnscope-knockout-run").hidden).toBe(true);
  control.update(stateOf());
  expect(why.hidden).toBe(true);
  expect(parent.querySelector(".attnscope-knockout-run").hidden).toBe(false);
  expect(ask).not.toHaveBeenCalled();
});

it("says a whole head's knockout, a rise, and masks left out", () => {
  const line = knockoutLine({ layer: 0, head: 2, key: -1, position: 4, target: "x", log_p: -3, log_p_knocked: -2.5, delta: 0.5,
    masked: true }, ["a"]);
  expect(line).toBe("layer 0, head 2 zeroed: log p of “x” −3.000 → −2.500, Δ +0.500 (measured without the masked heads)");
  const tiny = knockoutLine({ layer: 0, head: 2, key: -1, position: 0, target: "x", log_p: -3, log_p_knocked: -3, delta: -0.00004 }, ["a"]);
  expect(tiny.endsWith("Δ −4.0e-5")).toBe(true);
});

it("names an encoder-decoder's part: the whole head is its cross- and self-attention, a line one of them", () => {
  const base = { layer: 1, head: 3, position: 5, target: "x", log_p: -3, log_p_knocked: -3.5, delta: -0.5 };
  const tokens = ["s0", "s1", "s2", "<s>", "d1", "d2"];
  expect(knockoutLine({ ...base, key: -1, part: "its cross- and self-attention" }, tokens))
    .toBe("layer 1, head 3 (its cross- and self-attention) zeroed: log p of “x” −3.000 → −3.500, Δ −0.500");
  expect(knockoutLine({ ...base, key: 1, part: "cross-attention" }, tokens).startsWith("line “d2” → “s1” blocked in layer 1, head 3 (cross-attention):"))
    .toBe(true);
});

it("on a generation scores the selected output token, as the model chose it, and says why not on a prompt token", async () => {
  const answer = { layer: 2, head: 0, key: 1, position: 3, token: 4, step: 1, target: "[SEP]", log_p: -0.5,
    log_p_knocked: -1.5, delta: -1, masked: false, result_id: 5 };
  const ask = vi.fn(() => Promise.resolve({ content: answer }));
  const { parent, control } = mount(ask);
  const generation = { knockout_control: { output: "chosen token" }, output_start: 3 };
  control.update(stateOf({ ...generation, focus_token: 2 }));
  const why = parent.querySelector(".attnscope-knockout-why");
  expect(why.textContent).toBe("Select an output token (from token 3 on): knockout scores the token the model chose there.");
  expect(parent.querySelector(".attnscope-knockout-unavailable").open).toBe(true); // what to do: shown open
  expect(parent.querySelector(".attnscope-knockout-run").hidden).toBe(true);
  control.update(stateOf({ ...generation, focus_token: 4 }));
  expect(why.hidden).toBe(true);
  const key = parent.querySelector(".attnscope-knockout-key");
  // The lines run from the position that predicted token 4 (token 3) to the tokens up to it.
  expect([...key.options].map((o) => o.value)).toEqual(["-1", "0", "1", "2", "3"]);
  expect(key.value).toBe("-1"); // the whole head, never an empty choice that Run read as token 0's line
  expect(key.options[2].textContent).toBe("its line “of” → “the” (token 1)");
  // Token 4 is the second written (output from token 3): step 2, as the text view counts.
  expect(parent.querySelector(".attnscope-knockout").title).toBe("Δ log p of the token the model chose at step 2, in layer 2");
  parent.querySelector(".attnscope-knockout-head").value = "0";
  key.value = "1";
  parent.querySelector(".attnscope-knockout-run").click();
  expect(ask).toHaveBeenCalledWith("knockout", { layer: 2, head: 0, key: 1, result_id: 5, token: 4 });
  await flush();
  expect(parent.querySelector(".attnscope-knockout-result").textContent)
    .toBe("line “of” → “the” blocked in layer 2, head 0: log p of “[SEP]” (chosen at step 1) −0.500 → −1.500, Δ −1.000");
  // Another output token selected: the answer spoke of the last one, and goes; the keys follow it.
  control.update(stateOf({ ...generation, focus_token: 3 }));
  expect(parent.querySelector(".attnscope-knockout-result").textContent).toBe("");
  expect([...key.options].map((o) => o.value)).toEqual(["-1", "0", "1", "2"]);
  // The kernel's reason (still writing) is said as it is.
  control.update(stateOf({ knockout_control: { unavailable: "still writing" }, output_start: 3, focus_token: 4 }));
  expect(why.textContent).toBe("still writing");
});
