// The heatmap layout: each measure of an analysis as a layer × head heatmap (head_map_view.js), or
// layers × the analysis's own columns (value_flow's kinds of token), which open no head. The
// measure shown is the widget's analysis_choice.measure (the reader's), else the analysis's own.
import { measuresState, OPEN_HEAD_HINT } from "./analysis_layout.js";
import { createHeadMapView, heatmapImage } from "./head_map_view.js";

/** @type {import("./analysis_layout.js").AnalysisLayout} */
export const layout = {
  create: (box, { onOpenHead, setTraits }) => createHeadMapView(box, {
    onOpenHead,
    onMeasure: (measure) => setTraits({ analysis_choice: { measure } }),
  }),
  state: (analysis, { get }) => {
    const state = measuresState(analysis);
    const chosen = get("analysis_choice")?.measure;
    return state.measures.some((m) => m.key === chosen) ? { ...state, measure: chosen } : state;
  },
  picture: heatmapImage,
  hint: (state) => (state.columns ? "" : OPEN_HEAD_HINT),
};
