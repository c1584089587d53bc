// The analysis tab: an analysis the kernel sent (widget.show_analysis), drawn by the layout its
// module declares (src/attnscope/analyses/tables.py): js/views/<layout>_layout.js, listed in the generated
// js/views/layout_modules.js (heatmaps, the MDS scatter, the head finder, or a layout of its own).
import { el } from "../drawing/dom.js";
import { LAYOUTS } from "./layout_modules.js";
import { declared, openHead } from "./view_adapter.js";

const NO_ANALYSIS = "No analysis yet: call widget.show_analysis(attnscope.head_stats(model, texts)).";

/** The analysis tab's state: {note, layout (its name), state (what the layout draws)}, or a line
 * saying there is none. */
function analysisState(context) {
  const analysis = context.get("analysis");
  if (!analysis?.kind) return NO_ANALYSIS;
  const name = analysis.layout ?? "heatmap";
  if (!LAYOUTS[name]) return `This page has no ${name} layout to draw ${analysis.kind} with: rebuild it (make).`;
  return { note: analysis.note, layout: name, state: LAYOUTS[name].state(analysis, context) };
}

// The analysis tab shows one layout at a time, each in a box of its own, made when first shown.
/** @param {HTMLElement} body @param {{setTraits: (values: object) => void, openText?: (text: string, textB: string|null,
 * opening?: {layer: number, head: number, query: number}) => boolean}} actions @param {(name: string) => any} get */
function createAnalysisView(body, actions, get) {
  const { setTraits, openText } = actions;
  const note = el("div", "attnscope-hint", body);
  const made = new Map(); // layout name → {box, view}
  let shownName = null;
  const component = (name) => {
    if (!made.has(name)) {
      const box = el("div", "", body);
      made.set(name, { box, view: LAYOUTS[name].create(box, { onOpenHead: openHead(setTraits, get), openText, setTraits }) });
    }
    return made.get(name);
  };
  const shown = () => {
    if (shownName === null) throw new Error("nothing drawn yet");
    return made.get(shownName).view;
  };
  return {
    update(shownState) {
      if (typeof shownState === "string") {
        note.textContent = shownState;
        for (const { box } of made.values()) box.hidden = true;
        return;
      }
      const layout = LAYOUTS[shownState.layout];
      note.textContent = [shownState.note, layout.hint(shownState.state)].filter(Boolean).join(" ");
      const { view } = component(shownState.layout);
      shownName = shownState.layout;
      for (const [name, { box }] of made) box.hidden = name !== shownName;
      view.update(shownState.state);
    },
    toSvg: (options) => shown().toSvg(options),
    toPng: (options) => shown().toPng(options),
    destroy() {
      for (const { view } of made.values()) view.destroy();
    },
  };
}

/** @type {import("./view_adapter.js").ViewAdapter} */
export const adapter = {
  ...declared("analysis"),
  create: createAnalysisView,
  draw(view, context) {
    view.update(analysisState(context));
    return "";
  },
  picture(context, options) {
    const state = analysisState(context);
    return typeof state === "string" ? state : LAYOUTS[state.layout].picture(state.state, options);
  },
  title: ({ get }) => get("model_name"),
  shows: ["analysis"],
};
