// How layers and heads are named on screen, in pictures and in messages: counted from 0, as in
// the Python API, Hugging Face's attentions[i], BertViz and TransformerLens. One place, matching
// src/attnscope/labels.py (js/drawing/labels.test.js checks both against js/transport/contract.js's examples).

/** Said once where a reader first meets the numbers (the layer select's tooltip). */
export const COUNTING = "Layers and heads are counted from 0, as in the Python API and Hugging Face's attentions[i].";

/** A head's short name, "layer-head": "7-9" for layer 7, head 9 (the DataFrames' `label`). */
export function headLabel(layer, head) {
  return `${layer}-${head}`;
}

/** A head's name in a sentence: "layer 7, head 9". */
export function headName(layer, head) {
  return `layer ${layer}, head ${head}`;
}

/** A row of the layers × heads grids, a layer option: "Layer 7". */
export const layerText = (layer) => `Layer ${layer}`;

/** A column of the layers × heads grids, a head option: "Head 9". */
export const headText = (head) => `Head ${head}`;
