// Controls the long-input views share (text and map): the head picker, with query heads grouped
// by the key head they read (grouped-query attention shown as such), and the option that sets
// the first tokens (attention sinks) aside from the colour scale (text_scale.js, map_view.js draw it).
import { el, labelled, select } from "../drawing/dom.js";
import { headText } from "../drawing/labels.js";

/** Query head h reads key head h / (heads per key head), as transformers' repeat_kv. */
export function keyHeadOf(head, nHeads, nKeyHeads) {
  return Math.floor(head / (nHeads / Math.max(1, nKeyHeads)));
}

/** "head 3" or "mean of the layer's heads" (head −1). */
export function focusHeadName(head) {
  return head === -1 ? "mean of the layer's heads" : `head ${head}`;
}

/** A head picker in `parent`: −1 (the mean) then each key head's query heads as a group. */
export function createHeadPicker(parent, onHead) {
  const picker = el("select", "attnscope-focus-head");
  labelled(parent, "Head", picker);
  picker.addEventListener("change", () => onHead(Number(picker.value)));
  let shape = "";
  return {
    update(nHeads, nKeyHeads, head) {
      if (shape !== `${nHeads}:${nKeyHeads}`) {
        shape = `${nHeads}:${nKeyHeads}`;
        picker.replaceChildren();
        const mean = el("option", "", picker);
        mean.value = "-1";
        mean.textContent = "Mean of the layer";
        const grouped = nKeyHeads > 0 && nKeyHeads < nHeads;
        let group = picker;
        for (let h = 0; h < nHeads; h++) {
          if (grouped && h % (nHeads / nKeyHeads) === 0) {
            group = el("optgroup", "", picker);
            group.label = `Key head ${keyHeadOf(h, nHeads, nKeyHeads)}`;
          }
          const option = el("option", "", group);
          option.value = String(h);
          option.textContent = headText(h);
        }
      }
      picker.value = String(head);
    },
  };
}

const ASIDE = [[0, "none"], [1, "first token"], [4, "first 4 tokens"]];

/** The "set aside" picker: how many first tokens leave the colour scale. */
export function createAsidePicker(parent, onAside) {
  const picker = select("attnscope-sink-aside", ASIDE);
  const control = labelled(parent, "Set aside", picker);
  control.title = "Attention sinks (the first tokens) take most of many heads' attention: set aside, they are drawn in grey on their own scale, and the rest of the text uses the full colour scale.";
  picker.addEventListener("change", () => onAside(Number(picker.value)));
  return {
    update(aside) {
      if (!ASIDE.some(([value]) => value === aside)) {
        const option = el("option", "", picker);
        option.value = String(aside);
        option.textContent = `first ${aside} tokens`;
      }
      picker.value = String(aside);
    },
  };
}

/** The k largest values' indices, largest first. */
export function topK(values, k) {
  const best = [];
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (!(v > 0)) continue;
    if (best.length < k) best.push(i);
    else if (v > values[best[best.length - 1]]) best[best.length - 1] = i;
    else continue;
    best.sort((a, b) => values[b] - values[a]);
  }
  return best;
}
