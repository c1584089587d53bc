// The analysis tab: an analysis the kernel sent (widget.show_analysis) as layer × head heatmaps
// (head_map_view.js), the heads' MDS scatter (head_scatter_view.js) or the head finder
// (head_finder_view.js), whose reader's choice is the widget's finder_choice.
import { el } from "./dom.js";
import { createHeadFinderView, finderScene } from "./head_finder_view.js";
import { createHeadMapView, heatmapImage } from "./head_map_view.js";
import { createHeadScatterView, scatterScene } from "./head_scatter_view.js";
import { declared, openHead } from "./view_adapter.js";

const NO_ANALYSIS = "No analysis yet: call widget.show_analysis(attnscope.head_stats(model, texts)).";

// JSON has no NaN or infinity: the kernel sends a missing value as null and ±∞ as "inf" / "-inf"
// (payloads.json_number).
const analysisNumber = (v) => (v === null ? NaN : v === "inf" ? Infinity : v === "-inf" ? -Infinity : v);

// Each analysis payload's measures decoded once: the finder keeps its choices while they stand.
const decodedMeasures = new WeakMap();
function measuresOf(analysis) {
  if (!decodedMeasures.has(analysis)) {
    decodedMeasures.set(analysis, analysis.measures.map((m) => ({ key: m.key, label: m.label, max: m.max,
      values: Float32Array.from(m.values, analysisNumber), ...(m.categories ? { categories: m.categories } : {}),
      ...(m.integer ? { integer: true } : {}) })));
  }
  return decodedMeasures.get(analysis);
}

/** The analysis tab's state: {note, kind ("heatmap", "scatter" or "finder"), state}, or a line
 * saying there is none. The finder's state carries finder_choice as `choice`. */
function analysisState({ get, decoded, width }) {
  const analysis = get("analysis");
  if (!analysis?.kind) return NO_ANALYSIS;
  const { n_layers: nLayers, n_heads: nHeads } = analysis;
  if (analysis.kind === "head_distances") {
    const thumbs = get("thumbnails");
    // The scatter's hover shows a head's thumbnail when every head's is there.
    const complete = thumbs?.data && thumbs.layers.length === nLayers && thumbs.heads.length === nHeads;
    return { note: analysis.note, kind: "scatter", state: { nLayers, nHeads, points: Float32Array.from(analysis.points),
      behaviours: analysis.behaviours, colorBy: "behaviour", thumbnails: complete ? decoded("thumbnails") : null, width } };
  }
  const measures = measuresOf(analysis);
  const state = { nLayers, nHeads, measures, measure: analysis.measure, ...(analysis.columns ? { columns: analysis.columns } : {}) };
  if (analysis.finder) {
    return { note: analysis.note, kind: "finder", state: { ...state, finder: analysis.finder, choice: get("finder_choice") ?? {} } };
  }
  return { note: analysis.note, kind: "heatmap", state };
}

// What the screen adds to an analysis's note (its pictures carry the note alone).
const OPEN_HEAD_HINT = "Click a head to open it.";
const FINDER_HINT = "Click a head to list where it fires, double-click to open it; click a text to open it with that head. "
  + "The Analysis tab brings you back.";

// The analysis tab shows one of three views, by the kind of analysis the kernel sent.
/** @param {HTMLElement} body @param {{setTraits: Function, openText?: Function}} actions @param {Function} get */
function createAnalysisView(body, actions, get) {
  const { setTraits, openText } = actions;
  const note = el("div", "attnscope-hint", body);
  const boxes = { heatmap: el("div", "", body), scatter: el("div", "", body), finder: el("div", "", body) };
  const heatmap = createHeadMapView(boxes.heatmap, { onOpenHead: openHead(setTraits, get) });
  const scatter = createHeadScatterView(boxes.scatter, { onOpenHead: openHead(setTraits, get) });
  const finder = createHeadFinderView(boxes.finder, {
    onOpenHead: openHead(setTraits, get),
    onOpenExample(doc, layer, head, query) {
      // The kernel shows that head once the text has run: the head view, or a long run's text view on the query.
      return Boolean(openText?.(doc.text, doc.text_b, { layer, head, query }));
    },
    onChoice: (choice) => setTraits({ finder_choice: choice }),
  });
  let kind = "heatmap";
  const shown = () => ({ heatmap, scatter, finder })[kind];
  return {
    update(shownState) {
      if (typeof shownState === "string") {
        note.textContent = shownState;
        for (const box of Object.values(boxes)) box.hidden = true;
        return;
      }
      kind = shownState.kind;
      const hint = kind === "finder" ? FINDER_HINT : shownState.state.columns ? "" : OPEN_HEAD_HINT; // kinds of token open nothing
      note.textContent = [shownState.note, hint].filter(Boolean).join(" ");
      for (const [name, box] of Object.entries(boxes)) box.hidden = name !== kind;
      ({ heatmap, scatter, finder })[kind].update(shownState.state);
    },
    toSvg: (options) => shown().toSvg(options),
    toPng: (options) => shown().toPng(options),
    destroy() {
      heatmap.destroy();
      scatter.destroy();
      finder.destroy();
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
    if (state.kind === "finder") return finderScene(state.state, options);
    return state.kind === "scatter" ? scatterScene(state.state, "behaviour", options) : heatmapImage(state.state, options);
  },
  title: ({ get }) => get("model_name"),
  shows: ["analysis"],
};
