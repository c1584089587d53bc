"""The fault suite: every public entry point given what new users give it in their first week.

Each row is (id, what is done, the exception kind, the message it must say). A failure must name
the problem (and the parameter), never be a raw traceback from deep inside torch, transformers or
the file system, never a silently wrong number. Rows that need a model get the session's engines.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import warnings

import pytest
import torch
import traitlets
import transformers

import attnscope
from attnscope import InputError, ModelNotFoundError, checks
from attnscope.analyses import read_conllu

SMALL = dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=37, max_position_embeddings=64)
TEXTS = ["The cat sat on the mat.", "A dog barked at the mailman.", "It rained all day in the city."]


@pytest.fixture(scope="module")
def engine(default_model):
    return default_model


@pytest.fixture(scope="module")
def widget(engine):
    return attnscope.AttentionWidget("The cat sat on the mat.", model=engine)


@pytest.fixture(scope="module")
def small_bert(bert_tokenizer):
    torch.manual_seed(0)
    return attnscope.load(transformers.BertModel(transformers.BertConfig(vocab_size=30522, **SMALL)), bert_tokenizer, device="cpu")


@pytest.fixture(scope="module")
def nan_engine(bert_tokenizer):
    """A model whose layer 1 query weights of head 0 are NaN (as after a half-precision overflow)."""
    torch.manual_seed(0)
    model = transformers.BertModel(transformers.BertConfig(vocab_size=30522, **SMALL))
    with torch.no_grad():
        model.encoder.layer[1].attention.self.query.weight[:8] = float("nan")
    return attnscope.load(model, bert_tokenizer, device="cpu")


@pytest.fixture(scope="module")
def model_dir_without_tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("no-tokenizer")
    transformers.BertModel(transformers.BertConfig(vocab_size=100, **SMALL)).save_pretrained(path)
    return path


def _tiny_vocab_tokenizer(tmp_path):
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
    return transformers.BertTokenizer(vocab_file=str(tmp_path / "vocab.txt"))


# (id, action(fixtures) -> anything, exception kind, message regex)
CASES = [
    # --- parameters of the corpus analyses
    ("head_stats batch_size=0", lambda f: attnscope.head_stats(f.engine, TEXTS, batch_size=0, progress=False),
     InputError, r"batch_size=0 is too small: it must be at least 1"),
    ("head_stats batch_size=2.0", lambda f: attnscope.head_stats(f.engine, TEXTS, batch_size=2.0, progress=False),
     InputError, r"batch_size must be a whole number, not 2\.0"),
    ("head_distances batch_size=-1", lambda f: attnscope.head_distances(f.engine, TEXTS, batch_size=-1, progress=False),
     InputError, r"batch_size=-1 is too small"),
    ("head_importance batch_size=0", lambda f: attnscope.head_importance(f.engine, TEXTS, batch_size=0, progress=False),
     InputError, r"batch_size=0 is too small"),
    ("attention_gradients batch_size=True", lambda f: attnscope.attention_gradients(f.engine, TEXTS, batch_size=True, progress=False),
     InputError, r"batch_size must be a whole number, not True"),
    ("syntax_heads batch_size=0", lambda f: attnscope.syntax_heads(f.engine, f.conllu, batch_size=0, progress=False),
     InputError, r"batch_size=0 is too small"),
    ("head_stats max_length=0", lambda f: attnscope.head_stats(f.engine, TEXTS, max_length=0, progress=False),
     InputError, r"max_length=0 is too small: it must be at least 3"),
    ("head_stats max_length=1", lambda f: attnscope.head_stats(f.engine, TEXTS, max_length=1, progress=False),
     InputError, r"max_length=1 is too small"),
    ("head_stats max_length=-5", lambda f: attnscope.head_stats(f.engine, TEXTS, max_length=-5, progress=False),
     InputError, r"max_length=-5 is too small"),
    ("head_stats max_length past the model", lambda f: attnscope.head_stats(f.engine, TEXTS, max_length=5000, progress=False),
     InputError, r"max_length=5000 is longer than the model's 512 positions"),
    ("syntax_heads max_length=-5", lambda f: attnscope.syntax_heads(f.engine, f.conllu, max_length=-5, progress=False),
     InputError, r"max_length=-5 is too small"),
    ("head_importance max_length=1", lambda f: attnscope.head_importance(f.engine, TEXTS, max_length=1, progress=False),
     InputError, r"max_length=1 is too small"),
    ("corpus of numbers", lambda f: attnscope.head_stats(f.engine, 42, progress=False),
     InputError, r"The corpus must be texts"),
    ("corpus of empty texts", lambda f: attnscope.head_stats(f.engine, ["", "  "], progress=False),
     InputError, r"The corpus has no non-empty text"),
    ("contrastive loss, one text", lambda f: attnscope.head_importance(f.engine, TEXTS[:1], progress=False),
     InputError, r"compares texts in a batch, and the corpus holds 1: give at least 2 texts"),
    ("head_distances n_init=0", lambda f: attnscope.head_distances(f.engine, TEXTS, n_init=0, progress=False),
     InputError, r"n_init"),
    # --- one run and one widget
    ("run max_length=0", lambda f: f.engine.run("The cat sat.", max_length=0), InputError, r"max_length=0 is too small: it must be at least 3"),
    ("run max_length=1", lambda f: f.engine.run("The cat sat.", max_length=1), InputError, r"max_length=1 is too small"),
    ("run max_length=-5", lambda f: f.engine.run("The cat sat.", max_length=-5), InputError, r"max_length=-5 is too small"),
    ("run max_length=2 for a pair", lambda f: f.engine.run("The cat sat.", "It slept.", max_length=3),
     InputError, r"max_length=3 is too small: it must be at least 4"),
    ("run max_length='128'", lambda f: f.engine.run("The cat sat.", max_length="128"), InputError, r"max_length must be a whole number"),
    ("show max_length=0", lambda f: attnscope.show("The cat sat.", model=f.engine, max_length=0), InputError, r"max_length=0 is too small"),
    ("rollout residual=1.5", lambda f: attnscope.rollout(f.widget.result, residual=1.5), InputError, r"residual=1\.5 is outside \[0, 1\]"),
    ("rollout residual=-0.1", lambda f: attnscope.rollout(f.widget.result, residual=-0.1), InputError, r"residual=-0\.1 is outside \[0, 1\]"),
    ("rollout residual='half'", lambda f: attnscope.rollout(f.widget.result, residual="half"), InputError, r"residual must be a number between 0 and 1"),
    ("rollout residual=nan", lambda f: attnscope.rollout(f.widget.result, residual=float("nan")), InputError, r"residual must be a number"),
    ("thumbnail_size=0", lambda f: attnscope.AttentionWidget("Hi.", model=f.engine, thumbnail_size=0),
     InputError, r"thumbnail_size=0 is too small: it must be at least 1"),
    ("thumbnail_size=4.5", lambda f: attnscope.AttentionWidget("Hi.", model=f.engine, thumbnail_size=4.5),
     InputError, r"thumbnail_size must be a whole number"),
    ("layer=99", lambda f: attnscope.AttentionWidget("Hi.", model=f.engine, layer=99), InputError, r"layer=99 is out of range: the model has layers 0\.\.5"),
    ("layer=-1", lambda f: attnscope.AttentionWidget("Hi.", model=f.engine, layer=-1), InputError, r"layer=-1 is too small"),
    ("heads=[12]", lambda f: attnscope.AttentionWidget("Hi.", model=f.engine, heads=[12]), InputError, r"heads \[12\] are out of range"),
    ("heads=[-1]", lambda f: attnscope.AttentionWidget("Hi.", model=f.engine, heads=[-1]),
     InputError, r"heads has \[-1\] out of range: heads are numbered from 0"),
    ("heads=[1, 1]", lambda f: attnscope.AttentionWidget("Hi.", model=f.engine, heads=[1, 1]), InputError, r"heads names heads \[1\] more than once"),
    ("heads='0'", lambda f: attnscope.AttentionWidget("Hi.", model=f.engine, heads="0"), InputError, r"heads must be a list"),
    ("include_layers=[]", lambda f: attnscope.AttentionWidget("Hi.", model=f.engine, include_layers=[]), InputError, r"include_layers=\[\] selects nothing"),
    ("include_layers=[6]", lambda f: attnscope.AttentionWidget("Hi.", model=f.engine, include_layers=[6]),
     InputError, r"include_layers has \[6\] out of range: layers are numbered 0\.\.5"),
    ("include_heads=[0.5]", lambda f: attnscope.AttentionWidget("Hi.", model=f.engine, include_heads=[0.5]),
     InputError, r"include_heads must hold whole numbers; 0\.5 is not one"),
    ("save_html layers=[]", lambda f: f.widget.save_html(f.tmp_path / "x.html", layers=[]), InputError, r"layers=\[\] selects nothing"),
    ("save_html layers=[6]", lambda f: f.widget.save_html(f.tmp_path / "x.html", layers=[6]), InputError, r"layers has \[6\] out of range"),
    ("masked head out of range", lambda f: attnscope.AttentionWidget("Hi.", model=f.engine, masked_heads=[(6, 0)]),
     InputError, r"Cannot mask head \(6, 0\)"),
    ("masked head (1.5, 2)", lambda f: attnscope.AttentionWidget("Hi.", model=f.engine, masked_heads=[(1.5, 2)]),
     InputError, r"masked head's layer must be a whole number, not 1\.5"),
    ("masked head 4", lambda f: f.engine.run("Hi.", masked_heads=[4]), InputError, r"Cannot mask head 4: heads to mask are \(layer, head\) pairs"),
    ("slide height='tall'", lambda f: f.widget.slide(height="tall"), InputError, r"height must be a whole number"),
    ("head_stats of a file name", lambda f: attnscope.head_stats(f.engine, "corpus.txt", progress=False),
     InputError, r"The corpus 'corpus\.txt' is a file name, and attnscope analyses texts"),
    ("head_importance of a path", lambda f: attnscope.head_importance(f.engine, f.tmp_path / "corpus.txt", progress=False),
     InputError, r"is a file name"),
    # --- widget traits, assigned later (from Python or the front end)
    ("trait layer=99", lambda f: setattr(f.widget, "layer", 99), traitlets.TraitError, r"layer=99 is out of range"),
    ("trait heads=[99]", lambda f: setattr(f.widget, "heads", [99]), traitlets.TraitError, r"heads has \[99\] out of range: heads are numbered 0\.\.11"),
    ("trait neuron_head=99", lambda f: setattr(f.widget, "neuron_head", 99), traitlets.TraitError,
     r"neuron_head=99 is out of range: the heads are numbered 0\.\.11"),
    ("trait neuron_query=-1", lambda f: setattr(f.widget, "neuron_query", -1), traitlets.TraitError,
     r"neuron_query=-1 is out of range: the query tokens are numbered 0\.\.\d+"),
    ("trait neuron_query=999", lambda f: setattr(f.widget, "neuron_query", 999), traitlets.TraitError, r"neuron_query=999 is out of range"),
    ("trait include_layers=[9]", lambda f: setattr(f.widget, "include_layers", [9]), traitlets.TraitError, r"include_layers has \[9\] out of range"),
    ("trait include_heads=[]", lambda f: setattr(f.widget, "include_heads", []), traitlets.TraitError, r"include_heads=\[\] selects nothing"),
    # --- text that could be a path, a path that does not exist
    ("read_conllu of a long text", lambda f: read_conllu("word " * 2000), InputError, r"CoNLL-U line 1 has 1 tab-separated fields"),
    ("read_conllu of a missing file", lambda f: read_conllu("parses/dev.conllu"), InputError, r"No such CoNLL-U file: 'parses/dev\.conllu'"),
    ("read_conllu of a missing path", lambda f: read_conllu(f.tmp_path / "missing.conllu"), InputError, r"No such CoNLL-U file"),
    ("syntax_heads of a missing file", lambda f: attnscope.syntax_heads(f.engine, "dev.conllu", progress=False),
     InputError, r"No such CoNLL-U file: 'dev\.conllu'"),
    ("load of a sentence", lambda f: attnscope.load("The cat sat on the mat and looked at the dog " * 20),
     ModelNotFoundError, r"is neither a local directory nor a Hugging Face name"),
    ("load of a missing directory", lambda f: attnscope.load("./models/my-bert"), ModelNotFoundError, r"No such model directory: './models/my-bert'"),
    ("load of a long path", lambda f: attnscope.load("/" + "x" * 300), ModelNotFoundError, r"No such model directory"),
    ("load, device='gpu'", lambda f: attnscope.load(device="gpu"), InputError, r"device='gpu' is not a device"),
    ("load, device='meta'", lambda f: attnscope.load(device="meta"), InputError, r"device='meta' holds no weights"),
    # --- what models and tokenizers bring
    ("tokenizer past the embedding table", lambda f: attnscope.load(
        transformers.BertModel(transformers.BertConfig(vocab_size=1000, **SMALL)), f.bert_tokenizer, device="cpu").run("The cat sat on the mat."),
     InputError, r"token id \d+, but .* embedding table has 1000 rows \(ids 0\.\.999\): the tokenizer \(vocabulary of 30522\) does not belong"),
    ("model directory without tokenizer files", lambda f: attnscope.load(f.model_dir_without_tokenizer),
     ModelNotFoundError, r"has no tokenizer files .* so every word would become \[UNK\]"),
    ("every word [UNK]", lambda f: attnscope.load(
        transformers.BertModel(transformers.BertConfig(vocab_size=100, **SMALL)), _tiny_vocab_tokenizer(f.tmp_path), device="cpu").run("The cat sat."),
     InputError, r"Every token of the text is the unknown token \[UNK\]"),
    ("model on the meta device", lambda f: attnscope.load(f.meta_model, f.bert_tokenizer), InputError, r"weights are on the 'meta' device"),
    ("model offloaded by device_map", lambda f: attnscope.load(f.offloaded_model, f.bert_tokenizer), InputError,
     r"offloaded with device_map \(parts on 0, disk\)"),
    ("device= for a model spread by device_map", lambda f: attnscope.load(f.dispatched_model, f.bert_tokenizer, device="cpu"),
     InputError, r"spread over devices by its device_map: leave device= out"),
    ("NaN attention in an analysis", lambda f: attnscope.head_stats(f.nan_engine, ["", *TEXTS], progress=False),
     InputError, r"Text 1 of the corpus gives NaN or infinite attention in heads 1-0, 2-0, 2-1, 2-2, 2-3 \(layer-head\)"),
    ("NaN attention in head_importance", lambda f: attnscope.head_importance(f.nan_engine, TEXTS, loss=lambda o, e: o.last_hidden_state.sum(), progress=False),
     InputError, r"Text 0 of the corpus gives NaN"),
]


class Fixtures:
    """What the table's actions may use, made lazily so each row builds only what it needs."""

    def __init__(self, request, tmp_path):
        self._request, self.tmp_path = request, tmp_path

    def __getattr__(self, name):
        if name == "conllu":
            path = self.tmp_path / "tiny.conllu"
            path.write_text("1\tThe\t_\tDET\t_\t_\t2\tdet\t_\t_\n2\tcat\t_\tNOUN\t_\t_\t3\tnsubj\t_\t_\n3\tsat\t_\tVERB\t_\t_\t0\troot\t_\t_\n\n")
            return path
        if name == "meta_model":
            with torch.device("meta"):
                return transformers.BertModel(transformers.BertConfig(vocab_size=100, **SMALL))
        if name == "offloaded_model":
            model = transformers.BertModel(transformers.BertConfig(vocab_size=100, **SMALL))
            model.hf_device_map = {"embeddings": 0, "encoder": "disk"}  # as accelerate records it
            return model
        if name == "dispatched_model":
            model = transformers.BertModel(transformers.BertConfig(vocab_size=30522, **SMALL))
            model.hf_device_map = {"": "cpu"}  # dispatched whole to one device: it stays there
            return model
        return self._request.getfixturevalue(name)


@pytest.mark.parametrize("action, kind, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_fault(action, kind, message, request, tmp_path):
    with pytest.raises(kind, match=message):
        action(Fixtures(request, tmp_path))


def test_a_model_dispatched_by_device_map_stays_where_it_is(bert_tokenizer):
    model = transformers.BertModel(transformers.BertConfig(vocab_size=30522, **SMALL))
    model.hf_device_map = {"": "cpu"}
    model.to = None  # moving a dispatched model would undo its dispatch: never called
    result = attnscope.load(model, bert_tokenizer).run("The cat sat.")
    assert result.attention.shape[:2] == (3, 4)


def test_a_failed_trait_assignment_keeps_the_view(widget):
    before = (widget.layer, list(widget.heads), widget.neuron_head, widget.neuron_query)
    for name, value in (("layer", 99), ("heads", [99]), ("neuron_head", 99), ("neuron_query", -1)):
        with pytest.raises(traitlets.TraitError):
            setattr(widget, name, value)
    assert (widget.layer, list(widget.heads), widget.neuron_head, widget.neuron_query) == before


def test_nan_attention_is_named_in_a_warning_and_in_the_view(nan_engine):
    with pytest.warns(attnscope.engine.nonfinite.NonFiniteAttentionWarning, match=r"NaN or infinite values in 5 of 12 heads \(layer-head\): 1-0, 2-0, 2-1, 2-2, 2-3\."):
        result = nan_engine.run("The cat sat on the mat.")
    assert (1, 0) in result.nonfinite_heads and (0, 0) not in result.nonfinite_heads
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the widget says it in its notice, not twice under the cell
        widget = attnscope.AttentionWidget("The cat sat on the mat.", model=nan_engine, layer=1)
    assert "NaN or infinite values" in widget.notice and "1-0, 2-0" in widget.notice
    # The bytes sent for a NaN head are zeros (nothing drawn), never undefined casts.
    layer = attnscope.serialize.decode(widget.attention)
    assert layer[0].abs().sum() == 0 and layer[1:].sum() > 0


def test_decoder_truncation_gets_the_encoders_notice(bert_tokenizer):
    model = transformers.BartModel(transformers.BartConfig(
        vocab_size=30522, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37, max_position_embeddings=16,
        pad_token_id=0, bos_token_id=101, eos_token_id=102, decoder_start_token_id=101))
    engine = attnscope.load(model, bert_tokenizer, device="cpu")
    long = " ".join(["word"] * 40)
    with pytest.warns(UserWarning, match=r"Decoder text truncated from 42 to 16 tokens"):
        result = engine.run("A short source.", long)
    assert len(result.parts["decoder"].tokens) == 16 and result.decoder_truncated_from == 42
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        widget = attnscope.AttentionWidget("A short source.", long, model=engine)
    assert "Decoder text truncated: 42 tokens → 16" in widget.notice
    assert "Input truncated" not in widget.notice


def test_contrastive_loss_with_a_last_batch_of_one(engine):
    nine = [f"{t} ({i})" for i, t in enumerate(TEXTS * 3)]
    importance = attnscope.head_importance(engine, nine, batch_size=8, progress=False)
    assert importance.attrs["documents"] == 9 and importance["value"].notna().all()
    gradients = attnscope.attention_gradients(engine, nine, batch_size=8, progress=False)
    assert gradients["value"].notna().all()


def test_pairwise_batches_never_leave_one_alone():
    from attnscope.analyses.losses import _pairwise_batches

    assert [len(b) for b in _pairwise_batches(list(range(9)), 8)] == [7, 2]
    assert [len(b) for b in _pairwise_batches(list(range(3)), 2)] == [3]
    assert [len(b) for b in _pairwise_batches(list(range(16)), 8)] == [8, 8]
    assert sorted(x for b in _pairwise_batches(list(range(17)), 8) for x in b) == list(range(17))


def test_two_threads_on_one_model_each_get_their_own_queries_and_keys(engine):
    texts = ["The cat sat on the mat.", "Colourless green ideas sleep furiously tonight, said the linguist."]
    alone = [engine.run(t) for t in texts]
    results: dict[int, list] = {0: [], 1: []}
    caught: list = []

    def work(which):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for _ in range(6):
                results[which].append(engine.run(texts[which]))
        caught.extend(seen)

    threads = [threading.Thread(target=work, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not [w for w in caught if "Could not capture" in str(w.message)]
    for which in (0, 1):
        for result in results[which]:
            assert torch.allclose(result.queries, alone[which].queries, atol=1e-5)
            assert torch.allclose(result.keys, alone[which].keys, atol=1e-5)
            assert torch.allclose(result.attention_from_qk(), result.attention, atol=1e-5)


def test_save_image_request_ids_are_unique(widget, monkeypatch, tmp_path):
    sent = []
    monkeypatch.setattr(widget, "send", lambda content, buffers=None: sent.append(content))
    monkeypatch.setattr(widget, "_rendered", True, raising=False)
    first = widget.save_image(tmp_path / "a.svg")
    widget._handle_custom_msg({"kind": "reply", "type": "image", "id": sent[0]["id"], "format": "svg"}, [b"<svg/>"])
    assert first.done
    second = widget.save_image(tmp_path / "b.svg")
    third = widget.save_image(tmp_path / "c.svg")
    assert len({m["id"] for m in sent}) == 3
    widget._handle_custom_msg({"kind": "reply", "type": "image", "id": sent[2]["id"], "format": "svg"}, [b"<svg>c</svg>"])
    assert third.done and not second.done and (tmp_path / "c.svg").read_bytes() == b"<svg>c</svg>"


# --- the command line: one line on stderr, a non-zero exit, never a traceback


def _cli(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "attnscope.edges.cli", *args], capture_output=True, text=True, timeout=300, **kwargs)


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("attnscope: error:")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr, stderr
    return lines[0]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cli_device_cuda_without_cuda(tmp_path):
    out = _cli("render", "Hi.", "--device", "cuda", "-o", str(tmp_path / "x.html"))
    assert out.returncode == 2
    assert "device='cuda', but PyTorch sees no CUDA GPU" in _error_line(out.stderr)
    assert not (tmp_path / "x.html").exists()


def test_cli_model_without_tokenizer_does_not_write_a_page_of_unk(tmp_path, model_dir_without_tokenizer):
    out = _cli("render", "Hi there.", "--model", str(model_dir_without_tokenizer), "-o", str(tmp_path / "x.html"))
    assert out.returncode == 2
    assert "has no tokenizer files" in _error_line(out.stderr)
    assert not (tmp_path / "x.html").exists()


@pytest.mark.parametrize("args, message", [
    (["render", "Hi.", "-o", "/no/such/folder/x.html"], r"the folder /no/such/folder does not exist"),
    (["render", "Hi.", "--layers", "0,x", "-o", "x.html"], r"argument --layers: layers are integers"),
    (["render", "Hi."], r"the following arguments are required: -o/--output"),
    (["render", "Hi.", "--layers", "9", "-o", "{tmp}/x.html"], r"layers has \[9\] out of range"),
    (["render", "Hi.", "-o", "{tmp}"], r"is a folder"),
])
def test_cli_errors_are_one_line(args, message, tmp_path):
    out = _cli(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert out.returncode == 2
    import re

    assert re.search(message, _error_line(out.stderr))


def test_cli_opens_the_page_on_any_declared_view_and_says_which_a_run_cannot_show(tmp_path):
    from attnscope.edges.cli import build_parser
    from attnscope.widget.views import VIEW_NAMES

    view_option = next(a for a in build_parser()._subparsers._group_actions[0].choices["render"]._actions if a.dest == "view")
    assert tuple(view_option.choices) == VIEW_NAMES
    out = _cli("render", "The cat sat.", "--view", "rollout", "-o", str(tmp_path / "r.html"))
    assert out.returncode == 0, out.stderr
    assert '"view":"rollout"' in (tmp_path / "r.html").read_text().replace(" ", "")
    out = _cli("render", "The cat sat.", "--view", "map", "-o", str(tmp_path / "m.html"))
    assert out.returncode == 2 and "The map view is for long inputs" in _error_line(out.stderr)
    assert not (tmp_path / "m.html").exists()


def test_cli_unexpected_failure_and_ctrl_c(monkeypatch, capsys, tmp_path):
    from attnscope.edges import cli

    def crash(_args):
        raise RuntimeError("CUDA error: device-side assert triggered\nsecond line")

    monkeypatch.setattr(cli, "_render", crash)
    assert cli.main(["render", "Hi.", "-o", str(tmp_path / "x.html")]) == 1
    err = capsys.readouterr().err
    assert err == "attnscope: error: RuntimeError: CUDA error: device-side assert triggered second line\n"

    def interrupted(_args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_render", interrupted)
    assert cli.main(["render", "Hi.", "-o", str(tmp_path / "x.html")]) == 130
    assert capsys.readouterr().err == ""


NO_TORCH = """
import sys
from attnscope.edges import cli
try:
    code = cli.main(sys.argv[1:])
except SystemExit as exc:  # argparse's own exits (--help, a malformed option)
    code = exc.code
print(code, "torch" in sys.modules, "transformers" in sys.modules)
"""


@pytest.mark.parametrize("args, code, said", [
    (["--help"], 0, "render"),
    (["render", "  ", "-o", "{tmp}/x.html"], 2, "The text is empty: type a sentence to see its attention."),
    (["render", "Hi.", "--text-b", "", "-o", "{tmp}/x.html"], 2, "text_b is empty"),
    (["render", "Hi.", "-o", "{tmp}/no/such/x.html"], 2, "does not exist"),
    (["render", "Hi.", "--layers", "0,x", "-o", "{tmp}/x.html"], 2, "--layers"),
    (["render", "Hi.", "--layers", "0,9", "-o", "{tmp}/x.html"], 2, "--layers has [9] out of range: layers are numbered 0..5"),
    (["render", "Hi.", "--layers", "2,2", "-o", "{tmp}/x.html"], 2, "--layers names layers [2] more than once"),
    (["render", "Hi.", "--model", "{tmp}/two", "--layers", "2", "-o", "{tmp}/x.html"], 2, "layers are numbered 0..1"),
], ids=["help", "empty text", "empty text-b", "missing folder", "bad layers", "layer past the embedded's",
        "layer twice", "layer past a folder's config"])
def test_cli_help_and_refused_arguments_import_no_torch(args, code, said, tmp_path):
    """Issue 45 §10: help and the argument checks come before the model's side is imported (torch
    and transformers took 2-16 s), and nothing is written. --layers is checked against the model's
    config.json where it is at hand (the embedded default's; a folder's, here one of 2 layers)."""
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "config.json").write_text('{"model_type": "bert", "num_hidden_layers": 2}')
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    out = subprocess.run([sys.executable, "-c", NO_TORCH, *args], capture_output=True, text=True, timeout=120)
    assert out.stdout.splitlines()[-1] == f"{code} False False", out.stderr
    assert said in out.stdout + out.stderr
    assert not (tmp_path / "x.html").exists()


@pytest.mark.slow  # a fresh interpreter
def test_importing_attnscope_imports_its_names_on_first_use():
    """The package's names load on first use (PEP 562), each the same object its module holds."""
    out = subprocess.run([sys.executable, "-c", "import sys, attnscope; print('torch' in sys.modules); "
                          "from attnscope.engine.attention_model import load; print(attnscope.load is load); "
                          "print(sorted(set(attnscope.__all__) - set(dir(attnscope))))"],
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.split("\n")[:3] == ["False", "True", "[]"], out.stderr
    import attnscope

    with pytest.raises(AttributeError, match="has no attribute 'nonesuch'"):
        attnscope.nonesuch  # noqa: B018


# --- sizes: what a page or a user sends is checked in time linear in it, and bounded by what it indexes
# Measured as the elements read (CountedReads), not as wall-clock time: a loaded 2-core machine, or a
# garbage collection set off by the big list, once made a linear check look quadratic. Where the
# work is not reads of the input, the inputs are large enough that linear and quadratic lie orders
# of magnitude apart, and the time allowed is generous.

class CountedReads(list):
    """A list that counts its elements read, by index or by iterating over it."""

    def __init__(self, items):
        super().__init__(items)
        self.reads = 0

    def __getitem__(self, index):
        self.reads += len(range(*index.indices(len(self)))) if isinstance(index, slice) else 1
        return super().__getitem__(index)

    def __iter__(self):
        for item in super().__iter__():
            self.reads += 1
            yield item


def _refused(check, *args, seconds: float = 5.0):
    start = time.perf_counter()
    with pytest.raises(InputError) as caught:
        check(*args)
    elapsed = time.perf_counter() - start
    assert elapsed < seconds, f"{elapsed:.1f} s"
    return str(caught.value)


def test_index_lists_are_checked_in_linear_time_and_refused_by_their_size():
    # Repeats were found with values.count per element: 20,000 repeats of one head took 0.12 s and
    # a million (a 2 MB message from a page) minutes; in linear time a million take a tenth of a second.
    message = _refused(checks.indices, "heads", [3] * 1_000_000, None, "heads")
    assert message == "heads names heads [3] more than once."
    for values in (CountedReads([3] * 1_000_000), CountedReads(range(1_000_000))):
        message = _refused(checks.indices, "heads", values, 12, "heads")
        assert message == ("heads lists 1,000,000 heads, but there are only 12 (heads 0..11): "
                           "a list of distinct heads is at most 12 long.")
        assert values.reads == 0  # refused from its size, before any element is read
    endless = iter(range(10**12))  # read no further than one past the count
    assert "lists more than 12 heads" in _refused(checks.indices, "heads", endless, 12, "heads")
    assert next(endless) == 13
    # Within the size, every repeat and every bad value is still named (a few, then how many more).
    assert checks.indices("heads", [5, 1, 0], 12, "heads") == [5, 1, 0]
    with pytest.raises(InputError, match=r"heads names heads \[1, 2\] more than once"):
        checks.indices("heads", [2, 1, 1, 2], 12, "heads")
    with pytest.raises(InputError, match=r"heads has \[-15, -14, -13, -12, -11, -10, -9, -8, -7, -6, … 5 more\] out of range"):
        checks.indices("heads", list(range(-15, 0)), None, "heads")


def test_masked_heads_are_refused_by_their_size(engine):
    total = engine.n_layers * engine.n_heads
    pairs = CountedReads([(0, 0)] * 1_000_000)
    message = _refused(engine.head_mask, pairs)
    assert message == f"masked_heads lists 1,000,000 heads, but {engine.name} has {total} (6 layers × 12 heads): list each head once."
    assert pairs.reads <= total + 1  # no further than one past the model's heads
    with pytest.raises(InputError, match=r"masked_heads must be a list of \(layer, head\) pairs, e\.g\. \[\(4, 2\), \(5, 11\)\], not int"):
        engine.head_mask(4)
    assert engine.head_mask([(0, 1), (0, 1)])[0, 1] == 0  # a repeat within the size is still fine


def test_word_groups_of_many_precomputed_tokens_take_linear_time():
    from attnscope.engine.texts import groups_from_tokens

    # Whether the tokens mark spaces was asked again for every token (every token read again for
    # each): 20,000 tokens took 43 s. Each token is read a few times, whatever their number.
    for pairs in (1_000, 10_000):
        tokens = CountedReads(["[CLS]", *(["word", "##piece"] * pairs), "[SEP]"])
        groups = groups_from_tokens(tokens, ["[CLS]", "[SEP]"])
        assert tokens.reads <= 3 * len(tokens), (pairs, tokens.reads)
        assert len(groups) == pairs + 2 and groups[1] == [1, 2]


@pytest.fixture(scope="module")
def long_result(engine):
    return engine.run("The cat sat on the mat. " * 5, attention="on_demand")


@pytest.mark.parametrize("rows, message", [
    ([1.7, 3], r"rows start must be a whole number, not 1\.7 \(float\)"),  # was read as [1, 3]
    ([True, 3], r"rows start must be a whole number, not True"),
    ("ab", r"rows must be a \(start, end\) pair of positions, not 'ab'"),  # was a raw ValueError
    (None, r"rows must be a \(start, end\) pair of positions, not None"),  # was a raw TypeError
    (list(range(1_000_000)), r"^rows must be a \(start, end\) pair of positions, not \[0, 1, 2, 3, 4, 5, \.\.\.\]\.$"),
], ids=["float", "bool", "string", "None", "a million"])
def test_a_tile_request_with_bad_spans_names_them_briefly(long_result, rows, message):
    from attnscope.widget import payloads

    with pytest.raises(InputError, match=message):
        payloads.long_tile_payload(long_result, 0, 0, rows, [0, 5], 4)


def test_messages_never_echo_a_megabyte_back(long_result):
    from attnscope.widget import payloads

    for action in (lambda: checks.integer("layer", "x" * 2_000_000), lambda: checks.fraction("residual", "x" * 2_000_000),
                   lambda: payloads.long_rows_payload(long_result, 0, 0, 1, "x" * 2_000_000),
                   lambda: long_result.pooled_tile(0, 0, (0, 5), (0, 5), (4, 4), "x" * 2_000_000)):
        with pytest.raises(InputError) as caught:
            action()
        assert len(str(caught.value)) < 200


# --- texts with UTF-16 surrogates (half characters: bytes read with errors="surrogateescape", a
# JavaScript string cut in half). A text to run is refused, naming where; tokens to show are mended.

HALF = "ab\ud800c"
SURROGATE = r"is '\\ud800', a UTF-16 surrogate: half of a character, which no tokenizer reads"
ATTENTION = tuple(torch.full((1, 2, 3, 3), 1 / 3) for _ in range(2))

SURROGATE_CASES = [
    ("run", lambda f: f.engine.run(HALF), rf"^text\[2\] {SURROGATE}"),
    ("run text_b", lambda f: f.engine.run("Hi.", "x" + HALF), rf"^text_b\[3\] {SURROGATE}"),
    ("run, a batch of one", lambda f: f.engine.run([HALF]), rf"^text\[0\]\[2\] {SURROGATE}"),
    ("AttentionWidget", lambda f: attnscope.AttentionWidget(HALF, model=f.engine), rf"^text\[2\] {SURROGATE}"),
    ("show", lambda f: attnscope.show(HALF, model=f.engine), rf"^text\[2\] {SURROGATE}"),
    ("render_html", lambda f: attnscope.render_html(HALF, model=f.engine), rf"^text\[2\] {SURROGATE}"),
    ("widget.update", lambda f: f.widget.update("Fine.", HALF), rf"^text_b\[2\] {SURROGATE}"),
    ("neuron_view", lambda f: attnscope.neuron_view(f.engine.model, "bert", f.engine.tokenizer, HALF),
     rf"^sentence_a\[2\] {SURROGATE}"),
    ("head_stats", lambda f: attnscope.head_stats(f.engine, ["Fine.", HALF], progress=False), rf"^corpus\[1\]\[2\] {SURROGATE}"),
    ("head_importance of pairs", lambda f: attnscope.head_importance(f.engine, [("Fine.", "Also."), ("Fine.", HALF)], progress=False),
     rf"^corpus\[1\]\[1\]\[2\] {SURROGATE}"),
    ("attention_sinks of a corpus", lambda f: attnscope.attention_sinks(f.engine, [HALF], progress=False),
     rf"^corpus\[0\]\[2\] {SURROGATE}"),
    ("syntax_heads of texts", lambda f: attnscope.syntax_heads(f.engine, ["Fine.", HALF], progress=False),
     rf"^corpus\[1\]\[2\] {SURROGATE}"),
    ("read_conllu", lambda f: read_conllu("# a comment\n1\tab\ud800\t_\tX\t_\t_\t0\troot\t_\t_\n"),
     rf"^CoNLL-U line 2, column 5, {SURROGATE}"),
]


@pytest.mark.parametrize("action, message", [c[1:] for c in SURROGATE_CASES], ids=[c[0] for c in SURROGATE_CASES])
def test_a_text_with_a_surrogate_is_refused_naming_where(action, message, request, tmp_path):
    with pytest.raises(InputError, match=message) as caught:
        action(Fixtures(request, tmp_path))
    str(caught.value).encode("utf-8")  # the message itself can be sent to a page and printed


def test_a_widget_edit_with_a_surrogate_says_why_and_keeps_the_view(engine):
    from jupyter_client.session import json_packer

    widget = attnscope.AttentionWidget("The cat sat.", model=engine)
    tokens = list(widget.tokens)
    with pytest.raises(InputError, match=rf"^text\[2\] {SURROGATE}"):
        widget.text = HALF
    assert widget.text == "The cat sat." and widget.tokens == tokens
    widget.request = {"id": 3, "text": HALF}  # as a page sends an edit: JSON.stringify escapes a lone surrogate
    assert widget.error.startswith("text[2] is '\\ud800'") and widget.tokens == tokens
    # The comm can send what the kernel sets (`request` is the page's own value, which it holds).
    json_packer({name: value for name, value in widget.get_state().items() if name != "request"})


@pytest.mark.parametrize("call", ["head_view", "model_view", "encoder-decoder"])
def test_precomputed_tokens_with_a_surrogate_are_shown_as_replacement_characters(call, tmp_path):
    from jupyter_client.session import json_packer

    tokens = ["[CLS]", HALF, "[SEP]"]
    with pytest.warns(UserWarning, match=r"tokens \[1\] held UTF-16 surrogates \(half characters\), which no page can show") as said:
        if call == "head_view":
            widget = attnscope.head_view(ATTENTION, tokens)
        elif call == "model_view":
            widget = attnscope.model_view(ATTENTION, tokens, prettify_tokens=False)
        else:
            widget = attnscope.head_view(encoder_attention=ATTENTION, cross_attention=ATTENTION, decoder_attention=ATTENTION,
                                         encoder_tokens=tokens, decoder_tokens=tokens)
    assert said[0].filename == __file__  # the warning names the user's line
    assert widget.tokens[1] == "ab\ufffdc" and widget.result.tokens[1] == "ab\ufffdc"
    if call != "model_view":  # prettified: the token's hover note says what it held
        assert widget.token_notes[1] == "given with U+D800 (half a character), shown as U+FFFD"
    if call == "encoder-decoder":
        widget.attention_part = "cross"
        assert widget.key_tokens[1] == "ab\ufffdc" and "U+D800" in widget.key_token_notes[1]
    json_packer(widget.get_state())  # a UnicodeEncodeError inside the comm before
    page = widget.save_html(tmp_path / "tokens.html").read_text(encoding="utf-8")
    assert "ab\ufffdc" in page


def test_the_command_line_names_a_byte_that_is_not_utf8(tmp_path):
    out = subprocess.run([sys.executable.encode(), b"-m", b"attnscope.edges.cli", b"render", b"ab\xffc", b"-o", str(tmp_path / "x.html").encode()],
                         capture_output=True, timeout=300)
    assert out.returncode == 2
    assert out.stderr.decode().strip().splitlines() == [
        "attnscope: error: the text is not UTF-8: byte 0xff at character 2. Give it in UTF-8 (is the terminal's locale "
        "UTF-8, e.g. LANG=C.UTF-8?)."]
    assert not (tmp_path / "x.html").exists()


# --- the wrong kind of object: each public entry point says what it got and what it wants, or
# takes it where a user would expect (a widget stands for its run). Each row raised a raw
# AttributeError or TypeError, or went on silently wrong, before.

WRONG_KIND_CASES = [
    ("a widget given a number as its result", lambda f: attnscope.AttentionWidget(result=5),
     r"^result= reads one run: a result \(model\.run\(text\)\) or a widget, not an int\.$"),
    ("rollout of a DataFrame", lambda f: attnscope.rollout(f.stats),
     r"^rollout reads one run: a result \(model\.run\(text\)\) or a widget, not a DataFrame \(an analysis: show it with widget\.show_analysis\)\.$"),
    ("rollout of None", lambda f: attnscope.rollout(None), r"^rollout reads one run: .*, not None\.$"),
    ("rollout of a tensor", lambda f: attnscope.rollout(torch.zeros(2, 2, 3, 3)), r"not a Tensor\.$"),
    ("rollout of a long run", lambda f: attnscope.rollout(f.long_result),
     r"^rollout needs the full attention, and this run of \d+ tokens keeps it on demand .*attention='full'"),
    ("word_attention of a model", lambda f: attnscope.word_attention(f.engine), r"^word_attention reads one run: .*not an AttentionModel\.$"),
    ("attention_sinks of a string", lambda f: attnscope.attention_sinks("The cat sat."), r"^attention_sinks reads one run: .*not a str\.$"),
    ("behaviours of a result", lambda f: attnscope.behaviours(f.widget.result),
     r"^behaviours labels heads from what head_stats returns \(a DataFrame of head, label, layer, measure, value\), not an AttentionResult\.$"),
    ("behaviours of head_distances", lambda f: attnscope.behaviours(f.stats[["layer", "head"]]),
     r"^behaviours labels heads from what head_stats returns .*, not a DataFrame of layer, head\.$"),
    ("head_stats of a widget", lambda f: attnscope.head_stats(f.widget, TEXTS, progress=False),
     r"^head_stats runs a model from attnscope\.load\(\.\.\.\), not an AttentionWidget: a widget's model is widget\.engine\.$"),
    ("head_distances of a Hugging Face model", lambda f: attnscope.head_distances(f.engine.model, TEXTS, progress=False),
     r"^head_distances runs a model from attnscope\.load\(\.\.\.\), not a BertModel: load it once with its tokenizer"),
    ("head_importance of a name", lambda f: attnscope.head_importance("bert-base-uncased", TEXTS, progress=False),
     r"^head_importance runs a model .*not a str: load it once, model = attnscope\.load\('bert-base-uncased'\)\.$"),
    ("attention_gradients of None", lambda f: attnscope.attention_gradients(None, TEXTS, progress=False), r"^attention_gradients runs a model .*not None\.$"),
    ("syntax_heads of a tokenizer", lambda f: attnscope.syntax_heads(f.engine.tokenizer, f.conllu, progress=False),
     r"^syntax_heads runs a model .*not a BertTokenizer"),
    ("a corpus that is a dict", lambda f: attnscope.head_stats(f.engine, {"a": "The cat sat."}, progress=False),
     r"^The corpus is a dict, whose keys would be read as texts: pass the texts, e\.g\. list\(corpus\.values\(\)\)\.$"),
    ("a corpus that is bytes", lambda f: attnscope.head_stats(f.engine, b"The cat sat.\nDogs bark.", progress=False),
     r"^The corpus is bytes: decode them into texts first"),
    ("a corpus DataFrame of two string columns", lambda f: attnscope.head_stats(f.engine, f.stats, progress=False),
     r"^Which column holds the text\? Pass column= one of \['layer', 'head', 'label', 'measure', 'value'\]\.$"),
    ("read_conllu of None", lambda f: read_conllu(None), r"^read_conllu reads a CoNLL-U file's path or its text, not None\.$"),
    ("read_conllu of bytes that are not UTF-8", lambda f: read_conllu(b"1\t\xff"), r"^These CoNLL-U bytes are not UTF-8 \(byte 2\)"),
    ("load of a widget", lambda f: attnscope.load(f.widget),
     r"^model must be None \(the embedded all-MiniLM-L6-v2\), a Hugging Face name or path, or a PreTrainedModel, not an "
     r"AttentionWidget \(a widget's model is widget\.engine\)\.$"),
    ("load of a tokenizer", lambda f: attnscope.load(f.engine.tokenizer),
     r"^model is a tokenizer \(BertTokenizer(Fast)?\): load\(model, tokenizer\) takes the model first\.$"),
    ("load, model and tokenizer swapped", lambda f: attnscope.load(f.engine.model, f.engine.model),
     r"^tokenizer must be the model's Hugging Face tokenizer \(AutoTokenizer\.from_pretrained\(\.\.\.\)\), a name or a path, "
     r"not a BertModel: load\(model, tokenizer\) takes the model first\.$"),
    ("load of a loaded model with a tokenizer", lambda f: attnscope.load(f.engine, f.engine.tokenizer),
     r"^This model is loaded already \(an AttentionModel\)"),
    ("show, model= a DataFrame", lambda f: attnscope.show("Hi.", model=f.stats), r"^model must be None .*not a DataFrame\.$"),
    ("AttentionWidget, tokenizer= a list", lambda f: attnscope.AttentionWidget("Hi.", model=f.engine.model, tokenizer=["a"]),
     r"^tokenizer must be the model's Hugging Face tokenizer .*not a list\.$"),
    ("render_html, model= an int", lambda f: attnscope.render_html("Hi.", model=3), r"^model must be None .*not an int\.$"),
    ("neuron_view of a widget", lambda f: attnscope.neuron_view(f.widget, "bert", f.engine.tokenizer, "Hi."),
     r"^model must be None .*not an AttentionWidget"),
    ("head_view, tokens a string", lambda f: attnscope.head_view(ATTENTION, "abc"),
     r"^tokens must be a list of tokens, not a str \(which would be read as one token per character\): "
     r"e\.g\. tokenizer\.convert_ids_to_tokens\(inputs\['input_ids'\]\[0\]\)\.$"),
    ("head_view, tokens the tokenizer's output", lambda f: attnscope.head_view(ATTENTION, {"input_ids": [[1, 2, 3]]}),
     r"^tokens must be a list of tokens, not a dict \(the tokenizer's output\?\)"),
    ("head_view, tokens as ids", lambda f: attnscope.head_view(ATTENTION, torch.tensor([101, 7592, 102])),
     r"^tokens must hold strings, and holds 101 \(token ids\?\): e\.g\. tokenizer\.convert_ids_to_tokens"),
    ("head_view, tokens a batch of ids", lambda f: attnscope.head_view(ATTENTION, torch.tensor([[101, 7592, 102]])),
     r"^tokens must be one list of tokens, not a Tensor of shape \[1, 3\]"),
    ("model_view, tokens a widget", lambda f: attnscope.model_view(ATTENTION, f.widget), r"^tokens must be a list of tokens, not an AttentionWidget"),
    ("head_view, encoder_tokens a string", lambda f: attnscope.head_view(encoder_attention=ATTENTION, encoder_tokens="abc"),
     r"^encoder_tokens must be a list of tokens, not a str"),
    ("head_view, sentence_b_start a string", lambda f: attnscope.head_view(ATTENTION, ["a", "b", "c"], sentence_b_start="1"),
     r"^sentence_b_start must be a whole number, not '1' \(str\)\.$"),
    ("head_view, layer a tensor", lambda f: attnscope.head_view(ATTENTION, ["a", "b", "c"], layer=torch.zeros(2)),
     r"^layer must be a whole number, not a Tensor\.$"),  # its repr ran over lines
    ("model_view, include_heads a string", lambda f: attnscope.model_view(ATTENTION, ["a", "b", "c"], include_heads="01"),
     r"^include_heads must be a list of head numbers, not '01'\.$"),
]


class WrongKindFixtures(Fixtures):
    def __getattr__(self, name):
        if name == "stats":
            return attnscope.head_stats(self.engine, TEXTS[:2], progress=False)
        if name == "long_result":
            return self._request.getfixturevalue("long_result")
        return super().__getattr__(name)


@pytest.mark.parametrize("action, message", [c[1:] for c in WRONG_KIND_CASES], ids=[c[0] for c in WRONG_KIND_CASES])
def test_the_wrong_kind_of_object_is_named(action, message, request, tmp_path):
    with pytest.raises(InputError, match=message):
        action(WrongKindFixtures(request, tmp_path))


def test_a_widget_stands_for_its_run(engine):
    widget = attnscope.AttentionWidget("The keeper fed the lions.", model=engine, word_level=True)
    # rollout(widget) raised AttributeError: 'dict' object has no attribute 'float' (it read the attention trait).
    assert torch.equal(attnscope.rollout(widget), attnscope.rollout(widget.token_result))
    assert attnscope.word_attention(widget).tokens == attnscope.word_attention(widget.token_result).tokens
    assert attnscope.attention_sinks(widget).equals(attnscope.attention_sinks(widget.token_result))
    assert attnscope.load(engine) is engine  # loaded already: as it is
    widget.close()
    with pytest.raises(InputError, match="This widget was closed"):
        attnscope.rollout(widget)


def test_a_corpus_data_frame_is_read_by_its_text_column(engine):
    import pandas as pd

    frame = pd.DataFrame({"id": [1, 2, 3], "text": TEXTS})
    docs = attnscope.analyses.documents(frame)  # was its column names, "id" and "text", as two texts
    assert list(docs) == [(t, None) for t in TEXTS]
    pairs = attnscope.analyses.documents(pd.DataFrame({"q": ["A?"], "a": ["B."], "n": [0]}), column=("q", "a"))
    assert list(pairs) == [("A?", "B.")]
    with pytest.raises(InputError, match=r"The DataFrame has no column 'body'; it has \['id', 'text'\]"):
        attnscope.analyses.documents(frame, column="body")


def test_precomputed_tokens_may_be_an_array_or_a_series():
    import numpy as np
    import pandas as pd

    for tokens in (np.array(["[CLS]", "hi", "[SEP]"]), pd.Series(["[CLS]", "hi", "[SEP]"]), ("[CLS]", "hi", "[SEP]")):
        assert attnscope.head_view(ATTENTION, tokens).tokens == ["[CLS]", "hi", "[SEP]"]
