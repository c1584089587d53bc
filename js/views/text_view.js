// The long-input text view: the prompt as flowing text, each token shaded by its attention from
// (or to) the selected token, for one head or the mean of the layer; the top tokens listed.
// Click a token (in the text or the list) to select it. The numbers are exact rows or columns
// the kernel answers ("attention_rows"); this view only draws what it is given. Its picture and
// the tokens' readings: text_scene.js.
import { el, labelled, select, tokenCaption } from "../drawing/dom.js";
import { renderColorBar } from "../drawing/legend.js";
import { createAsidePicker, createHeadPicker, topK } from "../controls/long_controls.js";
import { markOutput } from "./output_tokens.js";
import { imageMethods } from "../drawing/scene.js";
import { isDeepShade } from "../drawing/colors.js";
import { shadeOf, textBars, textScale, textScaleNote, tokensInView } from "../drawing/text_scale.js";
import { chunkBoundaries, format, partsEnd, readingOf, shadingTitle, shownAt, TOP_K, textScene } from "./text_scene.js";
import { answered, declared, layerTitle, longCallbacks, longParams } from "./view_adapter.js";

// ms without a scroll event before the shading is rescaled to the text then in view.
export const SCROLL_REST_MS = 120;

/**
 * createTextView(container, callbacks) → {update(state), scrollToSelected(), toSvg, toPng, destroy}.
 * callbacks: onSelect(token), onHead(head), onDirection("from" | "to"), onAside(n).
 * state: {tokens, notes, reading?, selected, values: Float32Array | null (null while asked for), message,
 *         note?, outputStart?, head, nHeads, nKeyHeads, direction, aside, layer, model}
 */
export function createTextView(container, callbacks = {}) {
  const root = el("div", "attnscope-text-view", container);
  const bar = el("div", "attnscope-long-options", root);
  const heads = createHeadPicker(bar, (h) => callbacks.onHead?.(h));
  const direction = select("attnscope-direction", [["from", "from the selected token"], ["to", "to the selected token"]]);
  labelled(bar, "Attention", direction);
  direction.addEventListener("change", () => callbacks.onDirection?.(direction.value));
  const aside = createAsidePicker(bar, (n) => callbacks.onAside?.(n));
  const caption = el("div", "attnscope-text-caption", root);
  const legend = el("div", "attnscope-legends", root);
  const main = el("div", "attnscope-text-main", root);
  const flow = el("div", "attnscope-text-flow", main);
  flow.setAttribute("role", "listbox");
  flow.setAttribute("aria-label", "The text: click a token to select it");
  const side = el("div", "attnscope-text-top", main);
  el("div", "attnscope-hint", side).textContent = `Top ${TOP_K}`;
  const list = el("ol", "attnscope-top-list", side);
  let spans = [];
  let painted = []; // each span's background as written
  let asideShown = 0;
  let tokensShown = null;
  let shaded = null; // {values, aside, max, note} last painted
  let selectedShown = -1;
  let markedShown = -1; // the span outlined for it: the selected token's, or its split character's
  let readingShown = [];
  let state = null;

  // A scroll asked for before the text is laid out (a notebook renders a widget before it attaches
  // it to the page) waits for an update that finds it laid out.
  let scrollPending = false;
  function scrollNow() {
    // The selected token's span, or its split character's (one span in the running text).
    const span = spans[state ? shownAt(readingShown, state.selected) : -1];
    if (!span || !flow.clientHeight) return;
    scrollPending = false;
    // The text's own scroll only, never the page's: a notebook stays where its reader left it.
    // A block is its tokens' offset parent (content-visibility contains their layout): the
    // token's place in the text is the block's place plus its own in the block.
    const block = /** @type {HTMLElement} */ (span.parentElement);
    const top = span.offsetTop + (span.offsetParent === block ? block.offsetTop : 0);
    const bottom = top + span.offsetHeight;
    if (top < flow.scrollTop || bottom > flow.scrollTop + flow.clientHeight) {
      flow.scrollTop = Math.max(0, top - (flow.clientHeight - span.offsetHeight) / 2);
    }
  }

  // A token clicked in the text is in view: its selection scrolls nothing (and reads no layout).
  let clickedHere = -1;
  function choose(i) {
    clickedHere = -1; // chosen elsewhere (the list, the keys) until the text's click says otherwise
    if (state && i !== state.selected) callbacks.onSelect?.(i);
  }
  flow.addEventListener("click", (event) => {
    const index = event.target?.dataset?.index;
    if (index === undefined) return;
    // A split character's tokens show as one: a click selects its first, clicking again the next.
    const i = Number(index);
    const end = partsEnd(readingShown, i);
    const selected = state?.selected ?? -1;
    const chosen = selected >= i && selected < end ? i + ((selected - i + 1) % (end - i)) : i;
    choose(chosen);
    clickedHere = chosen;
  });
  flow.addEventListener("keydown", (event) => {
    if (!state) return;
    const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
    if (step) {
      event.preventDefault();
      choose(Math.max(0, Math.min(state.tokens.length - 1, state.selected + step)));
    }
  });
  flow.tabIndex = 0;

  // The text in blocks of about CHUNK_TOKENS tokens that the browser lays out and paints only near
  // the view (content-visibility): a selection then restyles and lays out a few blocks, not 32k spans.
  let chunks = []; // the blocks, in reading order
  let chunkStarts = []; // the first token of each, and the token count at the end

  let notesShown = null;
  let outputShown = -1;
  // The first token from which the flow is made again for new tokens: the start of the block
  // holding the first token that differs from what is shown (a generation's step adds a token and
  // may change the last one's reading, when it completes a character); 0 for another text.
  function keptUpTo(tokens, notes, reading, outputStart) {
    if (!tokensShown || outputStart !== outputShown || Boolean(notes) !== Boolean(notesShown)) return 0;
    const n = Math.min(tokens.length, tokensShown.length);
    let d = 0;
    while (d < n && tokens[d] === tokensShown[d] && reading[d] === readingShown[d] && notes?.[d] === notesShown?.[d]) d++;
    if (d === 0 || tokens.length < tokensShown.length) return 0;
    let c = chunks.length - 1;
    while (c > 0 && chunkStarts[c] > Math.min(d, tokensShown.length - 1)) c--;
    return chunkStarts[c];
  }

  function buildTokens(tokens, notes, reading, outputStart) {
    const starts = chunkBoundaries(reading);
    let from = keptUpTo(tokens, notes, reading, outputStart);
    let kept = chunkStarts.indexOf(from);
    // A block is kept where it starts and ends as before: new text can move an earlier block's end
    // (a line's end that came is preferred to a sentence's), and the flow is made again from there.
    let same = 0;
    while (same <= kept && starts[same] === chunkStarts[same]) same++;
    kept = Math.max(0, Math.min(kept, same - 1));
    from = chunkStarts[kept] ?? 0;
    if (from === 0) {
      flow.replaceChildren();
      kept = 0;
      painted = [];
      asideShown = 0;
    } else {
      for (const block of chunks.slice(kept)) block.remove();
      spans[markedShown]?.classList.remove("attnscope-selected");
      spans[selectedShown]?.removeAttribute("aria-selected");
    }
    const fragment = document.createDocumentFragment();
    readingShown = reading;
    chunkStarts = starts;
    // A block's height before it is first shown: its characters at about 8 px each, in lines of
    // the text's width (the browser keeps the real height once it has laid the block out).
    const width = Math.max(200, flow.clientWidth || 800);
    chunks = chunks.slice(0, kept).concat(chunkStarts.slice(kept, -1).map((start, k) => {
      const block = el("div", "attnscope-text-chunk", fragment);
      let chars = 0;
      for (let i = start; i < chunkStarts[kept + k + 1]; i++) chars += String(reading[i]).length;
      block.style.containIntrinsicSize = `auto ${Math.ceil((chars * 8) / width) * 27}px`;
      return block;
    }));
    let chunk = kept - 1;
    spans = spans.slice(0, from).concat(tokens.slice(from).map((token, k) => {
      const i = from + k;
      if (i === chunkStarts[chunk + 1]) chunk++;
      const span = document.createElement("span");
      span.className = "attnscope-text-token";
      span.textContent = reading[i]; // data, never markup; "" for a split character's other tokens
      span.dataset.index = String(i);
      span.title = `${tokenCaption(token, notes?.[i])} · token ${i}`;
      const end = reading[i] === "" ? i : partsEnd(reading, i);
      if (end > i + 1) {
        const others = Array.from({ length: end - i - 1 }, (_, k) => `token ${i + 1 + k}: ${tokenCaption(tokens[i + 1 + k], notes?.[i + 1 + k])}`);
        span.title += `; split over ${others.join(", ")} (click again to select them)`;
      }
      chunks[chunk].appendChild(span);
      return span;
    }));
    markOutput(spans, outputStart, from); // a generation's: where the prompt ends, each output token a step
    flow.appendChild(fragment);
    if (restTimer !== null) cancelIdle(restTimer);
    restTimer = rest = colors = null;
    painted = painted.slice(0, from).concat(new Array(tokens.length - from).fill(""));
    tokensShown = tokens;
    notesShown = notes;
    outputShown = outputStart;
    shaded = null;
    listed = null;
    selectedShown = markedShown = -1;
  }

  // Shading: the tokens in view are written at once, the rest a chunk at a time when the page is
  // idle, so a selection shows in the next frame whatever the length. Only what changed is written.
  let colors = null; // (i) → what span i should show
  let rest = null; // the next span to check in the background, or null when all are written
  let restTimer = null;
  const idle = globalThis.requestIdleCallback ?? ((fn) => setTimeout(fn, 0));
  const cancelIdle = globalThis.cancelIdleCallback ?? clearTimeout;

  function write(lo, hi) {
    for (let i = lo; i < hi; i++) {
      const color = colors ? colors(i) : "";
      if (painted[i] !== color) {
        spans[i].style.background = color;
        spans[i].classList.toggle("attnscope-deep", isDeepShade(color));
        painted[i] = color;
      }
    }
  }

  /** [first, end) of the spans in the blocks in the flow's view (with `margin` screens above and
   * below); everything when not laid out. It reads the blocks' places only (a block off screen has
   * its remembered or estimated height, its tokens are not laid out): called before the update
   * writes anything, the layout is clean. A selection shades the blocks in view in its frame (each
   * span restyled costs the frame: 1,500 took 20 ms at 32,768 tokens) and the rest when idle. */
  function inView(margin = 0) {
    const height = flow.clientHeight;
    if (!height || !spans.length) return [0, spans.length];
    const top = flow.scrollTop - margin * height;
    const bottom = flow.scrollTop + (1 + margin) * height;
    const firstEndingBelow = (y) => { // blocks are in reading order, one under the other
      let lo = 0;
      let hi = chunks.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (chunks[mid].offsetTop + chunks[mid].offsetHeight <= y) lo = mid + 1; else hi = mid;
      }
      return lo;
    };
    const first = Math.min(chunks.length - 1, firstEndingBelow(top));
    let end = first;
    while (end < chunks.length && chunks[end].offsetTop < bottom) end++;
    return [chunkStarts[first], chunkStarts[Math.max(end, first + 1)]];
  }

  // One idle slice writes at most this long: a kernel's message (a generation's next token) that
  // comes meanwhile waits for the slice to end, and an idle deadline runs to 50 ms.
  const REST_SLICE_MS = 8;
  function writeRest(deadline, started = performance.now()) {
    restTimer = null;
    const end = Math.min(spans.length, rest + 256);
    write(rest, end);
    rest = end < spans.length ? end : null;
    if (rest !== null && deadline?.timeRemaining?.() > 4 && performance.now() - started < REST_SLICE_MS) {
      return writeRest(deadline, started);
    }
    if (rest !== null) restTimer = idle(writeRest);
    flow.dataset.shading = rest === null ? "done" : "in view";
  }

  // The scale follows the text in view once a scroll rests: rescaling a screen of spans on every
  // scroll frame would cost each frame what a selection costs (about 20 ms at 32,768 tokens).
  let restingTimer = null;
  const rescaleSoon = () => {
    clearTimeout(restingTimer);
    // Off the page (clientHeight 0) nothing is in view: the scale waits to be put back.
    restingTimer = setTimeout(() => { if (state?.values && shaded && flow.clientHeight) paint(state); }, SCROLL_REST_MS);
  };
  flow.addEventListener("scroll", () => {
    if (rest !== null) write(...inView());
    rescaleSoon();
  });
  // Put on the page or resized, other lines are in view (a notebook draws the view before it
  // attaches it: a text scaled then, whole, would keep that scale until a scroll).
  const resized = globalThis.ResizeObserver ? new ResizeObserver(rescaleSoon) : null;
  resized?.observe(flow);

  // blocks and seen: inView's and tokensInView's, read before the update writes anything.
  function paint({ values, aside, selected }, blocks = inView(), seen = tokensInView(flow, spans, blocks)) {
    const [lo, hi] = seen;
    const scale = textScale(values, { aside, selected, lo, hi });
    const note = textScaleNote(scale);
    flow.dataset.scaledBy = `${lo},${hi}`; // the tokens the scale was taken from
    // Rows cross as float16: two parts of the text often share their largest, and keep their colours.
    if (!(shaded && shaded.values === values && shaded.aside === aside && shaded.max === scale.max)) {
      colors = shadeOf(values, scale);
      for (let i = 0; i < Math.max(aside, asideShown); i++) spans[i]?.classList.toggle("attnscope-aside", i < aside);
      if (restTimer !== null) cancelIdle(restTimer);
      write(...blocks);
      rest = blocks[1] - blocks[0] < spans.length ? 0 : null;
      if (rest !== null) restTimer = idle(writeRest);
      flow.dataset.shading = rest === null ? "done" : "in view";
      asideShown = aside;
    } else if (note === shaded.note) return;
    shaded = { values, aside, max: scale.max, note };
    legend.replaceChildren();
    for (const b of textBars(scale)) renderColorBar(el("div", "", legend), b);
    el("div", "attnscope-text-scale", legend).textContent = note;
  }

  let listed = null; // the values the list was made from
  function listTop(values) {
    if (values === listed) return;
    listed = values;
    list.replaceChildren();
    for (const i of topK(values, TOP_K)) {
      const item = el("li", "attnscope-top-item", list);
      const button = el("button", "attnscope-top-token", item);
      button.type = "button";
      button.textContent = `“${state.tokens[i]}”`;
      button.title = `token ${i}: select it`;
      button.addEventListener("click", () => { choose(i); });
      el("span", "attnscope-top-where", item).textContent = ` ${i} · ${format(values[i])}`;
    }
  }

  return {
    update(next) {
      // What is in view, read before anything is written: reading it after would lay the text out again.
      const fresh = next.values && !(shaded && shaded.values === next.values && shaded.aside === next.aside);
      const blocks = tokensShown === next.tokens && fresh ? inView() : null;
      const seen = blocks && tokensInView(flow, spans, blocks);
      state = next;
      heads.update(next.nHeads, next.nKeyHeads, next.head);
      direction.value = next.direction;
      aside.update(next.aside);
      if (tokensShown !== next.tokens) buildTokens(next.tokens, next.notes, readingOf(next), next.outputStart);
      if (selectedShown !== next.selected) {
        // Outlined where it reads: a split character's other token is empty, its character outlined.
        spans[markedShown]?.classList.remove("attnscope-selected");
        spans[selectedShown]?.removeAttribute("aria-selected");
        markedShown = shownAt(readingShown, next.selected);
        spans[markedShown]?.classList.add("attnscope-selected");
        spans[next.selected]?.setAttribute("aria-selected", "true");
        selectedShown = next.selected;
      }
      const title = [shadingTitle(next), next.note].filter(Boolean).join(". "); // note: what a saved page keeps of the row
      caption.textContent = next.message || (next.values ? title : `${shadingTitle(next)}: computing…`);
      // On the flow itself: a class on the root sends the browser through every token span to
      // find the flow (43 ms of style invalidation at 32,768 tokens, on each click).
      flow.classList.toggle("attnscope-stale", !next.values);
      if (next.values) {
        if (fresh) paint(next, blocks ?? undefined, seen ?? undefined);
        listTop(next.values);
      }
      if (scrollPending) scrollNow();
    },
    /** Brings the selected token into the text's view: when the view opens (a long text's selected
     * token may be thousands of lines down) and after a selection from the list or the map. */
    scrollToSelected() {
      const clicked = state && state.selected === clickedHere;
      clickedHere = -1;
      if (clicked) return;
      scrollPending = true;
      scrollNow();
    },
    ...imageMethods(({ title = "" } = {}) => {
      if (!state?.values) throw new Error("nothing drawn yet");
      return textScene(state, { title });
    }),
    destroy() {
      if (restTimer !== null) cancelIdle(restTimer);
      clearTimeout(restingTimer);
      resized?.disconnect();
      root.remove();
    },
  };
}

// The text view's state: the shading of the selected token's row or column (values null while asked for).
function textState({ get, long }) {
  const tokens = get("tokens");
  const selected = get("focus_token");
  const answer = long.row({ ...longParams(get), token: selected, direction: get("direction") });
  const row = answered(answer, (a) => a.values.length === tokens.length);
  return { tokens, notes: get("token_notes"), reading: get("token_reading"), selected, values: row?.values ?? null, message: answer?.error ?? "",
    note: row?.note ?? "", outputStart: get("output_start") ?? -1, head: get("focus_head"), nHeads: get("n_heads"), nKeyHeads: get("n_key_heads"), direction: get("direction"),
    aside: get("sink_aside"), layer: get("layer"), model: get("model_name"), weighBy: get("weigh_by") };
}

/** @type {import("./view_adapter.js").ViewAdapter} */
export const adapter = {
  ...declared("text"),
  create(body, { setTraits }) {
    return createTextView(body, { ...longCallbacks(setTraits), onDirection: (direction) => setTraits({ direction }) });
  },
  draw(view, context) {
    const state = textState(context);
    const moved = view.selected !== state.selected;
    view.update(state);
    if (moved) view.scrollToSelected();
    view.selected = state.selected;
    return state.message ? "" : state.values ? "" : "computing…";
  },
  picture(context, options) {
    const state = textState(context);
    return state.message || (state.values ? textScene(state, options) : "computing…");
  },
  title: layerTitle,
  shows: ["generation", "notice", "weigh"], // its colour bars name the tokens set aside
};
