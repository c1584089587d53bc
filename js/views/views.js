// The views in the tabs' order (js/views/view_modules.js, generated from src/attnscope/widget/views.py: each
// view's module exports its adapter), and the sentences under an image's title that say what
// state it shows.
import { PARTS } from "../controls/controls.js";
import { causalNote } from "./head_view.js";
import { headName } from "../drawing/labels.js";
import { generationSays } from "./output_tokens.js";
import { ROLLOUT_SHOWN, rolloutModeOf } from "./rollout_view.js";
import { ADAPTERS } from "./view_modules.js";

/** A setting's name as its control shows it ([[value, label], ...]). */
const labelOf = (table, value) => table.find(([v]) => v === value)?.[1] ?? String(value);
const listed = (items) => (items.length > 1 ? `${items.slice(0, -1).join(", ")} and ${items.at(-1)}` : items.join(""));

// What each piece of state changes in a drawing, said in words for a reader of an image, who has
// no controls to look at: one sentence each, or "" where the state draws as usual.
const SAYS = {
  generation: ({ get }) => generationSays(get), // attnscope.generate: the prompt's length and what the model wrote
  notice: ({ get }) => (get("notice") ?? "").split("\n")
    // A long run's notice also says how its attention is kept, which the drawing does not show.
    .filter((line) => line && (!get("long_context") || /truncated/i.test(line))).join(" "),
  part({ get }) {
    if ((get("parts") ?? []).length < 2) return "";
    return `${labelOf(PARTS, get("attention_part"))} attention.`;
  },
  masked({ get }) {
    const masked = get("masked_heads") ?? [];
    if (!masked.length) return "";
    return `Masked (switched off, as Michel et al. 2019): ${listed(masked.map(([l, h]) => headName(l, h)))}; `
      + "every later layer is recomputed without them.";
  },
  change({ get }) {
    if (!get("show_change") || !(get("masked_heads") ?? []).length) return "";
    return "Show change: each line is |A_masked − A|, how much masking changed that weight, scaled so that the "
      + "largest change is a full line; the first masked head's layer and those before it do not change, so they are empty."
      + (get("mask_summary") ? ` ${get("mask_summary")}` : "");
  },
  words: ({ get }) => (get("word_level")
    ? "Word level: wordpieces merged into words (attention to a word summed over its pieces, from a word averaged)." : ""),
  filter({ get }) {
    if (get("sentence_b_start") === null || get("sentence_filter") === "all") return "";
    const [from, to] = get("sentence_filter").toUpperCase();
    return `Only sentence ${from} → sentence ${to} attention is drawn (sentence ${from}'s tokens attending to sentence ${to}'s).`;
  },
  heads({ get }) {
    const shown = [...(get("heads") ?? [])].sort((a, b) => a - b);
    const n = get("n_heads");
    return shown.length < n ? `${shown.length === 1 ? "Head" : "Heads"} ${listed(shown.map(String))} of ${n} (0–${n - 1}) drawn.` : "";
  },
  causal: ({ get }) => (get("causal") ? causalNote(get("causal_from") ?? 0) : ""),
  included({ get }) {
    const some = (name, total, what) => {
      const chosen = get(name);
      return chosen && chosen.length < total ? `${what} ${listed(chosen.map(String))} of 0–${total - 1}` : "";
    };
    const parts = [some("include_layers", get("n_layers"), "layers"), some("include_heads", get("n_heads"), "heads")].filter(Boolean);
    return parts.length ? `Only ${parts.join("; ")}.` : "";
  },
  // A long run's head view scales its window's lines leaving these tokens out.
  aside({ get }) {
    const n = get("sink_aside");
    return n > 0 && get("long_context")
      ? `The first ${n === 1 ? "token is" : `${n} tokens are`} set aside (attention sinks): the window's largest weight is taken without them.`
      : "";
  },
  analysis: ({ get }) => get("analysis")?.note ?? "",
  // The Rollout tab in a contributions mode: what it shows, and how it differs from rollout (the title names it).
  "rollout mode": ({ get }) => ROLLOUT_SHOWN[rolloutModeOf(get)].caption,
  weigh: ({ get }) => (get("weigh_by") === "value_norm"
    ? "Weighed by value norm (Kobayashi et al. 2020): each weight is ‖αf(x)‖ = α·‖f(x)‖, the attention times the size "
      + "of what the key's value vector passes through the head; it is not bounded by 1." : ""),
};

/** The sentences under an image's title that say what state it shows (a reader of a saved
 * picture or an exported image has no controls to look at), for the view named `name`. */
export function imageCaption(context, name) {
  const adapter = VIEWS.find((v) => v.name === name);
  return (adapter?.shows ?? []).map((what) => SAYS[what](context)).filter(Boolean);
}

/** Every view, in the tabs' order of src/attnscope/widget/views.py. */
export const VIEWS = ADAPTERS;
