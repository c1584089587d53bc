// What the views ask the kernel (or a saved page's static model) for, over the channel:
// the neuron view's numbers, one query at a time, as float16 buffers.
import { decodeArray } from "./codec.js";

/**
 * The neuron view's source: data() returns the numbers for the open layer, head and query, or
 * null while they are asked for (onAnswer() is called when they come), or {error}.
 * @param {{request: (type: string, params?: object) => Promise<{content: any, buffers: DataView[]}>}} channel
 * @param {(name: string) => any} get  a synced trait
 * @param {() => void} onAnswer
 */
export function createNeuronRequests(channel, get, onAnswer) {
  const cache = new Map();
  const pending = new Set();
  const part = () => ((get("parts") ?? []).length > 1 ? get("attention_part") : "");

  return {
    data() {
      const key = [get("result_id"), get("layer"), get("neuron_head"), get("neuron_query"), get("tokens").length, part()].join(":");
      if (cache.has(key)) return cache.get(key);
      if (pending.has(key)) return null;
      pending.add(key);
      const params = { layer: get("layer"), head: get("neuron_head"), query: get("neuron_query") };
      channel.request("neuron", params).then(({ content: msg, buffers }) => {
        const [query, keys, products, scores, softmax] = msg.shapes.map((shape, i) =>
          decodeArray({ data: buffers[i], dtype: "float16", shape }).values);
        // Filed under what the kernel answered, so an answer for an older run is never shown as current.
        const answered = [msg.result_id, msg.layer, msg.head, msg.query, msg.n_queries ?? msg.n_tokens, msg.part ?? ""].join(":");
        cache.set(answered, { query, keys, products, scores, softmax, d: msg.d, scoreLabel: msg.score_label });
      }).catch((err) => {
        cache.set(key, { error: err.message });
      }).finally(() => {
        pending.delete(key);
        onAnswer();
      });
      return null;
    },
  };
}
