// The head view's knockout control (Geva et al. 2023; Michel et al.'s disabled heads): a head of
// the open layer, knocked out whole (its output zeroed) or only its line from the token whose
// prediction is read to one token (that score −inf before the softmax); the kernel reruns the
// model ("knockout" request, src/attnscope/widget/knockout_answers.py) and the line under the
// view says Δ log p of the predicted token. On a generation (attnscope.generate) the token scored
// is the selected output token, the one the model chose there, read from the position before it.
// Where the kernel cannot score the run (no LM or MLM head, precomputed attention, a long run, a
// generation still writing or a prompt token selected, a saved page) the row says why instead.
// Token text goes in through textContent only.
import { el, labelled, tokenCaption } from "../drawing/dom.js";
import { headName, headText } from "../drawing/labels.js";

export const SAVED_PAGE = "Knockout reruns the model: run the live widget in the notebook to knock out a head.";
const WHOLE = -1;
const CHOSEN = "chosen token"; // a generation's: the selected output token, as the model chose it

/** The keys the predicted position reads: a causal model's up to it, an encoder's all. */
export function knockoutKeys(control, nTokens, causal) {
  return [...Array(causal ? control.position + 1 : nTokens).keys()];
}

/** One line on an answer: what was knocked out and Δ log p of the predicted token. */
export function knockoutLine(answer, tokens, notes = []) {
  const token = (i) => tokenCaption(tokens[i] ?? "", notes[i]);
  // An encoder-decoder's head is its cross- and self-attention; a line, one of the two.
  const part = answer.part ? ` (${answer.part})` : "";
  const what = answer.key === WHOLE ? `${headName(answer.layer, answer.head)}${part} zeroed`
    : `line ${token(answer.position)} → ${token(answer.key)} blocked in ${headName(answer.layer, answer.head)}${part}`;
  const size = (v) => (v !== 0 && v < 1e-3 ? v.toExponential(1) : v.toFixed(3)); // a tiny change is not "0.000"
  const number = (v) => `${v < 0 ? "−" : ""}${size(Math.abs(v))}`;
  const delta = `${answer.delta > 0 ? "+" : answer.delta < 0 ? "" : "±"}${number(answer.delta)}`;
  const masks = answer.masked ? " (measured without the masked heads)" : "";
  const chosen = answer.step === undefined ? "" : ` (chosen at step ${answer.step})`;
  return `${what}: log p of “${answer.target}”${chosen} ${number(answer.log_p)} → ${number(answer.log_p_knocked)}, Δ ${delta}${masks}`;
}

/**
 * A generation's control ({output: "chosen token"}) made concrete for the selected token: the
 * position that predicted it and the token, or why there is none (a prompt token selected).
 */
export function chosenTokenControl(control, focus, outputStart) {
  if (control.output !== CHOSEN) return control;
  if (!(focus >= outputStart && outputStart >= 0)) {
    return { unavailable: `Select an output token (from token ${outputStart} on): knockout scores the token the model chose there.`, actionable: true };
  }
  return { ...control, position: focus - 1, token: focus, step: focus - outputStart + 1 }; // 1: the first written, as the text view counts
}

/** What the control reads of the widget's traits (`get`), on a saved page or live. */
export function knockoutState(get, page = false) {
  return {
    control: chosenTokenControl(get("knockout_control") ?? {}, get("focus_token") ?? -1, get("output_start") ?? -1), page, layer: get("layer"), nHeads: get("n_heads"), heads: get("heads"),
    tokens: get("tokens"), notes: get("token_notes") ?? [], causal: Boolean(get("causal")), resultId: get("result_id"),
  };
}

/** A request with no kernel to answer it. @type {(type: string, params?: object) => Promise<{content: any}>} */
const unanswered = () => Promise.reject(new Error(SAVED_PAGE));

/**
 * createKnockoutControl(parent, {ask}) → {update(state), destroy()}, state as knockoutState makes
 * it; ask(type, params) → a promise of {content} (the channel's request).
 * @param {HTMLElement} parent
 * @param {{ask?: (type: string, params?: object) => Promise<{content: any}>}} [options]
 */
export function createKnockoutControl(parent, { ask = unanswered } = {}) {
  const row = el("div", "attnscope-knockout", parent);
  // Why the control is not offered: folded under one line where it is about the model or the page
  // (a paragraph under every view of a model without a head to score was read as a warning), open
  // where it says what to do (select an output token).
  const unavailable = el("details", "attnscope-knockout-unavailable", row);
  const summary = el("summary", "attnscope-hint", unavailable);
  const why = el("span", "attnscope-hint attnscope-knockout-why", unavailable);
  const head = el("select", "attnscope-knockout-head");
  const headLabel = labelled(row, "Knock out", head);
  const key = el("select", "attnscope-knockout-key");
  key.setAttribute("aria-label", "What of the head");
  row.appendChild(key);
  const go = el("button", "attnscope-knockout-run", row);
  go.type = "button";
  go.textContent = "Run";
  go.title = "Rerun the model with this head, or this line of it, knocked out, and say the change of log p of the predicted token";
  const result = el("span", "attnscope-knockout-result", row);
  result.setAttribute("aria-live", "polite");
  let state = null;
  let shownFor = ""; // the run and layer the result line speaks of
  let heads = -1;
  let keysFor = "";
  let asked = 0;

  go.addEventListener("click", () => {
    if (!state) return;
    const sent = { layer: state.layer, head: Number(head.value), key: Number(key.value), result_id: state.resultId,
      ...(state.control.token === undefined ? {} : { token: state.control.token }) };
    const id = ++asked;
    const tokens = state.tokens;
    const notes = state.notes;
    result.textContent = "knocking out…";
    go.disabled = true;
    ask("knockout", sent).then(({ content }) => {
      if (id === asked) result.textContent = knockoutLine(content, tokens, notes);
    }, (error) => {
      if (id === asked) result.textContent = error?.message ?? String(error);
    }).finally(() => {
      if (id === asked) go.disabled = false;
    });
  });

  return {
    update(next) {
      state = next;
      const reason = next.page ? SAVED_PAGE : next.control?.unavailable ?? (next.control?.position === undefined ? "" : null);
      const off = reason !== null;
      why.textContent = reason ?? "";
      why.hidden = !off || !reason;
      unavailable.hidden = why.hidden;
      const actionable = Boolean(next.control?.actionable) && !next.page;
      summary.textContent = actionable ? "Knockout" : "Knockout: not available here";
      if (!unavailable.hidden && unavailable.dataset.actionable !== String(actionable)) unavailable.open = actionable;
      unavailable.dataset.actionable = String(actionable);
      for (const node of [headLabel, key, go, result]) node.hidden = off;
      if (off) return;
      if (heads !== next.nHeads) {
        head.replaceChildren();
        for (let h = 0; h < next.nHeads; h++) {
          const option = el("option", "", head);
          option.value = String(h);
          option.textContent = headText(h);
        }
        heads = next.nHeads;
        head.value = String(next.heads?.[0] ?? 0);
      }
      if (next.heads?.length === 1) head.value = String(next.heads[0]); // a head shown alone is the one
      const keys = knockoutKeys(next.control, next.tokens.length, next.causal);
      const signature = `${next.resultId}:${next.control.position}:${keys.length}`;
      if (keysFor !== signature) {
        const kept = key.value;
        key.replaceChildren();
        const whole = el("option", "", key);
        whole.value = String(WHOLE);
        whole.textContent = "the whole head";
        const from = tokenCaption(next.tokens[next.control.position] ?? "", next.notes?.[next.control.position]);
        for (const k of keys) {
          const option = el("option", "", key);
          option.value = String(k);
          option.textContent = `its line ${from} → ${tokenCaption(next.tokens[k], next.notes?.[k])} (token ${k})`;
        }
        // An empty choice (no option yet) is no key: Number("") is 0, token 0's line, which Run then knocked out.
        key.value = kept !== "" && keys.includes(Number(kept)) ? kept : String(WHOLE);
        keysFor = signature;
      }
      const now = `${next.resultId}:${next.layer}:${next.control.position}`;
      if (shownFor !== now) { // another text or layer: the last answer spoke of another
        result.textContent = "";
        asked++;
        go.disabled = false;
        shownFor = now;
      }
      const predicted = next.control.output === "masked token" ? "the masked token" : "the next token";
      row.title = next.control.output === CHOSEN
        ? `Δ log p of the token the model chose at step ${next.control.step}, in layer ${next.layer}`
        : `Δ log p of the token the model predicts at ${predicted}, in layer ${next.layer}`;
    },
    destroy() {
      asked++;
      row.remove();
    },
  };
}
