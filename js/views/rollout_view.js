// The rollout view: the rollout trait's token × token matrices, one per layer, drawn by the matrix
// view, in the mode rollout_mode chooses: attention rollout (Abnar & Zuidema 2020) or ALTI
// contributions (Ferrando et al. 2022), each rolled out through the layers.
import { createRolloutMode } from "../controls/controls.js";
import { createMatrixView, matrixImage } from "./matrix_view.js";
import { declared, imaged } from "./view_adapter.js";

/** What each mode shows: the view's title (one sentence: what it is, and how it differs from the
 * other), the image title's name, the colour bar's value. */
export const ROLLOUT_SHOWN = {
  rollout: {
    title: "Attention rollout (Abnar & Zuidema 2020): how much each input token (column) flows into each position (row) after the chosen layer",
    name: "attention rollout", value: "rollout",
  },
  contributions: {
    title: "ALTI contributions (Ferrando et al. 2022): each input token's (column) share of each position's (row) output "
      + "through attention, residual and LayerNorm, rolled out to the chosen layer (rollout instead counts the mean "
      + "attention and a fixed half for the residual)",
    name: "ALTI contributions", value: "contribution",
  },
};

const modeOf = (get) => (get("rollout_mode") === "contributions" ? "contributions" : "rollout");

// → the matrix view's state, or {message} (why there is none: shown in the tab), or a status line.
function rolloutState({ get, decoded }) {
  const payload = get("rollout");
  const tokens = get("tokens");
  if (payload?.error) return { message: payload.error };
  const mode = modeOf(get);
  // A payload of the other mode (before the kernel's answer to a switch) is not drawn as this one.
  if (!payload?.data || payload.n_tokens !== tokens.length || (payload.mode ?? "rollout") !== mode) {
    return `loading ${ROLLOUT_SHOWN[mode].name}…`;
  }
  const { values, shape } = decoded("rollout");
  return {
    title: ROLLOUT_SHOWN[mode].title,
    tokens, notes: get("token_notes"), values, shape, layer: shape[0] - 1, special: payload.special ?? [],
    valueLabel: ROLLOUT_SHOWN[mode].value, layerLabel: (i) => `Rolled out through layer ${i}`,
  };
}

/** @type {import("./view_adapter.js").ViewAdapter} */
export const adapter = {
  ...declared("rollout"),
  create(body, { setTraits }) {
    let mode = null;
    const matrix = createMatrixView(body, { lead: (bar) => { mode = createRolloutMode(bar, setTraits); } });
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
  title: ({ get }) => `${get("model_name")} · ${ROLLOUT_SHOWN[modeOf(get)].name}`,
  shows: ["rollout mode", "notice", "masked", "words"],
};
