// Saved pages (widget.save_html, attnscope.render_html, html_action="return", the CLI,
// widget.slide): the widget's own render() over a static model that holds the widget's state,
// with no kernel, no widget manager and no network (export.page_state says what is saved).
// The model does in the kernel's place what a page can need: a layer switch serves the saved
// layer, a "neuron" request is answered from the stored queries and keys, and a change that needs
// the model says so.
import { createResponder } from "./transport/channel.js";
import { needsLiveWidget, neuronAnswer, savedAnswer, withBuffers } from "./transport/saved.js";
import widget from "./widget.js";

export { neuronAnswer, savedAnswer, withBuffers };

/** A model with the anywidget interface over a saved page's state (export.page_state). */
export function createStaticModel(page) {
  const { state: saved, served, traits } = withBuffers(page.json, page.buffers);
  const state = { ...saved };
  const listeners = new Map();
  const emit = (name, ...args) => { for (const fn of listeners.get(name) ?? []) fn(...args); };
  const before = new Map(); // trait → its value before the changes not yet saved

  // What the kernel would do on a change the view makes, by the trait's page behaviour (contract.py).
  const onChange = {
    view: () => {},
    layer(name) {
      // A long run's page holds answers, not layers: the views ask for the new layer's, which the
      // page gives where it holds them (a generation's steps) and says it cannot where not.
      if (!served.attention) return;
      const payload = served.attention[String(state.layer)];
      if (payload) { state.attention = payload; emit("change:attention"); return; }
      state.error = `Layer ${state.layer} is not in this saved page (it holds layers ${Object.keys(served.attention).join(", ")}).`;
      state[name] = before.get(name);
      emit("change:error");
    },
    edit() {
      state.error = needsLiveWidget("Editing the sentence");
      state.result_id = state.request.id; // answered, as the kernel answers a failed edit
      emit("change:error");
      emit("change:result_id");
    },
    fixed(name) {
      state.error = needsLiveWidget(`Changing ${traits[name]?.label ?? name}`);
      state[name] = before.get(name);
      emit("change:error");
    },
  };
  const respond = createResponder(
    {
      // The kernel's answer for a saved layer; the page's others are not here to hold.
      layer(request) {
        // It keeps the weighing it was saved with (the other's numbers are not in it).
        if (request.weigh_by !== undefined && request.weigh_by !== state.weigh_by) return { error: needsLiveWidget("Weighing otherwise") };
        const payload = served.attention?.[String(request.layer)];
        if (!payload) return { error: `Layer ${request.layer} is not in this saved page.` };
        const { data, ...content } = payload;
        return { content, buffers: [data] };
      },
      // The layer's store, as the kernel answers it (the whole saved store: it holds every saved layer).
      neuron(request) {
        if (!served.neuron) return { error: "This saved page holds no queries and keys." };
        const { n_queries, part } = served.neuron;
        return { content: { store: served.neuron, paths: [], layer: request.layer, result_id: state.result_id, n_queries, part,
          shown: state.compared_model ? state.compare_shown : "" }, buffers: [] };
      },
      attention_rows: (request) => savedAnswer(served, request, state),
      attention_tile: (request) => savedAnswer(served, request, state),
      attention_window: (request) => savedAnswer(served, request, state),
      token_rows: (request) => savedAnswer(served, request, state),
    },
    (content, buffers) => emit("msg:custom", content, buffers),
  );

  return {
    get: (name) => state[name],
    set(name, value) {
      if (!before.has(name)) before.set(name, state[name]);
      state[name] = value;
    },
    save_changes() {
      for (const name of [...before.keys()]) {
        onChange[traits[name]?.page ?? "fixed"](name);
        emit(`change:${name}`);
      }
      before.clear();
    },
    on(name, fn) { if (!listeners.has(name)) listeners.set(name, new Set()); listeners.get(name).add(fn); },
    off(name, fn) { listeners.get(name)?.delete(fn); },
    send: respond,
  };
}

/** options.fit: the page fills a box of fixed size (widget.slide's iframe), which the view fits into. */
export function mount(el, page, { fit = false } = {}) {
  return widget.render({ model: createStaticModel(page), el, page: true, fit });
}
