// The neuron view's maths, its one definition: from what the kernel captured for one layer, head
// and query token i (widget/neuron_numbers.py: q_i, the keys, the values, ‖f_h(x_j)‖, T5's bias),
// every number the view draws. The live widget runs it on the kernel's answer, a saved page and
// the kernel's picture on the same bytes cut from what the page stores (saved.js neuronAnswer), so
// the three never differ. Why here and not in the kernel: a page computing it stores heads × T × d
// a layer; a page looking up the kernel's results would store every query's scores, softmax and
// output, heads × T² a layer (more than the attention maps themselves for most inputs).
// In float64; tests/widget/test_neuron.py checks o_i against the attention module's own per-head output.

/**
 * @typedef {ArrayLike<number>} Numbers
 * @typedef {{query: Numbers, keys: Numbers, d: number, queryIndex: number, scaling: number,
 *   causal?: boolean, bias?: Numbers | null, sink?: number | null, values?: Numbers | null,
 *   norms?: Numbers | null}} NeuronInputs
 *   query: d; keys, values: n × d (row j = key token j); bias, norms: n
 * @typedef {{products: Float64Array, scores: Float64Array, softmax: Float64Array, sinkShare: number,
 *   weighted: Float64Array | null, output: Float64Array | null, weightedNorms: Float64Array | null}} NeuronResults
 *   products, weighted: n × d; scores, softmax, weightedNorms: n; output: d
 */

/**
 * q × k_j (element-wise), the scores q·k_j · scaling + bias_j (−∞ for a key the causal mask
 * hides), α = their softmax (with a sink logit, the sink's share stays out of the row: it sums to
 * less than 1, never renormalised), α_j·v_j, the head's output o_i = Σ_j α_j v_j (before the output
 * projection) and α_j‖f_h(x_j)‖ (Kobayashi et al. 2020: what key j passes, not only its weight).
 * Without values: weighted, output and weightedNorms are null.
 * @param {NeuronInputs} inputs
 * @returns {NeuronResults}
 */
export function neuronMaths({ query, keys, d, queryIndex, scaling, causal = false, bias = null, sink = null, values = null, norms = null }) {
  const n = keys.length / d;
  const products = new Float64Array(n * d);
  const scores = new Float64Array(n);
  for (let j = 0; j < n; j++) {
    let dot = 0;
    for (let k = 0; k < d; k++) {
      const p = query[k] * keys[j * d + k];
      products[j * d + k] = p;
      dot += p;
    }
    scores[j] = causal && j > queryIndex ? -Infinity : dot * scaling + (bias ? bias[j] : 0);
  }
  const hasSink = sink !== null && sink !== undefined && Number.isFinite(sink);
  let max = hasSink ? sink : -Infinity;
  for (const s of scores) if (s > max) max = s;
  const softmax = new Float64Array(n);
  let total = hasSink ? Math.exp(sink - max) : 0;
  for (let j = 0; j < n; j++) {
    softmax[j] = Number.isFinite(scores[j]) ? Math.exp(scores[j] - max) : 0;
    total += softmax[j];
  }
  for (let j = 0; j < n; j++) softmax[j] /= total;
  const sinkShare = hasSink ? Math.exp(sink - max) / total : 0;
  if (!values) return { products, scores, softmax, sinkShare, weighted: null, output: null, weightedNorms: null };
  const weighted = new Float64Array(n * d);
  const output = new Float64Array(d);
  const weightedNorms = new Float64Array(n);
  for (let j = 0; j < n; j++) {
    for (let k = 0; k < d; k++) {
      const w = softmax[j] * values[j * d + k];
      weighted[j * d + k] = w;
      output[k] += w;
    }
    weightedNorms[j] = norms ? softmax[j] * norms[j] : Number.NaN;
  }
  return { products, scores, softmax, sinkShare, weighted, output, weightedNorms: norms ? weightedNorms : null };
}
