// The kernel's picture of a widget output: the view it is open on, drawn from the saved page's
// state (export.page_state, the state a saved page opens) by that view's own scene function, as
// SVG text. It needs no DOM: the kernel runs it in QuickJS (picture.py), so that a notebook run by
// nbclient, shown on GitHub or reopened without its kernel still shows what the widget showed.
import "./picture_runtime.js";
import { base64Decode } from "./drawing/base64.js";
import { decodeArray } from "./transport/codec.js";
import { longNumbers, neuronNumbers } from "./transport/requests.js";
import { neuronAnswer, savedAnswer, withBuffers } from "./transport/saved.js";
import { sceneToSvg, withCaption } from "./drawing/scene.js";
import { imageCaption, VIEWS } from "./views/views.js";

// Fewer and fewer lines (the head view's, each model view cell's) until the picture fits its bytes.

/** A saved answer as the views' request helpers give it: decoded numbers, {error}, or null. */
function answerOf(served, state, type, params, numbers) {
  const answer = type === "neuron" ? neuronAnswer(served.neuron, params, state) : savedAnswer(served, { type, ...params }, state);
  return answer.error ? { error: answer.error } : numbers(answer.content, answer.buffers);
}

/**
 * The open view of a saved page as SVG: {svg, width, height} or {error} (why there is none).
 * page: {json, buffers} (export.page_data) as JSON text, each buffer's data base64 or an index
 * into `binaries`; maxBytes: the largest SVG kept (a view with many lines keeps its strongest,
 * and says so in the picture).
 */
export function picture(pageText, { maxBytes = 95000, width = 900 } = {}, binaries = []) {
  const page = JSON.parse(pageText);
  // A binary part is base64 text, or (from the kernel) the index of a string of one character
  // a byte, byte b as code point b + 1 (no NUL): decoding base64 in this engine would take most
  // of the picture's time.
  const bytesOf = (data) => {
    if (typeof data !== "number") return base64Decode(data);
    const text = binaries[data];
    const bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i) - 1;
    return bytes;
  };
  const { state, served } = withBuffers(page.json, page.buffers, bytesOf, { copy: false });
  const get = (name) => state[name];
  const cache = new Map();
  const decoded = (name) => {
    if (cache.get(name)?.payload !== state[name]) cache.set(name, { payload: state[name], value: decodeArray(state[name]) });
    return cache.get(name).value;
  };
  const withoutRun = ({ result_id: _, weigh_by: __, ...params }) => params;
  const ask = (type) => (params) => answerOf(served, state, type, withoutRun(params), longNumbers);
  const context = {
    get, decoded, maskMode: false, width,
    neuronData: () => (served.neuron
      ? answerOf(served, state, "neuron", { layer: get("layer"), head: get("neuron_head"), query: get("neuron_query") }, neuronNumbers)
      : { error: "This output holds no queries and keys." }),
    long: { row: ask("attention_rows"), tile: ask("attention_tile"), window: ask("attention_window"), tokenRows: ask("token_rows") },
  };
  const adapter = VIEWS.find((v) => v.name === state.view);
  if (!adapter) return { error: `no view named ${state.view}` };
  const dark = state.theme === "dark";
  const title = adapter.title(context);
  const caption = imageCaption(context, state.view);
  let svg = "";
  let scene = null;
  // Thinner versions of the picture, tried in turn (src/attnscope/widget/views.py, through js/transport/contract.js).
  const thinning = adapter.thinning ?? [];
  for (const thinner of thinning.length ? thinning : [{}]) {
    const drawn = adapter.picture(context, { title, ...thinner });
    if (typeof drawn === "string") return { error: drawn };
    scene = withCaption(drawn, caption);
    svg = sceneToSvg(scene, { dark, maxBytes });
    if (svg !== null && svg.length <= maxBytes) break;
  }
  if (svg === null || svg.length > maxBytes) {
    const bytes = (svg ?? sceneToSvg(scene, { dark })).length;
    // Said to a reader of a saved notebook, who can do something about it: save on another view.
    const instead = state.view === "head" ? "show fewer heads (a head's swatch)" : "switch the widget to the head view";
    return { error: `the ${adapter.label.toLowerCase()} view is too large for a notebook's picture (${Math.ceil(bytes / 1000)} kB, `
      + `over the ${Math.floor(maxBytes / 1000)} kB a picture may take): ${instead} before saving, or save the view `
      + "as SVG or PNG with its buttons" };
  }
  return { svg, width: scene.width, height: scene.height };
}
