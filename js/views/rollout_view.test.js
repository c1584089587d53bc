// @vitest-environment jsdom
// The Rollout tab's mode (rollout_mode): its control in the view's own options row, what each mode
// says, and the kernel's {error} shown in the tab with the control kept to choose the other mode.
import { expect, it, vi } from "vitest";
import { createRolloutMode, ROLLOUT_MODE_TITLE, ROLLOUT_MODES } from "../controls/controls.js";
import { adapter, ROLLOUT_SHOWN } from "./rollout_view.js";
import { imageCaption } from "./views.js";

HTMLCanvasElement.prototype.getContext = () => null;

const TOKENS = ["[CLS]", "a", "<b>", "[SEP]"];
const VALUES = Float32Array.from({ length: 2 * 16 }, (_, i) => (i % 5) / 4);

function mount(traits) {
  const values = { tokens: TOKENS, token_notes: [], model_name: "m", rollout_mode: "rollout", ...traits };
  const get = (name) => values[name];
  const setTraits = vi.fn((v) => Object.assign(values, v));
  const body = document.createElement("div");
  document.body.appendChild(body);
  const view = adapter.create(body, { setTraits, redraw: () => {} }, get);
  const context = { get, decoded: () => ({ values: VALUES, shape: [2, 4, 4] }) };
  return { body, view, values, setTraits, draw: () => adapter.draw(view, context), context };
}

const payload = (mode) => ({ mode, n_tokens: 4, special: [0, 3], data: new Uint8Array(32), shape: [2, 4, 4] });

it("the control: a select 'Rollout | ALTI contributions | Norm contributions' in the view's options row, titled with how they differ", () => {
  const { body, draw, setTraits, values } = mount({ rollout: payload("rollout") });
  expect(draw()).toBe("");
  const select = body.querySelector(".attnscope-matrix-options select.attnscope-rollout-mode");
  expect([...select.options].map((o) => o.textContent)).toEqual(["Rollout", "ALTI contributions", "Norm contributions"]);
  expect(ROLLOUT_MODES.map(([value]) => value)).toEqual(["rollout", "contributions", "norm_contributions"]);
  expect(select.closest("label").title).toBe(ROLLOUT_MODE_TITLE);
  expect(ROLLOUT_MODE_TITLE).toMatch(/fixed half.*residual.*ALTI.*LayerNorm.*L1.*Kobayashi.*length/);
  expect(select.value).toBe("rollout");
  select.value = "contributions";
  select.dispatchEvent(new Event("change"));
  expect(setTraits).toHaveBeenLastCalledWith({ rollout_mode: "contributions" });
  // Until the kernel answers in the new mode, the old mode's matrix is not passed off as the new one.
  expect(draw()).toBe("loading ALTI contributions…");
  values.rollout = payload("contributions");
  expect(draw()).toBe("");
  expect(body.querySelector(".attnscope-matrix-title").textContent).toBe(ROLLOUT_SHOWN.contributions.title);
  // ALTI's matrix is not passed off as the norms' either.
  select.value = "norm_contributions";
  select.dispatchEvent(new Event("change"));
  expect(setTraits).toHaveBeenLastCalledWith({ rollout_mode: "norm_contributions" });
  values.rollout_mode = "norm_contributions";
  expect(draw()).toBe("loading norm contributions…");
  values.rollout = payload("norm_contributions");
  expect(draw()).toBe("");
  expect(body.querySelector(".attnscope-matrix-title").textContent).toBe(ROLLOUT_SHOWN.norm_contributions.title);
  // Each measure names its own colour bar: the two run on different scales (ALTI's to 0.7, the norms' to 0.2).
  expect(new Set(Object.values(ROLLOUT_SHOWN).map((mode) => mode.value)).size).toBe(3);
  expect(body.textContent).toContain("norm contribution (colour");
  values.rollout_mode = "rollout"; // the kernel's (or a saved page's) value is what the select shows
  draw();
  expect(select.value).toBe("rollout");
});

it("the mode's control stands alone too (createRolloutMode), and follows the state", () => {
  const parent = document.createElement("div");
  const setTraits = vi.fn();
  const mode = createRolloutMode(parent, setTraits);
  mode.update((name) => ({ rollout_mode: "contributions" })[name]);
  expect(parent.querySelector("select").value).toBe("contributions");
  expect(mode.control.textContent).toMatch(/^Show/);
});

it("the kernel's error shows in the tab as text, the matrix hidden and the mode's control kept", () => {
  const error = "Contributions (ALTI) follow … and <b>gpt2</b> (gpt2) is not one of them";
  const { body, draw, values } = mount({ rollout_mode: "contributions", rollout: { error } });
  expect(draw()).toBe("");
  const message = body.querySelector(".attnscope-matrix-message");
  expect(message.hidden).toBe(false);
  expect(message.textContent).toBe(error); // text, never HTML
  expect(message.querySelector("b")).toBeNull();
  expect(body.querySelector(".attnscope-matrix-grid").style.display).toBe("none");
  const select = body.querySelector("select.attnscope-rollout-mode");
  expect(select.closest("label").style.display).toBe("");
  // Back to rollout: the matrix again, the message gone.
  Object.assign(values, { rollout_mode: "rollout", rollout: payload("rollout") });
  expect(draw()).toBe("");
  expect(message.hidden).toBe(true);
  expect(body.querySelector(".attnscope-matrix-grid").style.display).toBe("");
  expect(body.querySelector("canvas.attnscope-matrix").dataset.n).toBe("2");
});

it("images and pictures say the mode: the title names it, the caption says how it differs; an error is the picture's line", () => {
  const { context, values } = mount({ rollout_mode: "contributions", rollout: payload("contributions") });
  expect(adapter.title(context)).toBe("m · ALTI contributions");
  expect(imageCaption(context, "rollout").join(" ")).toMatch(/^ALTI contributions \(Ferrando et al\. 2022\).*fixed half/);
  const picture = adapter.picture(context, { title: adapter.title(context) });
  expect(picture.items.find((i) => i.role === "title").text).toBe("m · ALTI contributions");
  Object.assign(values, { rollout_mode: "norm_contributions", rollout: payload("norm_contributions") });
  expect(adapter.title(context)).toBe("m · norm contributions");
  expect(imageCaption(context, "rollout").join(" ")).toMatch(/^Norm contributions \(Kobayashi et al\. 2021\).*length.*fixed half/);
  values.rollout_mode = "rollout";
  values.rollout = payload("rollout");
  expect(adapter.title(context)).toBe("m · attention rollout");
  expect(imageCaption(context, "rollout")).toEqual([]);
  values.rollout = { error: "needs a model" };
  expect(adapter.picture(context, {})).toBe("needs a model");
});
