// The heatmap layout: each measure of an analysis as a layer × head heatmap (head_map_view.js), or
// layers × the analysis's own columns (value_flow's kinds of token), which open no head.
import { measuresState, OPEN_HEAD_HINT } from "./analysis_layout.js";
import { createHeadMapView, heatmapImage } from "./head_map_view.js";

/** @type {import("./analysis_layout.js").AnalysisLayout} */
export const layout = {
  create: (box, { onOpenHead }) => createHeadMapView(box, { onOpenHead }),
  state: (analysis) => measuresState(analysis),
  picture: heatmapImage,
  hint: (state) => (state.columns ? "" : OPEN_HEAD_HINT),
};
