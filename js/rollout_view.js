// The rollout view (Abnar & Zuidema 2020): the rollout trait's token × token matrices, one per
// layer, drawn by the matrix view.
import { createMatrixView, matrixImage } from "./matrix_view.js";
import { declared, imaged, shown } from "./view_adapter.js";

function rolloutState({ get, decoded }) {
  const payload = get("rollout");
  const tokens = get("tokens");
  if (payload?.error) return payload.error;
  if (!payload?.data || payload.n_tokens !== tokens.length) return "loading rollout…";
  const { values, shape } = decoded("rollout");
  return {
    title: "Attention rollout (Abnar & Zuidema 2020): how much each input token (column) flows into each position (row) after the chosen layer",
    tokens, notes: get("token_notes"), values, shape, layer: shape[0] - 1, special: payload.special ?? [], valueLabel: "rollout",
    layerLabel: (i) => `Rolled out through layer ${i}`,
  };
}

/** @type {import("./view_adapter.js").ViewAdapter} */
export const adapter = {
  ...declared("rollout"),
  create: (body) => createMatrixView(body),
  draw: (view, context) => shown(view, rolloutState(context)),
  picture: (context, options) => imaged(rolloutState(context), matrixImage, options),
  title: ({ get }) => `${get("model_name")} · attention rollout`,
  shows: ["notice", "masked", "words"],
};
