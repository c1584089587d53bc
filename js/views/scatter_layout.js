// The scatter layout: the heads laid out by MDS, coloured by behaviour (head_scatter_view.js); the
// hover shows a head's thumbnail when every head's is there (the analysis declares it needs them).
// Its colouring (behaviour or layer) is the widget's analysis_choice.color.
import { OPEN_HEAD_HINT } from "./analysis_layout.js";
import { createHeadScatterView, scatterScene } from "./head_scatter_view.js";

/** @type {import("./analysis_layout.js").AnalysisLayout} */
export const layout = {
  create: (box, { onOpenHead, setTraits }) => createHeadScatterView(box, {
    onOpenHead,
    onColor: (color) => setTraits({ analysis_choice: { color } }),
  }),
  state(analysis, { get, decoded, width }) {
    const { n_layers: nLayers, n_heads: nHeads } = analysis;
    const thumbs = get("thumbnails");
    const complete = thumbs?.data && thumbs.layers.length === nLayers && thumbs.heads.length === nHeads;
    return { nLayers, nHeads, points: Float32Array.from(analysis.points), behaviours: analysis.behaviours,
      colorBy: get("analysis_choice")?.color === "layer" ? "layer" : "behaviour",
      thumbnails: complete ? decoded("thumbnails") : null, width };
  },
  picture: (state, options) => scatterScene(state, state.colorBy, options),
  hint: () => OPEN_HEAD_HINT,
};
