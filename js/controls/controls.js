// The widget's controls: header (tabs, part, layer, filter, words, image buttons, status), the
// sentence editor, the head-mask bar, the notice and the error line. They read the synced state
// in update() and write back only through `actions`; they never draw attention.
import { el, labelled, select } from "../drawing/dom.js";
import { COUNTING } from "../drawing/labels.js";
import { SAVED_COPY_NOTE, SAVED_COPY_TITLE } from "../transport/saved.js";

const EDIT_DEBOUNCE_MS = 350;
// Short, so that the header keeps to one line in JupyterLab's output (the select's tooltip says more).
const FILTERS = [
  ["all", "All"],
  ["aa", "A → A"],
  ["bb", "B → B"],
  ["ab", "A → B"],
  ["ba", "B → A"],
];
/** What a widget comparing two models (compare=) draws, as the controls name it. */
export const COMPARED = [["first", "First model"], ["second", "Second model"], ["difference", "|Second − first|"]];
/** The parts of an encoder-decoder model, as the controls name them. */
// What the views draw each weight as (the weigh_by trait; engine/weighing.py).
export const WEIGHINGS = [["attention", "α"], ["value_norm", "‖αf‖"]];
export const WEIGH_TITLE = "Weigh by: attention α, or ‖αf(x)‖ = α·‖f(x)‖ (Kobayashi et al. 2020): each weight α times ‖f(x)‖, the size of what "
  + "the key's value vector passes through the head, (xW_V + b_V)W_O of that head. Tokens that take much attention "
  + "but pass small vectors ([CLS], [SEP], punctuation, a sink) fade. Drawn on one scale for every layer and head.";

export const PARTS = [["encoder", "Encoder"], ["decoder", "Decoder"], ["cross", "Cross (decoder → encoder)"]];

// What the Rollout tab rolls out through the layers (the rollout_mode trait; analyses/contributions.py).
export const ROLLOUT_MODES = [["rollout", "Rollout"], ["contributions", "ALTI contributions"],
  ["norm_contributions", "Norm contributions"]];
export const ROLLOUT_MODE_TITLE = "Rollout (Abnar & Zuidema 2020) mixes each layer's mean attention with a fixed half for "
  + "the residual; ALTI contributions (Ferrando et al. 2022) measure each token's share of the layer's output through "
  + "attention, residual and LayerNorm by the L1 proximity of what it passes to the output, norm contributions "
  + "(Kobayashi et al. 2021) by that vector's length (the kernel reruns the model for either); all are rolled out "
  + "across layers.";

/**
 * The Rollout tab's mode: a select "Rollout | ALTI contributions | Norm contributions" in `parent` (the view's own
 * options row), written as rollout_mode; a saved copy answers a change as for any setting it keeps.
 * → {control, update(get)}.
 */
export function createRolloutMode(parent, setTraits) {
  const modeSelect = select("attnscope-rollout-mode", ROLLOUT_MODES);
  const control = labelled(parent, "Show", modeSelect);
  control.title = ROLLOUT_MODE_TITLE;
  modeSelect.addEventListener("change", () => setTraits({ rollout_mode: modeSelect.value }));
  return {
    control,
    update(get) { modeSelect.value = get("rollout_mode") ?? "rollout"; },
  };
}

function checkbox(className) {
  const box = el("input", className);
  box.type = "checkbox";
  return box;
}

function button(className, parent, text) {
  const node = el("button", className, parent);
  node.type = "button";
  node.textContent = text;
  return node;
}

/**
 * @typedef {object} ControlActions
 * @property {(values: object) => void} setTraits  write synced traits (and redraw)
 * @property {(request: {id: number, text: string, text_b: string|null, open?: {layer: number, head: number, query: number}}) => void} sendRequest  an edited text
 * @property {(format: string) => void} saveImage  the SVG / PNG buttons
 * @property {() => void} redraw  a change that only the view shows (mask mode, typing)
 * @property {() => void} [stop]  the Stop button while the kernel generates (attnscope.generate)
 */

/**
 * Builds the controls in `root` for the views `[[name, label], ...]`.
 * @param {HTMLElement} root
 * @param {{name: string, label: string, modes: string[], controls: string[]}[]} views  as src/attnscope/widget/views.py
 *   declares them (js/transport/contract.js): modes ("short", "long") and the controls each uses
 * @param {ControlActions} actions
 * @param {{page?: boolean}} options  page: a saved copy (no model to rerun: the sentences are read-only, no masking)
 */
export function createControls(root, views, actions, { page = false } = {}) {
  const { setTraits } = actions;
  const header = el("div", "attnscope-header", root);
  const title = el("span", "attnscope-title", header);
  // The controls as one box: beside the title while they fit on its line (the title then cut to
  // what they leave), else on the next line whole, the title then whole above them.
  const group = el("div", "attnscope-header-controls", header);
  const tabs = el("div", "attnscope-tabs", group);
  tabs.setAttribute("role", "tablist");
  const modesOf = new Map(views.map(({ name, modes }) => [name, modes]));
  const controlsOf = new Map(views.map(({ name, controls }) => [name, controls]));
  for (const { name: value, label: text } of views) {
    const tab = button("attnscope-tab", tabs, text);
    tab.dataset.view = value;
    tab.setAttribute("role", "tab");
    tab.addEventListener("click", () => setTraits({ view: value }));
  }
  // Encoder-decoder models: which attention to show (as BertViz's Encoder / Decoder / Cross).
  const partSelect = select("attnscope-part", PARTS);
  const partControl = labelled(group, "Attention", partSelect);
  partSelect.addEventListener("change", () => setTraits({ attention_part: partSelect.value }));
  const layerSelect = el("select", "attnscope-layer");
  const layerControl = labelled(group, "Layer", layerSelect);
  layerControl.title = COUNTING;
  layerSelect.addEventListener("change", () => setTraits({ layer: Number(layerSelect.value) }));
  const filterSelect = select("attnscope-filter", FILTERS);
  filterSelect.title = "Which sentence's tokens attend to which: A → B draws sentence A's tokens attending to sentence B's.";
  const filterControl = labelled(group, "Attention", filterSelect);
  filterSelect.addEventListener("change", () => setTraits({ sentence_filter: filterSelect.value }));
  const wordsBox = checkbox("attnscope-words");
  const wordsControl = labelled(group, "Words", wordsBox);
  wordsControl.title = "Merge wordpieces into words: attention to a word is summed over its pieces, from a word averaged.";
  wordsBox.addEventListener("change", () => setTraits({ word_level: wordsBox.checked }));
  // Two models (compare=): which one the views draw, or the size of their difference.
  const compareSelect = select("attnscope-compare", COMPARED);
  const compareControl = labelled(group, "Show", compareSelect);
  compareSelect.addEventListener("change", () => setTraits({ compare_shown: compareSelect.value }));
  compareSelect.disabled = page; // a saved copy holds what was shown, not both models' runs
  const weighSelect = select("attnscope-weigh", WEIGHINGS);
  const weighControl = labelled(group, "Weigh by", weighSelect);
  weighSelect.addEventListener("change", () => setTraits({ weigh_by: weighSelect.value }));
  const exportBox = el("span", "attnscope-export", group);
  const imageButtons = ["svg", "png"].map((format) => {
    const node = button("attnscope-export-button", exportBox, format.toUpperCase());
    node.dataset.format = format;
    node.title = `Save this view as ${format.toUpperCase()}`;
    node.addEventListener("click", () => actions.saveImage(format));
    return node;
  });
  // attnscope.generate: while the kernel writes new tokens, Stop ends it between two steps.
  const stopButton = button("attnscope-stop", group, "Stop");
  stopButton.title = "Stop generating: the text on screen stays (tokens made while the click travels are dropped)";
  stopButton.hidden = true;
  stopButton.addEventListener("click", () => {
    stopButton.disabled = true; // until the kernel says it stopped (generating false)
    actions.stop?.();
  });
  const status = el("span", "attnscope-status", header);

  const editor = createEditor(root, actions, page);

  // Head masking (Michel et al.): switch heads off in the model view; the kernel reruns.
  const maskBar = el("div", "attnscope-maskbar", root);
  const maskModeBox = checkbox("attnscope-mask-mode");
  const maskModeControl = labelled(maskBar, "Click to mask heads", maskModeBox);
  const changeBox = checkbox("attnscope-show-change");
  const changeControl = labelled(maskBar, "Show change |A_masked − A|", changeBox);
  const unmask = button("attnscope-unmask", maskBar, "Unmask all");
  const maskSummary = el("span", "attnscope-mask-summary", maskBar);
  maskModeBox.addEventListener("change", actions.redraw);
  changeBox.addEventListener("change", () => setTraits({ show_change: changeBox.checked }));
  changeBox.disabled = page;
  unmask.addEventListener("click", () => setTraits({ masked_heads: [], show_change: false }));

  const notice = el("div", "attnscope-notice", root);
  const error = el("div", "attnscope-error", root);
  error.setAttribute("role", "alert");

  function syncLayers(nLayers, layer) {
    if (layerSelect.options.length !== nLayers) {
      layerSelect.replaceChildren();
      for (let l = 0; l < nLayers; l++) {
        const option = el("option", "", layerSelect);
        option.value = String(l);
        option.textContent = String(l);
      }
    }
    layerSelect.value = String(layer);
  }

  return {
    editor,
    /** Whether clicks in the model view mask heads (a view-only setting, not synced). */
    get maskMode() { return maskModeBox.checked; },
    /** Brings every control in line with the state; `get(name)` reads a synced trait. */
    update(get) {
      const view = get("view");
      const uses = (control) => (controlsOf.get(view) ?? []).includes(control);
      const parts = get("parts") ?? [];
      const masked = get("masked_heads") ?? [];
      title.textContent = get("model_name");
      title.title = get("model_name");
      const long = Boolean(get("long_context"));
      for (const tab of tabs.children) {
        tab.setAttribute("aria-selected", String(tab.dataset.view === view));
        tab.hidden = !modesOf.get(tab.dataset.view).includes(long ? "long" : "short") ||
          (tab.dataset.view === "analysis" && !get("analysis")?.kind);
      }
      syncLayers(get("n_layers"), get("layer"));
      layerControl.classList.toggle("attnscope-idle", !uses("layer"));
      filterSelect.value = get("sentence_filter");
      filterControl.hidden = get("sentence_b_start") === null;
      filterControl.classList.toggle("attnscope-idle", !uses("filter"));
      partControl.hidden = parts.length < 2;
      partControl.classList.toggle("attnscope-idle", !uses("part"));
      partSelect.value = get("attention_part") ?? "encoder";
      wordsBox.checked = Boolean(get("word_level"));
      wordsControl.classList.toggle("attnscope-idle", !uses("words"));
      wordsControl.hidden = long; // words merge the full attention, which a long run does not keep
      // Weighing needs each key's value vector: a reason instead where the run has none, and a saved
      // copy keeps the weighing it was saved with (the numbers of the other are not in it).
      const cannotWeigh = get("weigh_unavailable") ?? "";
      weighSelect.value = get("weigh_by") ?? "attention";
      weighSelect.disabled = page || Boolean(cannotWeigh);
      weighControl.title = cannotWeigh || WEIGH_TITLE;
      // Idle (its room kept, so the header does not jump between tabs) where a view draws no weights.
      weighControl.classList.toggle("attnscope-idle", !uses("weigh"));
      weighControl.hidden = Boolean(cannotWeigh) && get("weigh_by") === "attention";
      compareControl.hidden = !get("compared_model");
      compareSelect.value = get("compare_shown") ?? "first";
      compareControl.title = `Second model: ${get("compared_model") ?? ""}. |Second − first| draws each weight's `
        + "difference on one scale for every layer and head: the largest difference is the strongest line.";
      for (const node of imageButtons) node.disabled = view === "neuron" && Boolean(get("neuron_unavailable"));
      editor.update(get);
      // Masking reruns the model: not for precomputed attention (none to rerun, as the editor goes) nor a
      // saved copy; there only what the masks were is shown.
      const canMask = !page && get("editable") !== false;
      maskBar.hidden = long || !((uses("mask mode") && canMask) || (uses("masks") && masked.length > 0));
      maskModeControl.hidden = !uses("mask mode") || !canMask;
      changeBox.checked = Boolean(get("show_change"));
      changeControl.hidden = masked.length === 0;
      unmask.hidden = masked.length === 0 || page;
      maskSummary.textContent = get("mask_summary") ?? "";
      const generating = !page && Boolean(get("generating"));
      if (!generating) stopButton.disabled = false;
      // A generation's header keeps the room of its Stop button and of its status ("computing…"
      // at every step until the row comes), running or not: the header does not reflow as the
      // run starts, steps and ends (a long title wrapped and unwrapped, the view jumping a line).
      header.classList.toggle("attnscope-generation", !page && (get("output_start") ?? -1) >= 0);
      stopButton.hidden = !generating;
      notice.textContent = get("notice");
      notice.hidden = !get("notice");
      error.textContent = get("error");
      error.hidden = !get("error");
    },
    setStatus(text) { status.textContent = text; },
    showError(message) {
      error.textContent = `attnscope cannot draw this data: ${message}`;
      error.hidden = false;
    },
    destroy() { editor.destroy(); },
  };
}

/** A text as a one-line field shows it: each line break a space (the field would drop it and glue
 * the lines' words), position for position. */
export const asOneLine = (text) => (text ?? "").replace(/[\r\n]/g, " ");

/**
 * The text an edit of the one-line field means: the user's change, between what is unchanged
 * before and after it, and the original text (its line breaks) around it. A text sent back
 * unedited is the original, so an edit elsewhere never turns its line breaks into spaces.
 * @param {string} original  the text as run
 * @param {string} edited  the field's value (asOneLine(original), edited)
 */
export function editedText(original, edited) {
  const shown = asOneLine(original);
  if (shown === edited) return original;
  let start = 0;
  const most = Math.min(shown.length, edited.length);
  while (start < most && shown[start] === edited[start]) start++;
  let end = 0;
  while (end < most - start && shown[shown.length - 1 - end] === edited[edited.length - 1 - end]) end++;
  return original.slice(0, start) + edited.slice(start, edited.length - end) + original.slice(original.length - end);
}

/**
 * The sentence editor: edits are sent as a `request` after a pause in typing (or on Enter), each
 * with a new id, so the view knows which answer is current and never overwrites what is typed.
 */
function createEditor(root, actions, page) {
  const box = el("div", "attnscope-editor", root);
  const inputA = el("input", "attnscope-text");
  inputA.type = "text";
  inputA.setAttribute("aria-label", "Sentence A");
  const inputB = el("input", "attnscope-text");
  inputB.type = "text";
  inputB.setAttribute("aria-label", "Sentence B");
  labelled(box, "Sentence", inputA);
  const sentenceB = labelled(box, "Sentence B", inputB);
  if (page) {
    // A saved copy (a file, a slide) has no model to rerun, whether or not a kernel runs beside
    // it: the text is shown as it was run, and the note says where it can be edited.
    for (const input of [inputA, inputB]) {
      input.readOnly = true;
      input.title = SAVED_COPY_TITLE;
    }
    el("span", "attnscope-hint attnscope-page-note", box).textContent = SAVED_COPY_NOTE;
  }
  let lastSentId = 0;
  let timer = null;
  let waiting = false; // typed while an edit was being computed: sent when that one is answered
  let state = null; // the `get` of the last update
  const inFlight = () => state !== null && lastSentId > state("result_id");

  // One edit at a time: a burst of typing on a long text would otherwise queue a run per pause,
  // each stale before it starts. What is typed meanwhile goes as one edit, the newest text.
  function send() {
    clearTimeout(timer);
    timer = null;
    if (inFlight()) {
      waiting = true;
      return;
    }
    waiting = false;
    lastSentId = Math.max(lastSentId, state("result_id")) + 1;
    const encoderDecoder = (state("parts") ?? []).length > 1;
    const hasB = state("text_b") !== null || (encoderDecoder && inputB.value.trim() !== "");
    actions.sendRequest({ id: lastSentId, text: editedText(shownA, inputA.value), text_b: hasB ? editedText(shownB, inputB.value) : null });
  }
  for (const input of [inputA, inputB]) {
    input.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(send, EDIT_DEBOUNCE_MS);
      actions.redraw();
    });
    input.addEventListener("keydown", (event) => { if (event.key === "Enter") send(); });
  }
  // The texts the fields were last filled with, as run (line breaks kept: editedText).
  let shownA = "";
  let shownB = "";
  function sync(input, value) {
    // Never overwrite what the user is typing. The focus is asked of the input's own root: inside
    // a shadow root (marimo draws widgets in one) the document's active element is the host.
    const focused = (input.getRootNode?.() ?? document).activeElement === input;
    const typing = focused && (timer !== null || lastSentId > state("result_id"));
    if (typing) return;
    if (input === inputA) shownA = value ?? "";
    else shownB = value ?? "";
    if (input.value !== asOneLine(value)) input.value = asOneLine(value);
  }

  return {
    /** An edit is waiting to be sent or to be answered: what is drawn is older than the text. */
    computing() { return timer !== null || waiting || inFlight(); },
    /** Runs another text (the head finder opens an example's document): as typed and sent, now;
     * `opening` ({layer, head, query}) asks the kernel to show that head on that query once run.
     * A saved copy or precomputed attention has no model to rerun: → false. */
    open(text, textB, opening = undefined) {
      if (page || state === null || state("editable") === false) return false;
      clearTimeout(timer);
      timer = null;
      waiting = false;
      shownA = text;
      shownB = textB ?? "";
      inputA.value = asOneLine(text);
      inputB.value = asOneLine(textB);
      lastSentId = Math.max(lastSentId, state("result_id")) + 1;
      actions.sendRequest({ id: lastSentId, text, text_b: textB ?? null, ...(opening ? { open: opening } : {}) });
      return true;
    },
    update(get) {
      state = get;
      if (waiting && !inFlight()) send();
      const encoderDecoder = (get("parts") ?? []).length > 1;
      sentenceB.hidden = get("text_b") === null && !encoderDecoder;
      // An encoder-decoder model reads sentence B as the decoder's text (e.g. a translation).
      sentenceB.firstChild.textContent = encoderDecoder ? "Decoder text" : "Sentence B";
      // After a failed edit the inputs keep what the user typed, so it can be fixed, not retyped.
      const failedEdit = Boolean(get("error")) && lastSentId > 0 && get("result_id") === lastSentId;
      if (!failedEdit) {
        sync(inputA, get("text"));
        sync(inputB, get("text_b"));
      }
      // Precomputed attention (BertViz-style calls) has no model to rerun: no sentence editor then.
      box.hidden = get("editable") === false;
    },
    destroy() { clearTimeout(timer); },
  };
}
