// The lists a generation grows (tokens, token_reading, token_notes, text: GROWING in the generated
// contract), as this view holds them. While the model writes, a step's message carries what it
// changed of them (the `grown` trait, {name: [start, tail, before]}), not the lists: at 8k tokens they were
// ~190 kB a step. The kernel sends them whole again when the run ends (generation_widget.py).
import { GROWING } from "./contract.js";

/**
 * The traits as `model.get` gives them, with the growing lists grown by each step's `grown`.
 * ask(): the kernel's "growing_lists" answer, for a view whose lists a step cannot extend (one
 * opened while the model writes holds the prompt's lists); onChange: something was grown.
 * @param {{get: (name: string) => any, on: Function, off: Function}} model
 * @param {() => Promise<{content: Object<string, any>}>} ask
 * @param {() => void} onChange
 */
export function createGrowing(model, ask, onChange) {
  // name → {over: the trait's value it was grown from, value}: a list the kernel sends whole
  // again (another object) replaces what was grown over the old one.
  const grown = new Map();
  let asking = false;

  function get(name) {
    const held = grown.get(name);
    return held !== undefined && held.over === model.get(name) ? held.value : model.get(name);
  }

  // A step grows the lists the view holds at its `before` length; a view that holds them longer
  // already has it (an answer came first); shorter, it missed steps (opened while the model
  // writes, its lists the prompt's) and asks for them whole.
  function apply() {
    const parts = model.get("grown") ?? {};
    let behind = false;
    for (const name of GROWING) {
      const part = parts[name];
      if (!Array.isArray(part)) continue;
      const [start, tail, before] = part;
      const base = get(name);
      if (base == null || base.length < before) behind = true;
      else if (base.length === before) {
        const value = typeof base === "string" ? base.slice(0, start) + tail : base.slice(0, start).concat(tail);
        grown.set(name, { over: model.get(name), value });
      }
    }
    if (behind) askWhole();
  }

  async function askWhole() {
    if (asking) return;
    asking = true;
    try {
      const { content } = await ask();
      // The steps sent after it grow it as they come (the kernel's messages keep their order).
      for (const name of GROWING) {
        if (content[name] !== undefined) grown.set(name, { over: model.get(name), value: content[name] });
      }
      onChange();
    } catch {
      // No kernel (it stopped): the lists stay as the view holds them.
    } finally {
      asking = false;
    }
  }

  const onGrown = () => apply();
  model.on("change:grown", onGrown);
  return {
    get,
    /** The step the model holds now (a view opened mid-run, or reopened): call once ask() can. */
    apply,
    destroy() {
      model.off("change:grown", onGrown);
    },
  };
}
