"""Knockout on a long text (issue 48 / 47): the blocked edges are held as edge blocks (heads,
queries, keys), never as a heads × T × T grid, and the masks are made for the rows of the queries
a call computes: a knockout of the last token → a span makes no tensor of T² elements (at 8,192
tokens on SmolLM2 such a grid was 0.6 GB a blocked layer), and its Δ log p is still the
independent eager −inf forward's."""

from __future__ import annotations

import dataclasses
import sys

import pytest
import torch
from test_knockout import _independent, _llama
from torch.utils._python_dispatch import TorchDispatchMode

import attnscope
from attnscope.analyses.knockout import blocked_edges
from attnscope.engine import knockout as engine_knockout
from attnscope.errors import InputError

SPAN = list(range(40, 50))


class _Tensors(TorchDispatchMode):
    """The largest tensor each run of ops makes, the logits (their last dimension the vocabulary)
    left out."""

    def __init__(self, vocabulary: int):
        super().__init__()
        self.vocabulary, self.largest, self.largest_bool = vocabulary, 0, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(tensor, torch.Tensor) and tensor.dim() and tensor.shape[-1] != self.vocabulary:
                self.largest = max(self.largest, tensor.numel())
                if tensor.dtype == torch.bool:
                    self.largest_bool = max(self.largest_bool, tensor.numel())
        return out


def _held_bytes(thing, seen=None) -> int:
    """Bytes a Blocked plan holds: its tensors' storage and its Python numbers and containers."""
    seen = set() if seen is None else seen
    if isinstance(thing, (int, float, str, type(None))):  # each counted, shared (interned) or not
        return sys.getsizeof(thing)
    if id(thing) in seen:
        return 0
    seen.add(id(thing))
    if isinstance(thing, torch.Tensor):
        return thing.untyped_storage().nbytes()
    size = sys.getsizeof(thing)
    if isinstance(thing, dict):
        return size + sum(_held_bytes(k, seen) + _held_bytes(v, seen) for k, v in thing.items())
    if isinstance(thing, (list, tuple, set, frozenset)):
        return size + sum(_held_bytes(item, seen) for item in thing)
    if dataclasses.is_dataclass(thing):  # its fields' values (an instance dict's size varies as keys are shared)
        return size + sum(_held_bytes(getattr(thing, f.name), seen) for f in dataclasses.fields(thing))
    return size


@pytest.fixture(scope="module")
def long_decoder(bert_tokenizer):
    return attnscope.load(_llama(bert_tokenizer, max_position_embeddings=1024), bert_tokenizer, device="cpu")


def test_a_long_knockout_holds_edge_blocks_and_makes_no_t_by_t_tensor(long_decoder, monkeypatch):
    model = long_decoder
    plans: list = []
    blocking = engine_knockout.blocking
    monkeypatch.setattr(engine_knockout, "blocking", lambda plan: plans.append(plan) or blocking(plan))
    edges = [(1, None, -1, SPAN), (2, None, -1, SPAN), (3, 1, -1, SPAN)]
    held = {}
    for n in (512, 1024):
        ids = torch.randint(1000, 20000, (n,), generator=torch.Generator().manual_seed(n)).tolist()
        plans.clear()
        with _Tensors(model.model.config.vocab_size) as tensors:
            frame = attnscope.knockout(model, ids, edges=edges)
        knocked = [plan for plan in plans if plan.layers]
        assert len(knocked) == 1 and knocked[0].first_query == n - 1  # one pass: the last token through the cache
        held[n] = _held_bytes(knocked[0].layers)
        # The knocked pass's masks are heads × 1 × n; the model's largest tensors are n × its widths.
        assert tensors.largest_bool <= model.n_heads * n and tensors.largest < n * n // 4
        reference = _independent(model.model, torch.tensor([ids]), blocked_edges(model, n, edges), -1)
        plain = _independent(model.model, torch.tensor([ids]), {}, -1)
        target = int(plain.argmax())
        row = frame.iloc[0]
        assert abs(row.delta - float(reference[target] - plain[target])) <= 1e-5 and abs(row.delta) > 1e-4
    # What a run holds does not grow with the text: the same blocks at 512 and at 1,024 tokens.
    assert held[512] == held[1024] < model.n_heads * len(SPAN) * 100


def test_a_query_left_no_key_is_refused_among_many_blocked_queries(long_decoder):
    n = 1024
    ids = torch.randint(1000, 20000, (n,), generator=torch.Generator().manual_seed(n)).tolist()
    # Every query's edge to the first token blocked, and query 700's to every key it sees in head 2:
    # the blocked queries are checked a block of rows at a time before any run, 700 in the third
    # (read at 500, the knocked pass never computes its row: only that check sees it).
    edges = [(1, None, list(range(1, n)), 0), (1, 2, 700, list(range(701)))]
    with pytest.raises(InputError, match="in layer 1 leaves a query with no key to attend to"):
        attnscope.knockout(long_decoder, ids, edges=edges, position=500)
    assert attnscope.knockout(long_decoder, ids, edges=edges[:1], position=500).delta.iloc[0] != 0
