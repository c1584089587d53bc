// The analysis tab: an analysis the kernel sent (widget.show_analysis) as layer × head heatmaps
// (head_map_view.js) or the heads' MDS scatter (head_scatter_view.js).
import { el } from "./dom.js";
import { createHeadMapView, heatmapImage } from "./head_map_view.js";
import { createHeadScatterView, scatterScene } from "./head_scatter_view.js";
import { declared, openHead } from "./view_adapter.js";

const NO_ANALYSIS = "No analysis yet: call widget.show_analysis(attnscope.head_stats(model, texts)).";

// JSON has no NaN or infinity: the kernel sends a missing value as null and ±∞ as "inf" / "-inf"
// (payloads.json_number).
const analysisNumber = (v) => (v === null ? NaN : v === "inf" ? Infinity : v === "-inf" ? -Infinity : v);

/** The analysis tab's state: {note, scatter, state} for the heatmap or the MDS scatter, or a line
 * saying there is none. */
function analysisState({ get, decoded, width }) {
  const analysis = get("analysis");
  if (!analysis?.kind) return NO_ANALYSIS;
  const { n_layers: nLayers, n_heads: nHeads } = analysis;
  if (analysis.kind === "head_distances") {
    const thumbs = get("thumbnails");
    // The scatter's hover shows a head's thumbnail when every head's is there.
    const complete = thumbs?.data && thumbs.layers.length === nLayers && thumbs.heads.length === nHeads;
    return { note: analysis.note, scatter: true, state: { nLayers, nHeads, points: Float32Array.from(analysis.points),
      behaviours: analysis.behaviours, colorBy: "behaviour", thumbnails: complete ? decoded("thumbnails") : null, width } };
  }
  const measures = analysis.measures.map((m) => ({ key: m.key, label: m.label, max: m.max,
    values: Float32Array.from(m.values, analysisNumber), ...(m.categories ? { categories: m.categories } : {}) }));
  return { note: analysis.note, scatter: false, state: { nLayers, nHeads, measures, measure: analysis.measure } };
}

// What the screen adds to an analysis's note (its pictures carry the note alone).
const OPEN_HEAD_HINT = "Click a head to open it.";

// The analysis tab shows one of two views, by the kind of analysis the kernel sent.
function createAnalysisView(body, { setTraits }, get) {
  const note = el("div", "attnscope-hint", body);
  const heatmapBox = el("div", "", body);
  const scatterBox = el("div", "", body);
  const heatmap = createHeadMapView(heatmapBox, { onOpenHead: openHead(setTraits, get) });
  const scatter = createHeadScatterView(scatterBox, { onOpenHead: openHead(setTraits, get) });
  const shown = () => (scatterBox.hidden ? heatmap : scatter);
  return {
    update(shownState) {
      if (typeof shownState === "string") {
        note.textContent = shownState;
        heatmapBox.hidden = scatterBox.hidden = true;
        return;
      }
      note.textContent = [shownState.note, OPEN_HEAD_HINT].filter(Boolean).join(" ");
      heatmapBox.hidden = shownState.scatter;
      scatterBox.hidden = !shownState.scatter;
      (shownState.scatter ? scatter : heatmap).update(shownState.state);
    },
    toSvg: (options) => shown().toSvg(options),
    toPng: (options) => shown().toPng(options),
    destroy() {
      heatmap.destroy();
      scatter.destroy();
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
    if (typeof state === "string") return state;
    return state.scatter ? scatterScene(state.state, "behaviour", options) : heatmapImage(state.state, options);
  },
  title: ({ get }) => get("model_name"),
  shows: ["analysis"],
};
