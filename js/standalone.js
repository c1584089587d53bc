// Standalone pages (attnscope.render_html / widget.save_html): the same views, driven by a static
// model that holds every included layer, with no kernel, no widget manager and no network.
// Layer switches read the stored layers; the neuron view computes q × k, q·k and the softmax
// here from the stored queries and keys (what the kernel does in a notebook).
import { halfToFloat } from "./codec.js";
import widget from "./widget.js";

function base64Bytes(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

function floatToHalf(value) {
  const f32 = new Float32Array([value]);
  const x = new Uint32Array(f32.buffer)[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = ((x >>> 23) & 0xff) - 127 + 15;
  const mant = x & 0x7fffff;
  if (((x >>> 23) & 0xff) === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  if (exp >= 0x1f) return sign | 0x7c00;
  if (exp <= 0) return exp < -10 ? sign : sign | ((mant | 0x800000) >> (1 - exp + 13));
  return sign | (exp << 10) | (mant >> 13);
}

function toHalfView(values) {
  const words = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) words[i] = floatToHalf(values[i]);
  return new DataView(words.buffer);
}

/** One query's computation from stored q and k: float16 DataViews, as the kernel would send. */
export function neuronAnswer(stored, request) {
  const { layer, head, query } = request;
  const slot = stored.layers.indexOf(layer);
  if (slot < 0) return { error: `Layer ${layer + 1} is not in this saved page (it holds layers ${stored.layers.map((l) => l + 1).join(", ")}).` };
  const [, nHeads, nQueries, d] = stored.shape;
  const n = stored.key_shape?.[2] ?? nQueries; // cross-attention: the keys are the encoder's tokens
  const at = (arr, count, t, k) => halfToFloat(arr.getUint16(2 * (((slot * nHeads + head) * count + t) * d + k), true));
  const q = Float32Array.from({ length: d }, (_, k) => at(stored.queries, nQueries, query, k));
  const keys = new Float32Array(n * d);
  const products = new Float32Array(n * d);
  const scores = new Float32Array(n);
  for (let j = 0; j < n; j++) {
    let dot = 0;
    for (let k = 0; k < d; k++) {
      const kv = at(stored.keys, n, j, k);
      keys[j * d + k] = kv;
      products[j * d + k] = kv * q[k];
      dot += kv * q[k];
    }
    const bias = stored.bias ? halfToFloat(stored.bias.getUint16(2 * (((slot * nHeads + head) * nQueries + query) * n + j), true)) : 0;
    scores[j] = stored.causal && j > query ? -Infinity : dot * stored.scaling[layer] + bias;
  }
  const max = Math.max(...scores);
  const exps = scores.map((s) => Math.exp(s - max));
  const total = exps.reduce((a, b) => a + b, 0);
  const softmax = exps.map((e) => e / total);
  return { d, n, nQueries, buffers: [q, keys, products, scores, softmax].map(toHalfView) };
}

/** A model with the anywidget interface over a saved state. */
export function createStaticModel(data) {
  const state = { ...data.state };
  const listeners = new Map();
  const emit = (name, ...args) => { for (const fn of listeners.get(name) ?? []) fn(...args); };
  const attention = data.attention.layers.map((layer, i) => ({
    layer, data: new DataView(base64Bytes(data.attention.data[i]).buffer), dtype: "uint8",
    shape: data.attention.shape, scale: data.attention.scale,
  }));
  const stored = data.neuron && {
    ...data.neuron,
    queries: new DataView(base64Bytes(data.neuron.queries).buffer),
    keys: new DataView(base64Bytes(data.neuron.keys).buffer),
    bias: data.neuron.bias ? new DataView(base64Bytes(data.neuron.bias).buffer) : null,
  };
  if (data.thumbnails) state.thumbnails = { ...data.thumbnails, data: new DataView(base64Bytes(data.thumbnails.data).buffer) };
  state.attention = attention[Math.max(0, data.attention.layers.indexOf(state.layer))];
  const changed = [];
  return {
    get: (name) => state[name],
    set(name, value) { state[name] = value; changed.push(name); },
    save_changes() {
      for (const name of changed.splice(0)) {
        if (name === "layer") {
          const i = data.attention.layers.indexOf(state.layer);
          if (i >= 0) { state.attention = attention[i]; emit("change:attention"); }
          else { state.error = `Layer ${state.layer + 1} is not in this saved page.`; emit("change:error"); }
        }
        if (name === "request") {
          state.error = "This is a saved page: editing the sentence needs a running notebook kernel.";
          state.result_id = state.request.id;
          emit("change:error");
          emit("change:result_id");
        }
        if (name === "view" && state.view === "model" && !state.thumbnails?.data) {
          state.error = "This saved page has no model view thumbnails.";
          emit("change:error");
        }
        emit(`change:${name}`);
      }
    },
    on(name, fn) { if (!listeners.has(name)) listeners.set(name, new Set()); listeners.get(name).add(fn); },
    off(name, fn) { listeners.get(name)?.delete(fn); },
    send(content) {
      if (content?.type !== "neuron") return;
      // Answer asynchronously, as a kernel would.
      setTimeout(() => {
        const reply = { type: "neuron", id: content.id, result_id: state.result_id, layer: content.layer,
          head: content.head, query: content.query };
        if (!stored) { emit("msg:custom", { ...reply, error: "This saved page holds no queries and keys." }, []); return; }
        const answer = neuronAnswer(stored, content);
        if (answer.error) { emit("msg:custom", { ...reply, error: answer.error }, []); return; }
        emit("msg:custom", { ...reply, d: answer.d, n_tokens: answer.n, n_queries: answer.nQueries,
          shapes: [[answer.d], [answer.n, answer.d], [answer.n, answer.d], [answer.n], [answer.n]] }, answer.buffers);
      }, 0);
    },
  };
}

export function mount(el, data) {
  return widget.render({ model: createStaticModel(data), el });
}
