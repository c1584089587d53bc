// A saved page's state (export.page_state) and the kernel's answers it holds, read without a
// DOM: the saved page's static model (standalone.js) and the kernel's picture of a view
// (picture.js) both use these.
import { base64Decode } from "../drawing/base64.js";

// A saved page (a file, the iframe of a slide) is a copy of the widget with no model to rerun:
// what needs the model is said to need the live widget, never a kernel (one may well be running
// beside a slide, and a slide still cannot reach it).
export const SAVED_COPY_NOTE = "A saved copy of the widget: edit the text in the live widget.";
export const SAVED_COPY_TITLE = "This saved copy cannot rerun the model: edit the text in the live widget, in the notebook.";

/** "<what> needs the live widget: this saved copy cannot rerun the model." */
export const needsLiveWidget = (what) => `${what} needs the live widget: this saved copy cannot rerun the model.`;

/** The page's JSON with each binary part back at its path, as a DataView (what anywidget gives);
 * bytesOf(data) reads a part (base64 in a saved page). copy: false writes into `json` itself, for
 * a caller that owns it (the picture: QuickJS has no structuredClone, and a copy of 32,768 tokens'
 * state through JSON took 30 ms there). */
export function withBuffers(json, buffers, bytesOf = base64Decode, { copy = true } = {}) {
  const value = !copy ? json : globalThis.structuredClone ? structuredClone(json) : JSON.parse(JSON.stringify(json));
  for (const { path, data } of buffers) {
    let parent = value;
    for (const key of path.slice(0, -1)) parent = parent[key];
    parent[path.at(-1)] = new DataView(bytesOf(data).buffer);
  }
  return value;
}

/**
 * One layer's, head's and query's inputs of the neuron maths (float16 buffers named in
 * content.inputs, with their shapes, scaling and causal), cut from a neuron store
 * (export.neuron_store): the live view's, a layer the kernel answered, and a saved page's, every
 * layer it holds, are cut here alike, so the numbers neuron_maths.js computes are the same bytes'.
 * {content, buffers} or {error}.
 */
export function neuronAnswer(store, request, state) {
  const { layer, head, query } = request;
  const slot = store.layers.indexOf(layer);
  if (slot < 0) return { error: `Layer ${layer} is not in this saved page (it holds layers ${store.layers.join(", ")}).` };
  const [, nHeads, nQueries, d] = store.queries.shape;
  const [, nKeyHeads, n] = store.keys.shape; // cross-attention: the keys are the encoder's tokens
  if (!(head >= 0 && head < nHeads)) return { error: `head=${head} is out of range 0..${nHeads - 1}.` };
  if (!(query >= 0 && query < nQueries)) return { error: `query_index=${query} is out of range 0..${nQueries - 1}.` };
  const keyHead = Math.floor(head / (store.key_group ?? 1)); // grouped-query: the key-value head h reads
  // Each input: [stored part, offset of its first float16, count, shape].
  const parts = {
    query: [store.queries, ((slot * nHeads + head) * nQueries + query) * d, d, [d]],
    keys: [store.keys, (slot * nKeyHeads + keyHead) * n * d, n * d, [n, d]],
    bias: [store.bias, ((slot * nHeads + head) * nQueries + query) * n, n, [n]],
    values: [store.values, (slot * nKeyHeads + keyHead) * n * d, n * d, [n, d]],
    norms: [store.norms, (slot * nHeads + head) * n, n, [n]],
  };
  const inputs = ["query", "keys", "bias", "values", "norms"].filter((name) => parts[name][0]);
  const cut = ([part, start, count]) => {
    const at = part.data.byteOffset + 2 * start;
    return new DataView(part.data.buffer.slice(at, at + 2 * count));
  };
  return {
    content: { layer, head, query, d, n_tokens: n, score_label: store.score_labels[String(layer)], scaling: store.scaling[layer],
      causal: store.causal, sink: null, inputs, shapes: inputs.map((name) => parts[name][3]),
      n_queries: store.n_queries, part: store.part, shown: state.compared_model ? state.compare_shown : "", result_id: state.result_id },
    buffers: inputs.map((name) => cut(parts[name])),
  };
}

/**
 * A long run's saved answers (export._long_page_state): the kernel's own answer to a request with
 * the same parameters, or why the page cannot answer.
 */
export function savedAnswer(answers, request, state) {
  const same = (saved) => saved.type === request.type &&
    Object.entries(saved.request).every(([key, value]) => JSON.stringify(request[key]) === JSON.stringify(value));
  const found = (answers ?? []).find(same);
  if (found) return { content: { ...found.content, result_id: state.result_id }, buffers: [found.buffer] };
  const what = request.type === "attention_tile" ? "Zooming in or another layer" : "Another token, layer or direction";
  return { error: `This saved page holds layer ${state.layer}'s whole maps and the attention ${state.direction} token ${state.focus_token}. ${needsLiveWidget(what)}` };
}
