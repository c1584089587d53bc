// The rollout view: the rollout trait's token × token matrices, one per layer, drawn by the matrix
// view, in the mode rollout_mode chooses: attention rollout (Abnar & Zuidema 2020), ALTI
// contributions (Ferrando et al. 2022) or norm contributions (Kobayashi et al. 2021), each rolled
// out through the layers.
import { createRolloutMode } from "../controls/controls.js";
import { createMatrixView, matrixImage } from "./matrix_view.js";
import { declared, imaged } from "./view_adapter.js";

const BESIDE_ROLLOUT = "attention rollout instead mixes the mean attention with a fixed half for the residual.";

/** What each mode (rollout_mode) shows: the view's title (one sentence: what it is, and how it
 * differs from rollout), the image title's name, the colour bar's value, and the image caption's
 * sentence ("" for rollout itself: the title says it). */
export const ROLLOUT_SHOWN = {
  rollout: {
    title: "Attention rollout (Abnar & Zuidema 2020): how much each input token (column) flows into each position (row) after the chosen layer",
    name: "attention rollout", value: "rollout", caption: "",
  },
  contributions: {
    title: "ALTI contributions (Ferrando et al. 2022): each input token's (column) share of each position's (row) output "
      + "through attention, residual and LayerNorm, rolled out to the chosen layer (rollout instead counts the mean "
      + "attention and a fixed half for the residual)",
    name: "ALTI contributions", value: "ALTI contribution",
    caption: "ALTI contributions (Ferrando et al. 2022): each token's share of the layer's output through attention, "
      + `residual and LayerNorm (the L1 proximity of what it passes to the output), rolled out across layers; ${BESIDE_ROLLOUT}`,
  },
  norm_contributions: {
    title: "Norm contributions (Kobayashi et al. 2021): each input token's (column) share of each position's (row) output, "
      + "as the length of what it passes through attention, residual and LayerNorm, rolled out to the chosen layer as "
      + "GlobEnc does (rollout instead counts the mean attention and a fixed half for the residual)",
    name: "norm contributions", value: "norm contribution",
    caption: "Norm contributions (Kobayashi et al. 2021): each token's share of the layer's output as the length of what "
      + `it passes through attention, residual and LayerNorm, rolled out across layers as GlobEnc does; ${BESIDE_ROLLOUT}`,
  },
};

/** The mode rollout_mode names, rollout for any other value. */
export const rolloutModeOf = (get) => (Object.keys(ROLLOUT_SHOWN).includes(get("rollout_mode")) ? get("rollout_mode") : "rollout");

// → the matrix view's state, or {message} (why there is none: shown in the tab), or a status line.
function rolloutState({ get, decoded }) {
  const payload = get("rollout");
  const tokens = get("tokens");
  if (payload?.error) return { message: payload.error };
  const mode = rolloutModeOf(get);
  // A payload of the other mode (before the kernel's answer to a switch) is not drawn as this one.
  if (!payload?.data || payload.n_tokens !== tokens.length || (payload.mode ?? "rollout") !== mode) {
    return `loading ${ROLLOUT_SHOWN[mode].name}…`;
  }
  const { values, shape } = decoded("rollout");
  return {
    title: ROLLOUT_SHOWN[mode].title,
    tokens, notes: get("token_notes"), values, shape, choice: get("rollout_choice") ?? {}, special: payload.special ?? [],
    valueLabel: ROLLOUT_SHOWN[mode].value, layerLabel: (i) => `Rolled out through layer ${i}`,
  };
}

/** @type {import("./view_adapter.js").ViewAdapter} */
export const adapter = {
  ...declared("rollout"),
  create(body, { setTraits }) {
    let mode = null;
    const matrix = createMatrixView(body, {
      lead: (bar) => { mode = createRolloutMode(bar, setTraits); },
      onChoice: (choice) => setTraits({ rollout_choice: choice }),
    });
    return { ...matrix, mode };
  },
  draw(view, context) {
    view.mode.update(context.get);
    const state = rolloutState(context);
    if (typeof state === "string") return state;
    if (state.message) {
      view.say(state.message);
      return "";
    }
    view.update(state);
    return "";
  },
  picture(context, options) {
    const state = rolloutState(context);
    // Why there is no matrix is the picture's line, as it is the tab's.
    return typeof state !== "string" && state.message ? state.message : imaged(state, matrixImage, options);
  },
  title: ({ get }) => `${get("model_name")} · ${ROLLOUT_SHOWN[rolloutModeOf(get)].name}`,
  shows: ["rollout mode", "notice", "masked", "words"],
};
