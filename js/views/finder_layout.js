// The finder layout: the head finder's scatter, table and examples (head_finder_view.js), whose
// reader's choice is the widget's analysis_choice (checked by the check the analysis declares).
import { measuresState } from "./analysis_layout.js";
import { finderScene } from "./finder_plot.js";
import { createHeadFinderView } from "./head_finder_view.js";

const FINDER_HINT = "Click a head to list where it fires, double-click to open it; click a text to open it with that head. "
  + "The Analysis tab brings you back.";

/** @type {import("./analysis_layout.js").AnalysisLayout} */
export const layout = {
  create: (box, { onOpenHead, openText, setTraits }) => createHeadFinderView(box, {
    onOpenHead,
    onOpenExample(doc, layer, head, query) {
      // The kernel shows that head once the text has run: the head view, or a long run's text view on the query.
      return Boolean(openText?.(doc.text, doc.text_b, { layer, head, query }));
    },
    onChoice: (choice) => setTraits({ analysis_choice: choice }),
  }),
  state: (analysis, { get }) => ({ ...measuresState(analysis), finder: analysis.finder, choice: get("analysis_choice") ?? {} }),
  picture: finderScene,
  hint: () => FINDER_HINT,
};
