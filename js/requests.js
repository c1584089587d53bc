// What the views ask the kernel (or a saved page's static model) for, over the channel, one
// cached helper for every kind: the neuron view's numbers, the long text view's rows and the map
// view's tiles. An answer is filed under what the kernel says it answers (run, layer, ...), so an
// answer for an older run or selection is never shown as current.
import { decodeArray } from "./codec.js";

/**
 * A cache of answers by key: ask(key, type, params, file) returns the answer filed under key,
 * null while it is asked for (onAnswer() is called when it comes), or {error}. file(content,
 * buffers) → [answeredKey, value]: where the answer goes.
 */
export function createRequestCache(channel, onAnswer, { limit = 64 } = {}) {
  const cache = new Map();
  const pending = new Set();
  function keep(key, value) {
    cache.delete(key);
    cache.set(key, value);
    while (cache.size > limit) cache.delete(cache.keys().next().value); // the oldest answer goes first
  }
  return {
    ask(key, type, params, file) {
      if (cache.has(key)) return cache.get(key);
      if (pending.has(key)) return null;
      pending.add(key);
      channel.request(type, params).then(({ content, buffers }) => {
        const [answered, value] = file(content, buffers);
        keep(answered, value);
      }).catch((err) => {
        keep(key, { error: err.message });
      }).finally(() => {
        pending.delete(key);
        onAnswer();
      });
      return null;
    },
  };
}

/** A "neuron" answer's five float16 buffers as the view's numbers. */
export function neuronNumbers(msg, buffers) {
  const [query, keys, products, scores, softmax] = msg.shapes.map((shape, i) =>
    decodeArray({ data: buffers[i], dtype: "float16", shape }).values);
  return { query, keys, products, scores, softmax, d: msg.d, scoreLabel: msg.score_label };
}

/** A long request's answer (rows, a tile, a window): its content with the float32 values decoded. */
export const longNumbers = (msg, buffers) => ({ ...msg, values: decodeArray({ data: buffers[0], dtype: msg.dtype, shape: msg.shape }).values });

/**
 * The neuron view's source: data() returns the numbers for the open layer, head and query, or
 * null while they are asked for, or {error}.
 * @param {{request: (type: string, params?: object) => Promise<{content: any, buffers: DataView[]}>}} channel
 * @param {(name: string) => any} get  a synced trait
 * @param {() => void} onAnswer
 */
export function createNeuronRequests(channel, get, onAnswer) {
  const requests = createRequestCache(channel, onAnswer);
  const part = () => ((get("parts") ?? []).length > 1 ? get("attention_part") : "");
  return {
    data() {
      const key = [get("result_id"), get("layer"), get("neuron_head"), get("neuron_query"), get("tokens").length, part()].join(":");
      const params = { layer: get("layer"), head: get("neuron_head"), query: get("neuron_query") };
      return requests.ask(key, "neuron", params, (msg, buffers) => {
        const answered = [msg.result_id, msg.layer, msg.head, msg.query, msg.n_queries ?? msg.n_tokens, msg.part ?? ""].join(":");
        return [answered, neuronNumbers(msg, buffers)];
      });
    },
  };
}

const rowKey = (p) => ["row", p.result_id, p.layer, p.head, p.token, p.direction].join(":");
const windowKey = (p) => ["window", p.result_id, p.layer, p.token].join(":");
const tileKey = (p) => ["tile", p.result_id, p.layer, p.head, ...p.rows, ...p.cols, p.bins, p.reduce].join(":");

/**
 * The long views' source: row(params), tile(params) and window(params) return {values, ...} for
 * exact rows, pooled tiles and the head view's window, null while asked for, or {error}; params
 * as in messages.py ("attention_rows", "attention_tile", "attention_window"), with the run's result_id.
 */
export function createLongRequests(channel, onAnswer) {
  const requests = createRequestCache(channel, onAnswer, { limit: 96 });
  // The run's id is in the key, not in the request: the kernel answers with the run it has.
  const ask = (key, type) => (params) => {
    const { result_id: run, ...sent } = params;
    return requests.ask(key({ result_id: run, ...sent }), type, sent, (msg, buffers) => [key(msg), longNumbers(msg, buffers)]);
  };
  return {
    row: ask(rowKey, "attention_rows"),
    tile: ask(tileKey, "attention_tile"),
    window: ask(windowKey, "attention_window"),
  };
}
