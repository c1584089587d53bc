"""BertViz 1.4.1's head_view / model_view / neuron_view arguments, answered by attnscope's widget."""

import re
from html.parser import HTMLParser

import pytest
import torch
import transformers
from test_engine import SMALL, VOCAB

import attnscope
from attnscope import InputError
from attnscope.serialize import decode

TEXT = "The cat sat on the mat."


@pytest.fixture(scope="module")
def bertviz_inputs(default_model):
    """What a BertViz notebook has: model outputs' attention tuple and the token list."""
    tokenizer = default_model.tokenizer
    inputs = tokenizer(TEXT, "It was happy.", return_tensors="pt")
    with torch.inference_mode():
        attention = default_model.model(**inputs, output_attentions=True).attentions
    tokens = tokenizer.convert_ids_to_tokens(inputs["input_ids"][0])
    b_start = inputs["token_type_ids"][0].tolist().index(1)
    return attention, tokens, b_start


def test_head_view_takes_bertviz_arguments(bertviz_inputs):
    attention, tokens, b_start = bertviz_inputs
    widget = attnscope.head_view(attention, tokens, sentence_b_start=b_start, layer=2, heads=[3, 5])
    assert isinstance(widget, attnscope.AttentionWidget)
    assert (widget.view, widget.layer, widget.heads, widget.sentence_b_start) == ("head", 2, [3, 5], b_start)
    assert widget.tokens == tokens and widget.editable is False and widget.engine is None
    assert torch.allclose(decode(widget.attention), attention[2][0], atol=1 / 255)
    # Positional use, as in BertViz's tutorial: head_view(attention, tokens).
    assert attnscope.head_view(attention, tokens).layer == 0


def test_model_view_display_mode_and_filters(bertviz_inputs):
    attention, tokens, _ = bertviz_inputs
    widget = attnscope.model_view(attention, tokens, display_mode="light", include_layers=[1, 4], include_heads=[0, 11])
    assert (widget.view, widget.theme, widget.layer) == ("model", "light", 1)
    assert widget.thumbnails["layers"] == [1, 4] and widget.thumbnails["heads"] == [0, 11]
    # Left out, the host's theme (BertViz's default "dark" opened dark in a light JupyterLab); asked, as asked.
    assert attnscope.model_view(attention, tokens).theme == "auto"
    assert attnscope.model_view(attention, tokens, display_mode="dark").theme == "dark"


def test_bertviz_mistakes_are_errors_here(bertviz_inputs):
    attention, tokens, _ = bertviz_inputs
    with pytest.raises(Exception, match=r"include_layers=\[\] selects nothing"):
        attnscope.head_view(attention, tokens, include_layers=[])
    batch = tuple(torch.cat([a, a]) for a in attention)
    with pytest.raises(InputError, match="batch of 2"):
        attnscope.model_view(batch, tokens)
    with pytest.raises(InputError, match=f"{len(tokens) + 1} tokens were given"):
        attnscope.head_view(attention, tokens + ["extra"])
    with pytest.raises(InputError, match="'tokens' is required"):
        attnscope.head_view(attention)
    with pytest.raises(InputError, match="not both"):
        attnscope.head_view(attention, tokens, encoder_attention=attention, encoder_tokens=tokens)
    with pytest.raises(InputError, match="cross_attention needs decoder_tokens"):
        attnscope.head_view(cross_attention=attention, encoder_tokens=tokens)
    with pytest.raises(ValueError, match="html_action"):
        attnscope.head_view(attention, tokens, html_action="show")
    with pytest.raises(InputError, match="tuple of per-layer tensors"):
        attnscope.head_view([[0.5]], tokens)
    with pytest.raises(InputError, match="pass outputs.attentions"):  # BertViz's outputs[-1] under transformers 5
        attnscope.head_view((), tokens)


def test_html_action_return_gives_a_standalone_page(bertviz_inputs, tmp_path):
    attention, tokens, _ = bertviz_inputs
    html = attnscope.model_view(attention, tokens, html_action="return")
    assert type(html).__name__ == "HTML"
    assert html.data.startswith("<!doctype html>") and "attnscopeStandalone" in html.data
    assert "<script src" not in html.data and not re.search(r"https?://(cdn|unpkg|cdnjs|esm\.sh)", html.data)
    (tmp_path / "view.html").write_text(html.data)  # what BertViz users do with it


def element_ids(page: str) -> list[str]:
    """The id attributes of the page's elements; the bundled script's text is not markup."""
    found = []

    class Ids(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.extend(value for name, value in attrs if name == "id")

    Ids().feed(page)
    return found


def test_returned_pages_share_no_element_id(bertviz_inputs, default_model):
    """A notebook inlines returned pages into one document: each must mount by ids of its own."""
    attention, tokens, _ = bertviz_inputs
    pages = [
        attnscope.head_view(attention, tokens, html_action="return").data,
        attnscope.model_view(attention, tokens, html_action="return").data,
        attnscope.head_view(attention, tokens, html_action="return").data,  # the very same page, again
        attnscope.render_html("Dogs bark.", model=default_model, layers=[0]),
    ]
    ids = [element_ids(page) for page in pages]
    assert all(len(found) == 2 for found in ids), ids  # the mount point and the data
    every = [i for found in ids for i in found]
    assert len(set(every)) == len(every), every
    for page, (mount, data) in zip(pages, ids):
        # The mounting script looks up exactly its own page's elements.
        assert f'getElementById("{mount}")' in page and f'getElementById("{data}")' in page
        assert 'getElementById("attnscope")' not in page


def test_returned_page_with_control_characters_and_lone_surrogates_in_tokens():
    """Tokens are data: a page of any token text can be written as UTF-8 and reads them back."""
    import json

    tokens = ["[CLS]", "a\x00b", "\x1b[31m", "\ud800x", "\x7f\x85", "\U0001f600"]
    attention = tuple(torch.full((1, 2, 6, 6), 1 / 6) for _ in range(2))
    with pytest.warns(UserWarning, match=r"tokens \[3\] held UTF-16 surrogates"):
        page = attnscope.head_view(attention, tokens, html_action="return").data
    page.encode("utf-8")  # raised UnicodeEncodeError on the lone surrogate
    data = re.search(r'<script type="application/json" id="[^"]+">(.*?)</script>', page, re.S).group(1)
    # The half character is shown as U+FFFD, as the live widget (whose comm cannot send it) shows it.
    assert json.loads(data)["json"]["state"]["tokens"] == [*tokens[:3], "\ufffdx", *tokens[4:]]
    assert "\ufffdx" in re.search("<title>(.*)</title>", page).group(1)


def test_prettify_tokens_false_keeps_markers():
    attention = tuple(torch.full((1, 2, 3, 3), 1 / 3) for _ in range(2))
    tokens = ["Hello", "Ġworld", "Ġ!"]
    assert attnscope.head_view(attention, tokens).tokens == ["Hello", " world", " !"]
    assert attnscope.head_view(attention, tokens, prettify_tokens=False).tokens == tokens


def test_precomputed_view_says_what_needs_a_model(bertviz_inputs):
    attention, tokens, _ = bertviz_inputs
    widget = attnscope.head_view(attention, tokens)
    widget.request = {"id": 1, "text": "new text", "text_b": None}
    assert "needs a model" in widget.error and widget.tokens == tokens  # the view is kept
    with pytest.raises(InputError, match="Masking heads needs a model"):
        widget.masked_heads = [[0, 0]]
    widget.word_level = True  # word boundaries come from the tokens themselves
    assert "sat" in widget.tokens and len(widget.tokens) <= len(tokens)
    widget.view = "rollout"
    assert widget.rollout["shape"][0] == 6


def test_precomputed_neuron_view_says_it_needs_a_model(bertviz_inputs, default_model):
    """Issue 30: the neuron tab of precomputed attention said "queries and keys could not be
    captured", and its picture "drawing it failed"; the reason is that there is no model."""
    from attnscope.widget.picture import picture_bundle

    attention, tokens, _ = bertviz_inputs
    widget = attnscope.head_view(attention, tokens)
    assert widget.neuron_unavailable.startswith("The neuron view needs a model, and this view was made from "
                                                "precomputed attention.")
    widget.view = "neuron"
    assert widget.neuron_unavailable in picture_bundle(widget, widget.picture_id)["text/html"]
    # A run keeps its queries and keys: precomputed from a run, the neuron view needs no model.
    assert attnscope.AttentionWidget(result=default_model.run(TEXT)).neuron_unavailable == ""


def test_neuron_view_show_with_any_hf_model(bert_tokenizer):
    torch.manual_seed(0)
    model = transformers.BertModel(transformers.BertConfig(vocab_size=VOCAB, **SMALL))
    from attnscope.neuron_view import show

    widget = show(model, "bert", bert_tokenizer, "The cat sat.", "It slept.", layer=2, head=3, display_mode="light")
    assert (widget.view, widget.layer, widget.neuron_head, widget.theme) == ("neuron", 2, 3, "light")
    assert widget.neuron_unavailable == "" and widget.editable
    left_out = attnscope.neuron_view(model, "bert", bert_tokenizer, "The cat sat.")
    assert (left_out.view, left_out.theme) == ("neuron", "auto")  # the host's, as model_view's
    assert show(model, "bert", bert_tokenizer, "The cat sat.", display_mode="dark").theme == "dark"
    with pytest.raises(InputError, match="head=9 is out of range"):
        show(model, "bert", bert_tokenizer, "The cat sat.", head=9)


def test_encoder_decoder_arguments_as_bertviz_takes_them(bert_tokenizer):
    """BertViz's BART recipe: outputs.encoder_attentions, decoder_attentions, cross_attentions."""
    from test_encoder_decoder import SOURCE, TARGET, encoder_decoder_models

    torch.manual_seed(0)
    engine = attnscope.load(encoder_decoder_models()["bart"](), bert_tokenizer, device="cpu")
    run = engine.run(SOURCE, TARGET)
    encoder_tokens, decoder_tokens = run.parts["encoder"].tokens, run.parts["decoder"].tokens
    as_tuple = lambda part: tuple(a[None] for a in run.parts[part].attention)
    widget = attnscope.head_view(
        encoder_attention=as_tuple("encoder"), decoder_attention=as_tuple("decoder"), cross_attention=as_tuple("cross"),
        encoder_tokens=encoder_tokens, decoder_tokens=decoder_tokens,
    )
    assert widget.parts == ["encoder", "decoder", "cross"] and widget.attention_part == "encoder"
    widget.attention_part = "cross"
    assert widget.key_tokens == encoder_tokens and widget.tokens == decoder_tokens
    assert torch.allclose(decode(widget.attention), run.parts["cross"].attention[0], atol=1 / 255)
    widget.word_level = True
    assert decode(widget.attention).shape[-1] == len(widget.key_tokens)
    # A subset, as BertViz allows: only cross-attention.
    only_cross = attnscope.model_view(cross_attention=as_tuple("cross"), encoder_tokens=encoder_tokens, decoder_tokens=decoder_tokens)
    assert only_cross.parts == ["cross"] and only_cross.thumbnails["shape"][2:] == [len(decoder_tokens), len(encoder_tokens)]
    with pytest.raises(InputError, match="decoder tokens"):
        attnscope.head_view(cross_attention=as_tuple("cross"), encoder_tokens=encoder_tokens, decoder_tokens=decoder_tokens[:-1])
