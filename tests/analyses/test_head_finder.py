"""The head finder (issue 35): one pass gives the numbers each analysis gives alone, top examples
that are what the attention says, a filter that reads as users write it and refuses anything else,
and an induction score that is Olsson et al.'s formula."""

from __future__ import annotations

import html
import importlib
import re
import warnings

import float_bounds
import numpy as np
import pytest
import torch
import transformers
from test_page_input import page_writes

import attnscope
from attnscope.analyses.head_finder import TOP_EXAMPLES, TOP_KEYS, HeadFinder, induction_scores
from attnscope.engine import attention_model, exact_attention
from attnscope.errors import InputError

TEXTS = [f"The keeper fed lion number {i} before the storm, and it slept." for i in range(6)] + [
    "Dogs bark at the mailman every morning.", "Paris is the capital of France.", "She read the book twice."]


@pytest.fixture(scope="module")
def finder(default_model):
    return attnscope.head_finder(default_model, TEXTS, batch_size=4, progress=False)


def by_head(frame, measure):
    rows = frame[frame.measure == measure].sort_values(["layer", "head"])
    return rows.value.to_numpy(float)


def test_one_pass_gives_what_each_analysis_gives_alone(finder, default_model):
    metrics = finder.metrics.sort_values(["layer", "head"])
    stats = attnscope.head_stats(default_model, TEXTS, batch_size=4, progress=False)
    for ours, theirs in [("cls", "cls"), ("sep", "sep"), ("punct", "punct"), ("prev_token", "prev"), ("self", "current"),
                         ("next_token", "next"), ("entropy", "entropy")]:
        np.testing.assert_allclose(metrics[ours].to_numpy(), by_head(stats, theirs), rtol=0, atol=1e-9, err_msg=ours)
    roles = attnscope.head_roles(default_model, TEXTS, batch_size=4, progress=False)
    for name in ("confidence", "rare"):
        np.testing.assert_allclose(metrics[name].to_numpy(), by_head(roles, name), rtol=0, atol=1e-9, err_msg=name)
    patterns = attnscope.attention_patterns(default_model, TEXTS, batch_size=4, progress=False)
    np.testing.assert_allclose(metrics["vertical_diagonal"].to_numpy(), by_head(patterns, "vertical + diagonal"), atol=1e-9)
    sinks = attnscope.attention_sinks(default_model, TEXTS, progress=False).sort_values(["layer", "head"])
    np.testing.assert_allclose(metrics["alpha_first"].to_numpy(), sinks.alpha_first.to_numpy(), rtol=0, atol=1e-5)
    assert "induction" not in metrics  # an encoder: no induction score
    assert len(metrics) == 6 * 12 and finder.documents == len(TEXTS)


def test_top_examples_are_the_queries_where_the_head_weighs_an_ordinary_token_most(finder, default_model):
    examples = finder.examples(2, 5)
    assert 0 < len(examples) <= TOP_EXAMPLES
    assert examples.score.is_monotonic_decreasing
    for row in examples.itertuples():
        result = default_model.run(TEXTS[row.doc])
        weights = result.attention[2, 5, row.query]
        ordinary = [i for i, t in enumerate(result.tokens) if t not in ("[CLS]", "[SEP]")]
        assert row.score == pytest.approx(float(weights[ordinary].max()), abs=1e-5)
        assert row.query_token == result.tokens[row.query] and f"[[{row.query_token}]]" in row.text
        assert 0 < len(row.keys) <= TOP_KEYS and all(w > 0.005 for _, w in row.keys)
        assert row.keys[0][1] == pytest.approx(float(weights.max()), abs=1e-5)  # strongest key first
    # The whole corpus ranks each head's examples: no other query of any text scores higher than the last kept.
    lowest = examples.score.min()
    best_elsewhere = []
    for doc, text in enumerate(TEXTS):
        result = default_model.run(text)
        ordinary = torch.tensor([t not in ("[CLS]", "[SEP]") for t in result.tokens])
        scores = result.attention[2, 5][:, ordinary].max(-1).values
        kept = set(examples[examples.doc == doc]["query"])
        best_elsewhere += [float(s) for q, s in enumerate(scores) if q not in kept]
    assert max(best_elsewhere) <= lowest + 1e-6
    assert finder.kept_bytes() < 1_000_000 * len(finder.metrics)


def test_a_filter_reads_as_users_write_it_and_refuses_anything_else(finder):
    found = finder.find("layer >= 4 and (entropy > 1.5 or not cls < 0.9)")
    metrics = finder.metrics
    expected = metrics[(metrics.layer >= 4) & ((metrics.entropy > 1.5) | ~(metrics.cls < 0.9))]
    assert found.label.tolist() == expected.label.tolist()
    assert finder.find("0.2 < sink_rate <= 1").label.tolist() == metrics[(metrics.sink_rate > 0.2)].label.tolist()
    for bad, message in [("__import__('os').system('true')", "may only compare"), ("cls.real > 0", "may only compare"),
                         ("weird > 1", "no metric"), ("layer >=", "does not read"), ("layer in [1, 2]", "use <")]:
        with pytest.raises(InputError, match=message):
            finder.find(bad)
    with pytest.raises(InputError, match="condition as text"):
        finder.find(3)


def test_the_filter_grammar_is_the_pages_one():
    """The same cases as js/views/finder_plot.test.js: one grammar in both languages."""
    import json
    from pathlib import Path

    from attnscope.analyses.finder_filter import safe_filter

    cases = json.loads((Path(__file__).resolve().parents[1] / "data" / "filter_cases.json").read_text(encoding="utf-8"))
    names = ["layer", "head", "sink_rate", "entropy", "prev_token"]
    for expression, labels in cases["keeps"]:
        keep = safe_filter(expression, names)
        assert [h["label"] for h in cases["heads"] if keep(h)] == labels, expression
    for expression in cases["refused"]:
        with pytest.raises(InputError):
            safe_filter(expression, names)


def test_the_induction_score_is_olssons_formula_on_repeated_random_tokens(bert_tokenizer):
    torch.manual_seed(0)
    config = transformers.Qwen2Config(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, intermediate_size=37, max_position_embeddings=256)
    decoder = attnscope.load(transformers.Qwen2Model(config).eval(), bert_tokenizer, device="cpu")
    scores = induction_scores(decoder, length=20, sequences=2, seed=3)
    assert scores.shape == (2, 4)
    # The same by hand: the sequences the function draws, run one by one.
    generator = torch.Generator().manual_seed(3)
    special = set(bert_tokenizer.all_special_ids)
    ordinary = torch.tensor([i for i in range(30522) if i not in special])
    total = torch.zeros(2, 4, dtype=torch.float64)
    for _ in range(2):
        first = ordinary[torch.randint(len(ordinary), (20,), generator=generator)]
        with torch.no_grad():
            attention = torch.stack(decoder.forward({"input_ids": torch.cat([first, first])[None],
                                                     "attention_mask": torch.ones(1, 40, dtype=torch.long)}).attentions)[:, 0]
        total += torch.stack([attention[..., q, q - 19] for q in range(20, 39)], -1).mean(-1).double()
    torch.testing.assert_close(scores, total / 2)
    finder = attnscope.head_finder(decoder, TEXTS[:3], progress=False)
    assert "induction" in finder.metrics and finder.metrics.induction.between(0, 1).all()


def test_the_finder_is_shown_in_the_analysis_view(finder):
    widget = attnscope.AttentionWidget(TEXTS[0])
    widget.show_analysis(finder, measure="sink_rate")
    keys = [m["key"] for m in widget.analysis["measures"]]
    assert keys == finder.metric_names and "sink_rate" in keys


def test_the_finder_view_gets_each_heads_examples_and_opening_one_shows_it_with_that_head_alone(finder):
    """What the page's finder reads (the analysis payload), and what opening an example does in the
    kernel: the page sends the document's text as an edit and asks for the head view with that head
    alone; the analysis stays for the way back."""
    widget = attnscope.AttentionWidget(TEXTS[-1])
    widget.show_analysis(finder)
    payload = widget.analysis["finder"]
    doc, query, score, keys, spans = payload["examples"]["2-5"][0]
    assert payload["docs"][str(doc)]["text"] == TEXTS[doc] and payload["docs"][str(doc)]["text_b"] is None
    assert score == pytest.approx(float(finder.examples(2, 5).score.iloc[0]))
    sent = {start + i: t for start, tokens in payload["docs"][str(doc)]["pieces"] for i, t in enumerate(tokens)}
    assert payload["docs"][str(doc)]["running"]  # what each token adds to the text as it reads
    assert all(sent[i] == finder.running[doc][i] for start, end in spans for i in range(start, end))
    assert spans[0][0] <= query < spans[0][1] and len(keys) <= TOP_KEYS
    widget.set_state({"request": {"id": 1, "text": TEXTS[doc], "text_b": None, "open": {"layer": 2, "head": 5, "query": query}}})
    assert (widget.text, widget.view, widget.layer, widget.heads, widget.neuron_head) == (TEXTS[doc], "head", 2, [5], 5)
    assert widget.analysis["finder"] == payload  # one click on the Analysis tab goes back to it
    widget.set_state({"view": "analysis"})
    assert widget.view == "analysis"
    # What the page sends is checked: a wrong opening is refused by name, or against the run it made.
    for bad in [{"layer": 2, "head": 5}, {"layer": "2", "head": 5, "query": 1}, {"layer": 2, "head": -1, "query": 1}]:
        widget.set_state({"request": {"id": 2, "text": "Another text.", "text_b": None, "open": bad}})
        assert widget.text == TEXTS[doc] and widget.view == "analysis"
    widget.set_state({"request": {"id": 3, "text": "Another text.", "text_b": None, "open": {"layer": 2, "head": 5, "query": 999}}})
    assert "query 999 is out of range" in widget.error and widget.text == TEXTS[doc] and widget.view == "analysis"


def test_opening_a_long_documents_example_shows_the_text_view_on_its_query_with_that_head(default_model, monkeypatch):
    monkeypatch.setattr(attention_model, "FULL_ATTENTION_LIMIT", 0)  # every run of the widget kept on demand
    widget = attnscope.AttentionWidget(TEXTS[0], model=default_model)
    assert widget.long_context
    widget.set_state({"view": "analysis"})
    widget.set_state({"request": {"id": 1, "text": TEXTS[3], "text_b": None, "open": {"layer": 4, "head": 7, "query": 6}}})
    assert (widget.text, widget.view, widget.layer, widget.focus_head, widget.focus_token) == (TEXTS[3], "text", 4, 7, 6)


def test_an_example_shows_its_query_in_context_and_a_far_key_beside_it_never_a_whole_long_document(finder):
    """A long document's example is a line: the query with EXAMPLE_CONTEXT tokens either side, its
    strongest key with 3 either side when far, and … where text is left out; the page gets only
    those tokens."""
    from attnscope.analyses.example_text import EXAMPLE_CONTEXT, example_spans
    from attnscope.analyses.head_finder import Example

    assert example_spans(10, 4, 1) == [(0, 10)]
    assert example_spans(5000, 3000, 40) == [(37, 44), (3000 - EXAMPLE_CONTEXT, 3001 + EXAMPLE_CONTEXT)]
    assert example_spans(5000, 3000, 3022) == [(3000 - EXAMPLE_CONTEXT, 3026)]  # overlapping: one span
    tokens = [f"t{i}" for i in range(5000)]
    example = Example((0.9, 0, -3000), 0.9, 0, 3000, [(40, 0.6), (2999, 0.2)])
    long = HeadFinder(finder.metrics, {(0, 0): [example]}, {0: tokens}, {0: (" ".join(tokens), None)}, 1, "m")
    text = long.examples(0, 0).text.iloc[0]
    assert text.startswith("… t37 t38 t39 <<t40>> t41 t42 t43 … t2980") and "[[t3000]]" in text
    assert text.endswith("t3020 …") and len(text.split()) == 7 + 41 + 3
    widget = attnscope.AttentionWidget(TEXTS[0])
    widget.show_analysis(long)
    pieces = widget.analysis["finder"]["docs"]["0"]["pieces"]
    assert [(start, len(part)) for start, part in pieces] == [(37, 7), (2980, 41)]
    assert pieces[1][1][20] == "t3000"


def test_an_example_reads_as_its_text_with_its_marks_shown_whole(default_model):
    """Issue 45: the text column was wordpieces joined by spaces ("hike ##rs"), and pandas cut it at
    50 characters, before the [[query]] and <<key>> marks."""
    texts = ["The hikers and the climbers crossed the glacier before the long storm arrived at dawn.",
             "Ça coûte 12,50 € à Zürich, dit-elle; 東京 🙂 too."]
    assert "##rs" in default_model.run(texts[0]).tokens  # a word in pieces
    finder = attnscope.head_finder(default_model, texts, progress=False)
    shown = 0
    for key in finder.top:
        frame = finder.examples(*key)
        for row in frame.itertuples():
            assert row.text.count("[[") == 1 and "##" not in row.text
            # Each part between "…" is the document's own text once the marks and [CLS]/[SEP] are out.
            plain = re.sub(r"\[CLS\]|\[SEP\]", " ", re.sub(r"\[\[|\]\]|<<|>>", "", row.text))
            source = " ".join(texts[row.doc].split())
            for part in plain.split("…"):
                assert " ".join(part.split()) in source, (part, source)
            shown += 1
        page = frame._repr_html_()
        assert all(html.escape(text, quote=False) in page for text in frame.text)  # whole, marks and all
        assert type(frame[["doc", "text"]]).__name__ == "ExamplesFrame"  # a slice displays so too
        if len(frame):  # plain text: 80 columns, no column hidden behind "...", every text whole once unwrapped
            plain_text = repr(frame)
            assert max(map(len, plain_text.splitlines())) <= 80 and "..." not in plain_text, plain_text
            assert all(column in plain_text.splitlines()[0] for column in ("doc", "query_token", "score", "keys"))
            assert all(text in " ".join(plain_text.split()) for text in (" ".join(t.split()) for t in frame.text))
    assert shown
    pieces = [row.text for key in finder.top for row in finder.examples(*key).itertuples() if row.doc == 0]
    assert any("hikers" in re.sub(r"\[\[|\]\]|<<|>>", "", text) for text in pieces)


def test_the_induction_column_says_it_is_not_measured_on_the_corpus(bert_tokenizer, monkeypatch):
    from attnscope import progress as progress_module

    bars = []
    real_bar = progress_module._bar
    monkeypatch.setattr(progress_module, "_bar", lambda iterable, **kwargs: bars.append(kwargs["desc"]) or real_bar(iterable, **kwargs))
    decoder = _sharp_decoder(bert_tokenizer)
    finder = attnscope.head_finder(decoder, TEXTS[:3])
    assert bars == ["head finder", "induction (repeated random tokens)"]  # no silent wait after the corpus
    assert "not on the corpus" in finder.metrics.attrs["induction"]
    assert "not on the corpus" in finder._repr_html_()
    widget = attnscope.AttentionWidget(TEXTS[0], model=decoder)  # the finder's own model (another's is refused)
    widget.show_analysis(finder)
    assert "random tokens, each repeated once, not on the corpus" in widget.analysis["note"]
    encoder = attnscope.head_finder(attnscope.load(device="cpu"), TEXTS[:2], progress=False)
    assert "not on the corpus" not in encoder._repr_html_()  # no induction column, nothing to say


@pytest.mark.slow  # seconds of model runs or random starts: make test, not test-fast
def test_importance_and_syntax_join_from_their_own_analyses(default_model):
    texts = TEXTS[:4]
    finder = attnscope.head_finder(default_model, texts, importance=True, syntax=texts, batch_size=4, progress=False)
    metrics = finder.metrics.sort_values(["layer", "head"])
    importance = attnscope.head_importance(default_model, texts, batch_size=4, progress=False)
    np.testing.assert_allclose(metrics.importance.to_numpy(), by_head(importance, "importance"), rtol=0, atol=1e-9)
    accuracy = attnscope.syntax_heads(default_model, texts, progress=False).accuracy
    best = accuracy[accuracy.relation == "All"].groupby(["layer", "head"])["accuracy"].max().to_numpy()
    np.testing.assert_allclose(metrics.syntax.to_numpy(), best, rtol=0, atol=1e-12)
    assert finder.find("syntax > 0.3 and importance > 0").shape[0] <= len(metrics)


def _sharp_decoder(tokenizer):
    torch.manual_seed(0)
    config = transformers.Qwen2Config(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, intermediate_size=37, max_position_embeddings=256)
    model = transformers.Qwen2Model(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 2:
                parameter.mul_(4)  # sharp attention: a wrong row, mask or key would show
    return attnscope.load(model, tokenizer, device="cpu")


# Means of weights, means of row entropies, and what counts or classifies heads (exact: a count
# moves only when a weight sits within the bound of its threshold).
WEIGHTS = {"cls", "sep", "punct", "prev_token", "self", "next_token", "alpha_first", "confidence"}


def _assert_same_finder(ours, whole, relative: float, n_keys: int):
    """The same finder up to float32's error on two paths: `relative` (float_bounds.weight_error)
    on each weight, so on each mean of weights and each example's score."""
    # Kobayashi et al.'s norms: past the first layer the values are read from states the two paths'
    # attention made, so take them as off by `relative` too; a weighed share α_0‖f_0‖ / Σ α_j‖f_j‖ (≤ 1)
    # is then off by twice both, and the ratio of two corpus means by that and the weight's.
    tolerance = {"value_norm": (relative, 0), "alpha_first_weighed": (0, 4 * relative),
                 "first_weighed_ratio": (5 * relative, 0)}
    for name in whole.metric_names:
        atol = relative if name in WEIGHTS else float_bounds.entropy_error(relative, n_keys) if name == "entropy" else 0
        rtol, atol = tolerance.get(name, (0, atol))
        np.testing.assert_allclose(ours.metrics[name].to_numpy(), whole.metrics[name].to_numpy(), rtol=rtol, atol=atol,
                                   err_msg=name)
    assert not whole.metrics.value_norm.isna().any()
    assert ours.top.keys() == whole.top.keys()
    for key, heap in whole.top.items():
        np.testing.assert_allclose([e.score for e in ours.top[key]], [e.score for e in heap], rtol=0, atol=relative)
        scores = [e.score for e in heap]
        for a, b in zip(ours.top[key], heap):
            # The same query, or another whose score is within the bound of it (the corpus repeats a sentence).
            tied = sum(abs(s - b.score) <= 2 * relative for s in scores) > 1 or b is heap[-1]
            assert (a.doc, a.query) == (b.doc, b.query) or tied, key
            if (a.doc, a.query) == (b.doc, b.query):
                assert [p for p, _ in a.keys][:3] == [p for p, _ in b.keys][:3]
    assert ours.tokens == whole.tokens and ours.texts == whole.texts


@pytest.mark.slow  # seconds of model runs or random starts: make test, not test-fast
@pytest.mark.parametrize("kind", ["encoder, pairs", "decoder"])
def test_long_documents_are_measured_on_demand_a_block_of_rows_at_a_time_with_the_same_numbers(
        kind, default_model, bert_tokenizer, monkeypatch):
    """A document that a run keeps on demand by itself (its full attention over FULL_ATTENTION_LIMIT,
    as the widget decides) is measured on demand (queries, keys,
    row log-sum-exps) and its rows come a block at a time: every metric and example is the one the
    whole attention gives, and no document's layers × heads × n × n is ever made."""
    module = importlib.import_module("attnscope.analyses.finder_measures")

    if kind == "decoder":
        model, corpus = _sharp_decoder(bert_tokenizer), TEXTS
    else:
        model, corpus = default_model, [(TEXTS[i], TEXTS[-1 - i]) for i in range(5)] + [("Short.", "Shorter still.")]
    whole = attnscope.head_finder(model, corpus, batch_size=3, progress=False)
    lengths = [len(t) for t in [model.run(*doc if isinstance(doc, tuple) else (doc,)).tokens for doc in corpus]]
    relative = float_bounds.weight_error_of_runs(
        [model.run(*doc if isinstance(doc, tuple) else (doc,), attention="on_demand") for doc in corpus])
    heads = model.n_layers * model.n_heads
    blocks = []
    tile = exact_attention.tile

    def counted_tile(*args, **kwargs):
        block = tile(*args, **kwargs)
        blocks.append(block.shape)
        return block

    monkeypatch.setattr(exact_attention, "tile", counted_tile)
    budget = 4 * model.n_heads * max(lengths) * 5  # 5 rows a block of the longest
    monkeypatch.setattr(exact_attention, "BLOCK_BYTES", budget)
    seen = []
    run_whole = module.iter_attention
    monkeypatch.setattr(module, "iter_attention", lambda model, docs, **k: seen.extend(docs) or run_whole(model, docs, **k))
    # Some documents long, some not (the longest ones), then every one.
    middle = sorted(set(lengths))[-2]
    for limit, n_long in [(4 * heads * middle**2, sum(n > middle for n in lengths)), (0, len(corpus))]:
        monkeypatch.setattr(attention_model, "FULL_ATTENTION_LIMIT", limit)
        blocks.clear()
        seen.clear()
        ours = attnscope.head_finder(model, corpus, batch_size=3, progress=False)
        _assert_same_finder(ours, whole, relative, max(lengths))
        assert 0 < n_long and len(seen) == len(corpus) - n_long
        assert all(4 * shape.numel() <= budget for shape in blocks) and any(shape[-2] < shape[-1] for shape in blocks)


# The reader's choice of the finder's plot (analysis_choice): checked by the kernel, drawn in the picture.

SVG = "{http://www.w3.org/2000/svg}"
CHOICE = {"x": "cls", "y": "entropy", "color": "sink_rate", "filter": "layer >= 3", "head": "2-5"}


@pytest.fixture
def finder_widget(finder, default_model):
    widget = attnscope.AttentionWidget(TEXTS[0], model=default_model)
    widget.show_analysis(finder)
    yield widget
    widget.close()


def test_the_finders_picture_is_its_scatter_on_the_chosen_axes_with_the_filter(finder, finder_widget):
    import xml.etree.ElementTree as ET

    from attnscope.widget import picture as picture_module
    from attnscope.widget.picture import PICTURE_BYTES, picture_svg

    if not (picture_module.STATIC / "picture.js").is_file():
        pytest.skip("JS bundle not built")
    page_writes(finder_widget, analysis_choice=CHOICE)
    assert finder_widget.analysis_choice == CHOICE and finder_widget.error == ""
    svg, why = picture_svg(finder_widget)
    assert why == "" and len(svg) <= PICTURE_BYTES
    root = ET.fromstring(svg)
    shown = [node.text for node in root.iter(f"{SVG}text")]
    assert {"cls", "entropy", "colour: sink_rate"} <= set(shown)
    assert "The filter “layer >= 3” keeps 36 of 72 heads; the others are faded." in " ".join(shown)
    assert "Layer 0" not in shown  # not the colour metric's layer × head map
    circles = {role: [c for c in root.iter(f"{SVG}circle") if c.get("class") == role] for role in ("point", "faded", "selected")}
    kept = finder.find("layer >= 3")
    assert (len(circles["point"]), len(circles["faded"]), len(circles["selected"])) == (len(kept), 72 - len(kept), 1)
    # The kept heads, in order, across by their cls and up by their entropy: one linear map each.
    for axis, metric, sign in (("cx", "cls", 1), ("cy", "entropy", -1)):
        at, values = np.array([float(c.get(axis)) for c in circles["point"]]), kept[metric].to_numpy()
        fit = np.polyfit(values, at, 1)
        np.testing.assert_allclose(np.polyval(fit, values), at, atol=0.1)  # SVG rounds to 0.1 px
        assert np.sign(fit[0]) == sign
    ring = circles["selected"][0]
    assert ring.get("fill") == "none" and ring.get("stroke")
    assert len(finder.find("head == 5 and layer == 2")) == 1 and "Head 2-5 is ringed." in shown
    # {}: the defaults, every head kept.
    finder_widget.analysis_choice = {}
    svg, _ = picture_svg(finder_widget)
    root = ET.fromstring(svg)
    shown = [node.text for node in root.iter(f"{SVG}text")]
    assert {"entropy", "sink_rate", "colour: prev_token"} <= set(shown)
    assert not [c for c in root.iter(f"{SVG}circle") if c.get("class") in ("faded", "selected")]


BAD_CHOICES = [
    ({"x": "no_such_metric"}, "x must name one of the finder's metrics"),
    ({"color": 3}, "color must name one of the finder's metrics"),
    ({"y": ["entropy"]}, "y must name"),
    ({"filter": "layer > 1 or " * 200}, "at most 2,000 characters"),
    ({"filter": 5}, "filter is a condition as text"),
    ({"filter": "layer > \ud800"}, "surrogate"),
    ({"head": "6-0"}, "head must be a head of the finder's model"),
    ({"head": "02-5"}, "head must be a head"),
    ({"head": "2-5 or 1"}, "head must be a head"),
    ({"head": 7}, "head must be a head"),
    ({"head": True}, "head must be a head"),
    ({"heads": "2-5"}, "analysis_choice holds the head finder's x, y, color, filter, head, not ['heads']"),
]


@pytest.mark.parametrize("bad, says", BAD_CHOICES, ids=[str(bad)[:30] for bad, _ in BAD_CHOICES])
def test_a_bad_finder_choice_from_the_page_is_refused_and_changes_nothing(finder_widget, bad, says):
    page_writes(finder_widget, analysis_choice=CHOICE)
    sent = []
    finder_widget.send_state = lambda key=None: sent.append(key)
    page_writes(finder_widget, analysis_choice=bad, layer=3)
    assert finder_widget.analysis_choice == CHOICE and finder_widget.layer == 0, "the whole write is put back"
    assert "analysis_choice" in finder_widget.error and says in finder_widget.error
    assert any("analysis_choice" in keys for keys in sent), "the page's copy is set back to the kernel's"
    finder_widget.error.encode("utf-8")  # sendable: no surrogate echoed
    page_writes(finder_widget, analysis_choice={**CHOICE, "x": "prev_token"})  # the next good write is taken
    assert finder_widget.analysis_choice["x"] == "prev_token" and finder_widget.error == ""


@pytest.mark.parametrize("bad, says", BAD_CHOICES[:3] + BAD_CHOICES[6:7], ids=["x", "color", "y", "head"])
def test_a_bad_finder_choice_from_python_raises_naming_the_problem(finder_widget, bad, says):
    finder_widget.analysis_choice = CHOICE
    with pytest.raises(InputError, match=re.escape(says)):
        finder_widget.analysis_choice = bad
    assert finder_widget.analysis_choice == CHOICE


def test_a_finder_choice_needs_a_shown_finder_and_keeps_what_a_new_analysis_still_has(finder, default_model):
    widget = attnscope.AttentionWidget(TEXTS[0], model=default_model)
    with pytest.raises(InputError, match="no analysis is shown"):
        widget.analysis_choice = {"x": "cls"}
    page_writes(widget, analysis_choice={"x": "cls"})
    assert widget.analysis_choice == {} and "no analysis is shown" in widget.error
    widget.analysis_choice = {}  # the defaults always hold
    widget.show_analysis(finder)
    widget.analysis_choice = CHOICE
    widget.show_analysis(finder)  # the same finder again (a cell run twice): the choice stays
    assert widget.analysis_choice == CHOICE
    fewer = HeadFinder(finder.metrics.drop(columns=["cls"]), finder.top, finder.tokens, finder.texts, finder.documents,
                       finder.model_name)
    widget.show_analysis(fewer)
    assert widget.analysis_choice == {key: value for key, value in CHOICE.items() if key != "x"}
    widget.show_analysis(attnscope.head_stats(default_model, TEXTS[:2], progress=False))  # a heatmap: no finder's parts
    assert widget.analysis_choice == {}
    with pytest.raises(InputError, match=re.escape("analysis_choice holds a heatmap's measure, not ['x']")):
        widget.analysis_choice = {"x": "cls"}
    widget.close()


def test_a_70b_shaped_finders_picture_fits_its_output_and_says_what_it_leaves_out():
    """5,120 heads take 320 kB of SVG points: the picture draws the kept heads of the largest colour
    values (views.py's thinning) and says so; the heads a filter drops go first."""
    import pandas as pd

    from attnscope.labels import head_label
    from attnscope.widget import picture as picture_module
    from attnscope.widget.picture import PICTURE_BYTES, picture_svg

    if not (picture_module.STATIC / "picture.js").is_file():
        pytest.skip("JS bundle not built")
    rng = np.random.default_rng(0)
    n_layers, n_heads = 80, 64
    rows = [{"layer": layer, "head": head, "label": head_label(layer, head), "entropy": rng.uniform(0, 4),
             "sink_rate": rng.uniform(), "prev_token": rng.uniform()} for layer in range(n_layers) for head in range(n_heads)]
    widget = attnscope.head_view(tuple(torch.full((1, n_heads, 3, 3), 1 / 3) for _ in range(n_layers)), ["a", "b", "c"])
    widget.show_analysis(HeadFinder(pd.DataFrame(rows), {}, {}, {}, 1000, "synthetic"))
    svg, why = picture_svg(widget)
    assert why == "" and len(svg) <= PICTURE_BYTES and svg.count('class="point"') == 1000
    assert "Of the 5,120 heads kept, the 1,000 of the largest prev_token are drawn." in " ".join(re.findall(r'subtitle">([^<]*)', svg))
    widget.analysis_choice = {"filter": "layer >= 70", "head": "1-1"}
    svg, why = picture_svg(widget)
    assert (svg.count('class="point"'), svg.count('class="faded"'), svg.count('class="selected"')) == (640, 1, 1)
    assert "The 4,480 heads it drops are not drawn here." in " ".join(re.findall(r'subtitle">([^<]*)', svg))


def test_a_tokenizer_without_a_pad_token_and_a_long_document_beside_a_short_one(monkeypatch):
    """A byte-level BPE trained here has no pad token (as GPT-2's): the finder tokenizes and runs
    its documents one at a time, and a long document kept on demand sits beside a short one."""
    from test_token_labels import byte_level_bpe

    tokenizer = byte_level_bpe()
    assert tokenizer.pad_token is None
    torch.manual_seed(0)
    config = transformers.Qwen2Config(vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, intermediate_size=64, max_position_embeddings=2048)
    model = attnscope.load(transformers.Qwen2Model(config).eval(), tokenizer, device="cpu")
    corpus = [" ".join(["The lighthouse keeper wrote in his log every evening."] * 30), "A short one.", "Another one."]
    whole = attnscope.head_finder(model, corpus, max_length=1024, progress=False)
    monkeypatch.setattr(attention_model, "FULL_ATTENTION_LIMIT", 4 * 2 * 4 * 200**2)  # the first document only is long
    ours = attnscope.head_finder(model, corpus, max_length=1024, progress=False)
    assert len(ours.tokens.get(0, whole.tokens.get(0, []))) > 200
    with warnings.catch_warnings():  # the first document is cut at max_length, as for the finder
        warnings.simplefilter("ignore")
        runs = [model.run(text, max_length=1024, attention="on_demand") for text in corpus]
    _assert_same_finder(ours, whole, float_bounds.weight_error_of_runs(runs), max(run.n_tokens for run in runs))
    # A decoder's first queries choose among a few tokens: never an example (FIRST_CAUSAL_QUERY).
    assert ours.top and all(e.query >= 8 for heap in ours.top.values() for e in heap)
    lines = [row.text for layer, head in ours.top for row in ours.examples(layer, head).itertuples() if row.doc == 0]
    assert lines and all("…" in line and len(line.split()) <= 2 * 20 + 1 + 7 + 3 for line in lines)  # a line, not the document
    assert not any("Ġ" in line for line in lines)  # byte-level pieces read as text
    assert any("lighthouse" in re.sub(r"\[\[|\]\]|<<|>>|\s", "", line) for line in lines)
