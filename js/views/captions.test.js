// @vitest-environment node
// What an image says beside what it draws (issue 30): the caption under its title (scene.js
// withCaption, views.js imageCaption), and the model view's grid labels and cells, which must
// stay legible and whole in any width and, in a slide, any height.
import { describe, expect, it } from "vitest";
import { CELL, gridLabels, MIN_CELL, MIN_FIT_CELL, modelCell, modelImage, SCALE_NOTE } from "./model_view.js";
import { createScene, sceneToSvg, withCaption } from "../drawing/scene.js";
import { VIEWS } from "../transport/contract.js";
import { textWidth } from "../drawing/svg.js";
import { imageCaption } from "./views.js";

describe("the model view's grid labels", () => {
  const heads = [...Array(12).keys()];
  const layers = [...Array(24).keys()];

  it("name each head where it fits, and number them under one 'Head' where not", () => {
    expect(gridLabels(layers, heads, CELL)).toMatchObject({ corner: "", columns: heads.map((h) => `Head ${h}`) });
    const narrow = gridLabels(layers, heads, MIN_CELL);
    expect(narrow.corner).toBe("Head");
    expect(narrow.columns).toEqual(heads.map(String));
  });

  it("never overlap, down to the smallest cells, thinned where even numbers would touch", () => {
    for (const many of [heads, [...Array(128).keys()]]) {
      for (let cell = 6; cell <= CELL; cell++) {
        const { columns, rows } = gridLabels(layers, many, cell);
        // Each label is centred on its cell: two shown ones are as far apart as their half-widths and a gap.
        const shown = columns.map((text, i) => [text, i]).filter(([text]) => text);
        expect(shown[0][1]).toBe(0); // the first column is always named
        for (let k = 1; k < shown.length; k++) {
          const [[a, i], [b, j]] = [shown[k - 1], shown[k]];
          expect((j - i) * cell, `${cell} px: "${a}" and "${b}"`).toBeGreaterThanOrEqual((textWidth(a, 11) + textWidth(b, 11)) / 2 + 3);
        }
        if (cell >= MIN_FIT_CELL && many.length < 100) expect(shown).toHaveLength(many.length); // every head named at the sizes used
        const rowsShown = rows.map((text, i) => [text, i]).filter(([text]) => text);
        for (let k = 1; k < rowsShown.length; k++) expect((rowsShown[k][1] - rowsShown[k - 1][1]) * cell).toBeGreaterThanOrEqual(14);
      }
    }
  });
});

describe("the model view's cells", () => {
  it("fit the width as before, and in a slide the height too", () => {
    expect(modelCell(0, 12)).toBe(CELL);
    expect(modelCell(1000, 12)).toBe(77);
    expect(modelCell(300, 12)).toBe(MIN_CELL); // an output scrolls rather than go smaller
    expect(modelCell(1000, 12, { height: 390, nLayers: 6 })).toBe(65); // six rows in 390 px
    expect(modelCell(400, 12, { height: 900, nLayers: 6 })).toBe(27); // a slide's narrow pane: every head shows
    expect(modelCell(400, 12, { height: 120, nLayers: 12 })).toBe(MIN_FIT_CELL);
  });

  it("of a picture fit the width it is drawn for (a 12-head model was 1,072 px wide)", () => {
    const thumbnails = { shape: [6, 12, 2, 2], values: new Float32Array(6 * 12 * 4).fill(0.5) };
    const state = { thumbnails, layers: [...Array(6).keys()], heads: [...Array(12).keys()], nHeads: 12, width: 900 };
    expect(modelImage(state).width).toBeLessThanOrEqual(900);
    expect(modelImage({ ...state, width: 0 }).width).toBe(64 + 12 * CELL); // unknown: the full size
  });

  it("of a few heads keep the scale note inside the picture, wrapped (it was cut at 'meshe')", () => {
    const thumbnails = { shape: [4, 4, 2, 2], values: new Float32Array(4 * 4 * 4).fill(0.5) };
    const image = modelImage({ thumbnails, layers: [0, 1, 2, 3], heads: [0, 1, 2, 3], nHeads: 4, width: 400 });
    const notes = image.items.filter((item) => item.role === "scale");
    expect(notes.length).toBeGreaterThan(1);
    expect(notes.map((n) => n.text).join(" ")).toBe(SCALE_NOTE);
    for (const note of notes) {
      expect(note.x + textWidth(note.text, 10)).toBeLessThanOrEqual(image.width);
      expect(note.y).toBeLessThan(image.height);
    }
  });
});

describe("a caption under an image's title", () => {
  function scene() {
    const s = createScene(300, 100);
    s.text(6, 12, "model · layer 2", { role: "title" });
    s.text(10, 40, "token", { role: "token" });
    s.rect(0, 50, 10, 10, "#000");
    s.segment(0, 60, 10, 70, "#000");
    s.circle(5, 80, 2, "#000");
    s.raster(0, 90, 4, 4, 1, 1, new Uint8ClampedArray(4));
    s.lines([{ from: 0, to: 0, weight: 1 }], () => "#000", () => [0, 20, 100, 30]);
    return s.scene;
  }

  it("goes under the title, wrapped to the width, and moves the rest down by its height", () => {
    const plain = scene();
    const sentences = ["Show change: each line is |A_masked − A|, how much masking changed that weight.", "Word level."];
    const captioned = withCaption(plain, sentences);
    const lines = captioned.items.filter((item) => item.role === "caption");
    expect(lines.length).toBeGreaterThan(2); // the first sentence wraps at 300 px
    expect(lines.every((line) => textWidth(line.text, 11) <= 300 - 12)).toBe(true);
    expect(lines.map((line) => line.text).join(" ")).toBe(sentences.join(" "));
    const dy = captioned.height - plain.height;
    expect(dy).toBe(lines.length * 15 + 6);
    expect(Math.max(...lines.map((line) => line.y))).toBeLessThan(40 + dy - 8); // above what it moved
    const [title, token, rect, segment, circle, raster, weighted] = captioned.items;
    expect(title).toBe(plain.items[0]);
    expect([token.y, rect.y, segment.y0, segment.y1, circle.cy, raster.y]).toEqual([40 + dy, 50 + dy, 60 + dy, 70 + dy, 80 + dy, 90 + dy]);
    expect(weighted.groups[0].segments[0]).toEqual([0, 20 + dy, 100, 30 + dy]);
    expect(plain.items[1].y).toBe(40); // the scene it was given is left as it was
    expect(sceneToSvg(captioned)).toContain('class="caption"');
  });

  it("is nothing where there is nothing to say, and the scene widens to a long title", () => {
    expect(withCaption(scene(), [])).toEqual(scene());
    const s = createScene(100, 50);
    s.text(6, 12, "a model with a rather long name · layer 2", { role: "title" });
    expect(withCaption(s.scene).width).toBeGreaterThanOrEqual(textWidth("a model with a rather long name · layer 2") + 12);
  });
});

describe("what an image's caption says", () => {
  const plain = {
    view: "head", tokens: ["a", "b"], n_heads: 12, n_layers: 6, heads: [...Array(12).keys()], masked_heads: [], show_change: false,
    word_level: false, sentence_b_start: null, sentence_filter: "all", causal: false, parts: [], notice: "", mask_summary: "",
    include_layers: null, include_heads: null, sink_aside: 0, long_context: false, analysis: {},
  };
  const say = (view, state) => imageCaption({ get: (name) => ({ ...plain, ...state })[name] }, view);

  it("says nothing of the ordinary view", () => {
    // Every view that draws the run (head, model, neuron, rollout, text, map), from the registry.
    for (const { name } of VIEWS.filter((v) => v.draws || v.asks)) expect(say(name, {})).toEqual([]);
  });

  it("says what a generation wrote and how it ended: a stopped run said nothing of its stop", () => {
    const run = { long_context: true, output_start: 2, tokens: ["Hi", ",", " the", " sea"], token_reading: ["Hi", ",", " the", " sea"],
      notice: "Generated greedily: 2 new tokens of at most 80, stopped.\n4 tokens: kept as q, k." };
    expect(say("text", run)[0]).toBe("The model wrote 2 tokens after a prompt of 2: “the sea”. Generated greedily: 2 new tokens of at most 80, stopped.");
    expect(say("text", { ...run, notice: "" })[0]).toBe("The model wrote 2 tokens after a prompt of 2: “the sea”");
  });

  it("quotes what a generation wrote as its text reads: line breaks as ↵, a literal \\n kept, no end-of-text token", () => {
    const prompt = ["<|im_start|>", "user", "↵\n", "List", "<|im_end|>", "↵\n"];
    const output = ["1", ".", " Red", "↵\n", "2", ".", " print", "(\"\\n\")", "<|im_end|>"];
    const run = { long_context: true, output_start: prompt.length, tokens: [...prompt, ...output],
      token_reading: [...prompt, ...output],
      text: "<|im_start|>user\nList<|im_end|>\n1. Red\n2. print(\"\\n\")<|im_end|>",
      notice: "Generated greedily: 9 new tokens of at most 40, ended by the end-of-text token." };
    expect(say("text", run)[0]).toBe("The model wrote 9 tokens after a prompt of 6: “1. Red ↵ 2. print(\"\\n\")”. "
      + "Generated greedily: 9 new tokens of at most 40, ended by the end-of-text token.");
    // Ended otherwise, its last token is a word of the text; a text that does not end with the
    // readings (none sent) quotes the readings.
    const cut = { ...run, notice: "Generated greedily: 9 new tokens, as many as max_new_tokens=9 allows." };
    expect(say("text", cut)[0]).toMatch(/“1\. Red ↵ 2\. print\("\\n"\)<\|im_end\|>”/);
    expect(say("text", { ...cut, text: "" })[0]).toMatch(/“1\. Red ↵ 2\. print\("\\n"\)<\|im_end\|>”/);
    // A label's escape, where no reading was sent, is a line break too.
    const labelled = { ...run, token_reading: [], tokens: [...prompt, "1", ".", " Red", "\\n", "2", ".", " print", "(\"\\n\")", "<|im_end|>"] };
    expect(say("text", labelled)[0]).toContain("“1. Red ↵ 2. print(\"\\n\")”");
  });

  it("names the masked heads, counted from 0, and what Show change draws", () => {
    const masked = { masked_heads: [[3, 5], [4, 0]], show_change: true, mask_summary: "Masked 3-5, 4-0: attention changes from layer 4 on." };
    const model = say("model", masked);
    expect(model[0]).toMatch(/^Masked \(switched off, as Michel et al\. 2019\): layer 3, head 5 and layer 4, head 0;/);
    expect(model[1]).toMatch(/^Show change: each line is \|A_masked − A\|.*Masked 3-5, 4-0: attention changes from layer 4 on\.$/);
    expect(say("rollout", masked).join(" ")).not.toMatch(/Show change/); // rollout shows the attention itself
    expect(say("model", { show_change: true })).toEqual([]); // nothing masked: nothing changed
  });

  it("says which sentences, heads, layers, part and words are drawn, and the run's notice", () => {
    expect(say("head", { sentence_b_start: 4, sentence_filter: "ab" })).toEqual(
      ["Only sentence A → sentence B attention is drawn (sentence A's tokens attending to sentence B's)."]);
    expect(say("head", { sentence_filter: "ab" })).toEqual([]); // one sentence: no filter
    expect(say("head", { heads: [0, 3] })).toEqual(["Heads 0 and 3 of 12 (0–11) drawn."]);
    expect(say("model", { include_layers: [4, 5] })).toEqual(["Only layers 4 and 5 of 0–5."]);
    expect(say("neuron", { parts: ["encoder", "decoder", "cross"], attention_part: "cross" })).toEqual(["Cross (decoder → encoder) attention."]);
    expect(say("head", { word_level: true })[0]).toMatch(/^Word level/);
    expect(say("head", { causal: true })[0]).toMatch(/^Causal attention: each token sees only itself/);
    // An encoder-decoder's generation: the source's rows (the encoder's) read the whole source.
    const encoderDecoder = say("head", { causal: true, causal_from: 12 })[0];
    expect(encoderDecoder).toMatch(/^Causal attention from token 12 on \(the decoder's\)/);
    expect(encoderDecoder).toMatch(/The source's tokens before it \(the encoder's\) see the whole source\./);
    expect(say("model", { notice: "Input truncated: 600 tokens → 512. The rest of the text is not shown." }))
      .toEqual(["Input truncated: 600 tokens → 512. The rest of the text is not shown."]);
    // A long run's notice says how it keeps its attention, not what is drawn: only truncation is said.
    const long = { long_context: true, notice: "Input truncated: 9000 tokens → 8192. The rest of the text is not shown.\n8,192 tokens: kept as q, k." };
    expect(say("text", long)).toEqual(["Input truncated: 9000 tokens → 8192. The rest of the text is not shown."]);
    expect(say("head", { long_context: true, sink_aside: 4 })).toEqual(
      ["The first 4 tokens are set aside (attention sinks): the window's largest weight is taken without them."]);
  });
});
