"""A long causal text opens where its attention says something: on its last token (token 0 of a
causal model attends only to itself), with the text scrolled to it, live and in a saved page."""

from __future__ import annotations

import pytest
import transformers
from small_models import SHAPE, TEXT, scaled_up
from test_head_view_browser import BUNDLE
from test_saved_state import live_and_saved  # noqa: F401 (a fixture)
from test_token_labels import byte_level_bpe

import attnscope

pytestmark = pytest.mark.skipif(not BUNDLE.is_file(), reason="JS bundle not built (make test builds it)")

TEXT_READY = ("(() => { const c = document.querySelector('.attnscope-text-caption');"
              " return !!c && c.textContent.startsWith('Attention from') && !c.textContent.includes('computing'); })()")

# Where the selected token is in the text's scrolled box, read the same way in both pages.
SELECTED_IN_VIEW = """() => {
  const flow = document.querySelector('.attnscope-text-flow');
  const selected = flow.querySelector('.attnscope-selected');
  const box = flow.getBoundingClientRect(), token = selected.getBoundingClientRect();
  return {index: Number(selected.dataset.index), scrollTop: flow.scrollTop, scrollHeight: flow.scrollHeight,
          height: flow.clientHeight, inView: token.top >= box.top && token.bottom <= box.bottom};
}"""


@pytest.fixture(scope="module")
def engine():
    model = scaled_up(transformers.Qwen2Model(transformers.Qwen2Config(vocab_size=320, **{**SHAPE, "max_position_embeddings": 8192})))
    return attnscope.load(model, byte_level_bpe(), device="cpu")


def test_a_long_causal_text_opens_on_its_last_token_scrolled_into_view(live_and_saved, engine):  # noqa: F811
    widget = attnscope.AttentionWidget(TEXT * 64, model=engine, attention="on_demand")
    last = len(widget.tokens) - 1
    assert widget.focus_token == last
    live, saved = live_and_saved(widget, TEXT_READY, kernel_answers=True, detached=True)
    for page in (live, saved):
        shown = page.evaluate(SELECTED_IN_VIEW)
        print(shown)
        assert shown["index"] == last
        assert shown["scrollHeight"] > 2 * shown["height"]  # a text much taller than its box
        assert shown["inView"], shown
