// anywidget entry: thin glue between the synced traits (src/attnscope/widget/attention_widget.py, listed in the
// generated js/transport/contract.js) and the views. The controls live in controls.js, the views' table in
// views.js, the neuron view's requests in requests.js. A saved page runs this same render() over
// a static model (standalone.js).
import "./widget.css";
import "./views/analysis_view.css";
import { createChannel } from "./transport/channel.js";
import { decodeArray } from "./transport/codec.js";
import { createGrowing } from "./transport/growing.js";
import { TRAITS } from "./transport/contract.js";
import { createControls } from "./controls/controls.js";
import { el } from "./drawing/dom.js";
import { createLayerRequests, createLongRequests, createNeuronRequests, createWeighingRequests } from "./transport/requests.js";
import { resolveTheme, watchJupyterTheme } from "./drawing/theme.js";
import { imageCaption, VIEWS } from "./views/views.js";
import { outputShown } from "./views/output_tokens.js";

// After the head view draws, the next layer around it is asked for once the page has been
// quiet this long (a burst of redraws, as while hovering, asks once).
const PREFETCH_DELAY_MS = 120;

/**
 * The widget's picture outputs (picture.py) are for where no live view runs: while this view is
 * on screen they are hidden, output and all (they may arrive after it renders); shown again when
 * it goes. Returns the function that stops.
 */
function hidePictures(host, pictureId) {
  if (!pictureId || typeof document === "undefined") return () => {};
  const hidden = new Map(); // element → its display before
  const area = host.closest(".jp-OutputArea, .output, .jp-Cell-outputArea") ?? document.body;
  function hide() {
    for (const picture of area.querySelectorAll(`.attnscope-picture-${CSS.escape(pictureId)}`)) {
      const output = picture.closest(".jp-OutputArea-child, .output_area") ?? picture;
      if (hidden.has(output)) continue;
      hidden.set(output, output.style.display);
      output.style.display = "none";
    }
  }
  hide();
  // Changes inside this view (thousands of tokens restyled) are not outputs arriving: skipped.
  const observer = typeof MutationObserver === "undefined" ? null
    : new MutationObserver((records) => { if (records.some((r) => !host.contains(r.target))) hide(); });
  observer?.observe(area, { childList: true, subtree: true });
  return () => {
    observer?.disconnect();
    for (const [output, display] of hidden) output.style.display = display;
  };
}

/**
 * @param {{model: any, el: HTMLElement, page?: boolean, fit?: boolean}} props  anywidget's model
 *   and the output's element; page: a saved page (standalone.js), where the text cannot be rerun;
 *   fit: the page fills a box of fixed size (a slide's iframe), which the open view fits into
 * @returns {() => void} cleanup
 */
function render({ model, el: host, page = false, fit = false }) {
  // A generation's lists as this view has grown them (growing.js); its channel is made below.
  const growing = createGrowing(model, () => channel.request("growing_lists"), () => drawSoon());
  const get = growing.get;
  const root = el("div", "attnscope-root", host);
  root.classList.toggle("attnscope-fit", fit);
  let frame = null;
  let soon = false; // a draw is queued for the end of this task (drawSoon)
  let setting = false; // the page is writing traits itself (setTraits)
  let stopping = false; // Stop was pressed and the kernel still generates (its steps in flight are not drawn)

  // now: draw in this event, not at the next frame (a selection asks the kernel for its row while
  // the click is handled: up to a frame sooner).
  function setTraits(values, { now = false } = {}) {
    setting = true; // the page's own writes draw as below, not as the kernel's do (drawSoon)
    try {
      for (const [name, value] of Object.entries(values)) model.set(name, value);
    } finally {
      setting = false;
    }
    model.save_changes();
    if (!now) schedule();
    else {
      if (frame !== null) cancelAnimationFrame(frame);
      draw();
    }
  }
  const controls = createControls(root, VIEWS, {
    setTraits,
    sendRequest(request) { setTraits({ request }); },
    saveImage: downloadImage,
    redraw: schedule,
    // The kernel's generation (attnscope.generate): it keeps the tokens shown when Stop was pressed,
    // and the page draws none of the steps already on their way (drawSoon).
    stop: () => {
      stopping = true;
      channel.notify("stop", { shown: outputShown(get) });
    },
  }, { page });
  const views = new Map(VIEWS.map((adapter) => {
    const body = el("div", "attnscope-body", root);
    const openText = (text, textB, opening) => controls.editor.open(text, textB, opening);
    // A view's own request to the kernel (the head view's knockout), through the channel made below.
    const ask = (type, params) => channel.request(type, params);
    return [adapter.name, { adapter, body, view: adapter.create(body, { setTraits, redraw: schedule, openText, ask, page }, get) }];
  }));

  // The kernel asks the view for images (save_image); the view asks the kernel for neuron numbers.
  const channel = createChannel(model, {
    image: async ({ format }) => ({ content: { format }, buffers: [(await imageBytes(format)).buffer] }),
  });
  growing.apply();
  const neuron = createNeuronRequests(channel, get, drawSoon);
  const long = createLongRequests(channel, drawSoon);
  // A Weigh by switch the kernel has not answered yet: the views that draw the open layer draw the
  // layer asked for ahead under that weighing, and its scale (createWeighingRequests).
  const weighing = createWeighingRequests(channel, get, drawSoon);
  const OVERLAID = { attention: ["attention", "one_scale"], thumbnails: ["attention", "one_scale", "thumbnails"] };
  // The traits as a view that draws `draws` sees them: the weighing asked for ahead where it waits.
  const shownAs = (draws) => (name) => {
    if (OVERLAID[draws]?.includes(name)) {
      const ahead = weighing.pending(draws);
      if (ahead) return ahead[name];
    }
    return get(name);
  };
  const shownGet = shownAs("attention");
  // What a view draws of a short run (views.py: draws): "attention" (the open layer), "thumbnails", ...
  const drawsOf = (name) => views.get(name)?.adapter.draws ?? "";
  const decodedCache = new Map(); // trait name → {payload, value}: decode each payload once
  function decoded(name) {
    // Each payload as the views that draw it see it (the layer requests file the open layer too).
    const payload = shownAs(name === "thumbnails" ? "thumbnails" : "attention")(name);
    const ahead = weighing.decoded(payload);
    if (ahead !== undefined) return ahead;
    const hit = decodedCache.get(name);
    if (hit?.payload === payload) return hit.value;
    const value = decodeArray(payload);
    decodedCache.set(name, { payload, value });
    return value;
  }
  // The layers around the open one, asked for while a view that draws the open layer's attention
  // (draws "attention") is open and the page idle.
  let closed = false;
  const layers = createLayerRequests(channel, shownGet, decoded, drawSoon, () => !closed && drawsOf(get("view")) === "attention");
  let prefetchTimer = 0;
  function prefetchLayersSoon() {
    clearTimeout(prefetchTimer);
    prefetchTimer = setTimeout(() => {
      const draws = drawsOf(get("view"));
      // The kernel answers in turn: the two layers nearest the open one (the likeliest switch),
      // then the other weighing, then the further layers as those come. A saved page keeps the
      // weighing it was saved with.
      if (draws === "attention") layers.prefetch();
      if (!page && (draws === "attention" || draws === "thumbnails")) weighing.prefetch(draws);
    }, PREFETCH_DELAY_MS);
  }
  // The views fit the width they are given (and in a box of fixed size, its height) and follow
  // the output's resizing.
  let width = 0;
  let height = 0;
  const resizes = typeof ResizeObserver === "undefined" ? null : new ResizeObserver(() => {
    if (root.clientWidth !== width || (fit && root.clientHeight !== height)) schedule();
  });
  resizes?.observe(root);
  // The open layer under the other weighing, decoded (the head view works out its lines ahead).
  const aheadLayer = () => {
    const ahead = weighing.ahead();
    return ahead ? weighing.decoded(ahead.attention) : null;
  };
  const context = (body, name = get("view")) => ({ get: shownAs(drawsOf(name)), decoded, layerData: layers.data, aheadLayer, neuronData: neuron.data, long, maskMode: controls.maskMode,
    width: body?.clientWidth ?? 0, height: fit ? body?.clientHeight ?? 0 : 0 });

  // Image export: the open view's scene, drawn as SVG or (on a canvas, as on screen) as PNG.
  async function imageBytes(format) {
    const open = views.get(get("view"));
    if (!open) throw new Error(`no image of the ${get("view")} view`);
    const options = { title: open.adapter.title(context()), caption: imageCaption(context(), open.adapter.name),
      dark: root.classList.contains("attnscope-dark") };
    return format === "svg" ? new TextEncoder().encode(open.view.toSvg(options)) : open.view.toPng(options);
  }
  async function downloadImage(format) {
    try {
      const bytes = await imageBytes(format);
      const url = URL.createObjectURL(new Blob([bytes], { type: format === "svg" ? "image/svg+xml" : "image/png" }));
      const link = el("a", "", root);
      link.href = url;
      link.download = `attnscope-${get("view")}.${format}`;
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (err) {
      controls.showError(`cannot save the image: ${err.message}`);
    }
  }

  function draw() {
    frame = null;
    const dark = resolveTheme(get("theme"), host) === "dark";
    root.classList.toggle("attnscope-dark", dark);
    // A saved page is dark round a dark widget (white round a dark card read as half a theme): set
    // on its <html> here, where an html:has(...) rule had every restyle of a notebook's page look
    // through the whole document (16 ms a recalculation beside 8,160 tokens in JupyterLab).
    if (page) host.ownerDocument.documentElement.classList.toggle("attnscope-dark-page", dark);
    controls.update(get);
    const open = views.get(get("view")) ?? views.get("head");
    for (const { body } of views.values()) body.hidden = body !== open.body;
    width = root.clientWidth;
    height = root.clientHeight;
    if (controls.editor.computing()) {
      // Stale data (an older edit) is never drawn: the last good drawing stays.
      controls.setStatus("computing…");
      return;
    }
    try {
      const status = open.adapter.draw(open.view, context(open.body, open.adapter.name));
      controls.setStatus(status);
      if (!status) sayPainted(); // drawn whole: nothing asked for is still on its way ("computing…")
      if (open.adapter.draws === "attention" || open.adapter.draws === "thumbnails") prefetchLayersSoon();
    } catch (err) {
      controls.setStatus("");
      controls.showError(err.message);
      sayPainted();
    }
  }
  // Two frames after the first drawing that is whole (the text view's selected row shaded, not
  // "computing…"), it is laid out and painted: a generation makes its first token then. Sent after
  // the first drawing instead, the token came while the row's answer was shaded (8,160 tokens: its
  // trip and drawing 51 + 52 ms, where a step's are 1 + 14 ms).
  let paintedSaid = false;
  function sayPainted() {
    if (paintedSaid) return;
    paintedSaid = true;
    requestAnimationFrame(() => requestAnimationFrame(() => { if (!closed) channel.notify("painted"); }));
  }
  // The page's own events (a resize, a theme change) draw once per animation frame.
  function schedule() {
    if (frame === null && !soon) frame = requestAnimationFrame(draw);
  }
  // What the kernel sends (a message's traits, an answer) is drawn in the task that brings it,
  // once, after all of it is in: the next frame then shows it, where a frame callback would wait
  // for that frame and show it in the one after (up to a frame later: an edit, a layer switch).
  function drawSoon() {
    // After Stop, the steps the kernel made while the click travelled are not drawn: they showed
    // for 100-250 ms, then went when the stopped run came back cut to what the page showed.
    if (stopping && model.get("generating")) return;
    stopping = false;
    if (soon || setting) return;
    soon = true;
    queueMicrotask(() => {
      soon = false;
      if (frame !== null) cancelAnimationFrame(frame);
      draw();
    });
  }
  const events = TRAITS.map((name) => `change:${name}`);
  for (const event of events) model.on(event, drawSoon);
  const stopWatchingTheme = watchJupyterTheme(schedule);
  channel.notify("rendered"); // the kernel's save_image needs a view that can answer
  const stopHidingPictures = hidePictures(host, get("picture_id"));
  draw();

  return () => {
    closed = true;
    for (const event of events) model.off(event, drawSoon);
    channel.destroy();
    growing.destroy();
    clearTimeout(prefetchTimer);
    stopHidingPictures();
    resizes?.disconnect();
    stopWatchingTheme();
    controls.destroy();
    if (frame !== null) cancelAnimationFrame(frame);
    for (const { view } of views.values()) view.destroy();
    root.remove();
  };
}

export default { render };
