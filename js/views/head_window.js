// The head view on a long run: a window of the text around the selected token, its exact
// weights asked for (attention_window) and drawn relative to the window's largest.
import { tokenCaption } from "../drawing/dom.js";
import { stepOf } from "./output_tokens.js";
import { answered, count } from "./view_adapter.js";

// A long run's head view shows a window of its text; the token slices are kept while the window
// and the run stay, so a redraw does not rebuild (and un-hover) the token columns.
function windowTokens(memo, tokens, notes, start, end) {
  const key = `${start}:${end}`;
  if (memo.window?.tokens !== tokens || memo.window.key !== key) {
    memo.window = { tokens, key, shown: tokens.slice(start, end), notes: (notes ?? []).slice(start, end) };
  }
  return memo.window;
}

// Inside a window of a long text most weights are small (a row spreads over thousands of tokens,
// much of it on a sink): the lines are drawn relative to the window's largest weight, leaving out
// the columns of tokens set aside (sinks), which are drawn at full strength.
function relativeWindow(win, aside) {
  const [nHeads, nRows, nCols] = win.shape;
  const { values } = win;
  const skip = Math.max(0, (aside ?? 0) - win.rows[0]);
  let largest = 0;
  for (let i = 0; i < values.length; i++) if (i % nCols >= skip && values[i] > largest) largest = values[i];
  if (!(largest > 0)) return { values, largest: 1 };
  const relative = new Float32Array(nHeads * nRows * nCols);
  for (let i = 0; i < values.length; i++) relative[i] = Math.min(1, values[i] / largest);
  return { values: relative, largest };
}

// What a line stands for: the weight, or (Weigh by value norm) ‖αf(x)‖ = α·‖f(x)‖, not bounded by 1.
const weighedWord = (get) => (get("weigh_by") === "value_norm" ? "‖αf(x)‖ (α × value norm)" : "weight");

/** The head view's state on a long run (the window around the selected token), or a status line.
 * memo keeps the slices and relative weights between draws (the view's own object on screen). */
export function windowState({ get, long }, memo = {}) {
  const tokens = get("tokens");
  const selected = get("focus_token");
  const answer = long.window({ result_id: get("result_id"), weigh_by: get("weigh_by"), layer: get("layer"), token: selected });
  if (answer?.error) return answer.error;
  const win = answered(answer, (a) => a.n_tokens === tokens.length && a.shape[0] === get("n_heads"));
  if (!win) return "computing…";
  const [start, end] = win.rows;
  const { shown, notes } = windowTokens(memo, tokens, get("token_notes"), start, end);
  if (memo.relative?.of !== win || memo.relative.aside !== get("sink_aside")) {
    memo.relative = { of: win, aside: get("sink_aside"), ...relativeWindow(win, get("sink_aside")) };
  }
  const { values, largest } = memo.relative;
  const step = stepOf(get("output_start") ?? -1, tokens.length, selected); // a generation's output token
  return {
    start,
    tokens: shown,
    tokenNotes: notes,
    keyTokens: null,
    causal: Boolean(get("causal")),
    causalFrom: get("causal_from") ?? 0,
    sentenceBStart: null,
    attention: { values, shape: win.shape },
    weightScale: largest,
    visibleHeads: get("heads"),
    sentenceFilter: "all",
    selected: selected - start,
    rowOnly: Boolean(step), // a generation's output token: its row alone, what it looked at when written
    caption: `Tokens ${count(start)}–${count(end - 1)} of ${count(tokens.length)}, around token ${count(selected)} `
      + `${tokenCaption(tokens[selected], get("token_notes")?.[selected])}${step ? ` (step ${step.step} of ${step.steps})` : ""}, `
      + `layer ${get("layer")}${step ? ": only its row is drawn, what it looked at when the model wrote it" : ""}: each line is as opaque as its exact ${weighedWord(get)} relative to the window's largest, `
      + `${largest.toPrecision(2)}; what a token gives to tokens outside this window is not drawn.${win.note ? ` ${win.note}` : ""}`,
  };
}

// What the screen adds to the window's caption (images are read where nothing can be clicked).
const WINDOW_HINT = "Click a token to move there.";

// Per head view on screen: its window's slices, relative weights, start and the token scrolled to.
export const windowMemos = new WeakMap();

export function drawWindow(view, context) {
  const memo = windowMemos.get(view);
  const state = windowState(context, memo);
  if (typeof state === "string") return state;
  memo.start = state.start;
  view.update({ ...state, hint: WINDOW_HINT });
  const selected = state.start + state.selected;
  if (memo.scrolledTo !== selected) view.scrollToToken(state.selected);
  memo.scrolledTo = selected;
  return "";
}

/** After a short run's draw: a token newly marked (a head finder's example opens on its query)
 * is scrolled to, as a long run's window is. → the draw's status. */
export function followSelected(view, { get }, status) {
  const memo = windowMemos.get(view);
  const selected = get("focus_token") ?? -1;
  if (selected >= 0 && memo.scrolledTo !== selected) view.scrollToToken(selected);
  memo.scrolledTo = selected;
  return status;
}
