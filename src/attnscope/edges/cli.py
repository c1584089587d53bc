"""`attnscope render "text" -o out.html`: the views as one offline HTML file, without a notebook."""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

from .. import checks
from ..checks import first_surrogate, texts_given
from ..engine import hub
from ..errors import AttnscopeError, InputError
from ..files import describe_size, writable_path, write_atomic
from ..widget.views import VIEW_NAMES


def _layers(value: str) -> list[int]:
    try:
        return [int(part) for part in value.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"layers are integers like '0 5 11' or '0,5,11', not {value!r}") from None


class _Parser(argparse.ArgumentParser):
    """Usage mistakes as one line, like every other failure (argparse prints the whole usage)."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"attnscope: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="attnscope", description="See what a transformer looks at.")
    commands = parser.add_subparsers(dest="command", required=True)
    render = commands.add_parser("render", help="write the views as one offline HTML file")
    render.add_argument("text", help="the sentence (sentence A of a pair)")
    render.add_argument("--text-b", help="sentence B of a pair")
    render.add_argument("--model", help="a Hugging Face name or local path (default: the embedded all-MiniLM-L6-v2)")
    render.add_argument("--layers", type=_layers, help="layers to include, e.g. '0,5,11' (default: all)")
    render.add_argument("--view", choices=VIEW_NAMES, default="head",
                        help="the view the page opens on (text and map are for long inputs; neuron and rollout for short ones)")
    render.add_argument("--device", help="cpu or cuda (default: cuda when available)")
    render.add_argument("-o", "--output", type=Path, required=True, help="the HTML file to write (.html or .htm; a name without a suffix gets .html)")
    return parser


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def main(argv: list[str] | None = None) -> int:
    """Every failure is one line on stderr, `attnscope: error: ...`, and a non-zero exit (2 for
    bad input, 1 for anything else); never a traceback. Ctrl-C exits 130 without a word."""
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            code = _render(args)
        for warning in caught:
            if issubclass(warning.category, UserWarning):
                print(f"attnscope: warning: {_one_line(warning.message)}", file=sys.stderr)
        return code
    except KeyboardInterrupt:
        return 130
    except AttnscopeError as exc:
        print(f"attnscope: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:  # the message names the file and what is wrong with it
        print(f"attnscope: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:
        print(f"attnscope: error: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return 1


def _check_utf8(name: str, text: str | None) -> None:
    """Python reads command-line bytes that are not UTF-8 as surrogates (errors="surrogateescape"):
    say which byte, where."""
    at = first_surrogate(text) if text else None
    if at is None:
        return
    code = ord(text[at])
    what = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X} (half a character)"
    raise InputError(f"{name} is not UTF-8: {what} at character {at}. Give it in UTF-8 (is the terminal's "
                     "locale UTF-8, e.g. LANG=C.UTF-8?).")


def _render(args: argparse.Namespace) -> int:
    # Before the model loads (seconds): a text that cannot be read or a page that cannot be written is known now.
    for name, text in (("the text", args.text), ("--text-b", args.text_b)):
        _check_utf8(name, text)
    texts_given(args.text, args.text_b)
    # -o analysis.ipynb is refused; -o page writes page.html; a missing folder or too long a name is said now.
    given = args.output.expanduser()
    output = writable_path("-o", given, "html")
    if given.is_dir():
        raise InputError(f"-o {args.output} is a folder; give the HTML file to write, e.g. {args.output / 'attention.html'}.")
    # --layers against the model's config.json where it is at hand (the embedded default, a folder,
    # the hub cache); otherwise the page checks them once the model has loaded.
    checks.indices("--layers", args.layers, hub.config_layers(args.model), "layers")
    # The model's side (torch, transformers: seconds to import) only once the arguments are taken:
    # --help and a refused argument need none of it.
    from tqdm.auto import tqdm

    from ..engine.attention_model import load
    from ..widget.attention_widget import AttentionWidget
    from ..widget.export import widget_html

    told: list[str] = []
    start = time.perf_counter()
    with tqdm(total=4, desc="attnscope", unit="step", file=sys.stderr) as steps:
        steps.set_postfix_str(f"loading {args.model or 'the embedded all-MiniLM-L6-v2'}")
        engine = load(args.model, device=args.device)
        steps.update()
        steps.set_postfix_str("running the model")
        widget = AttentionWidget(args.text, args.text_b, engine, view=args.view)
        steps.update()
        steps.set_postfix_str("building the page")
        page = widget_html(widget, args.layers)
        steps.update()
        steps.set_postfix_str(f"writing {output}")
        write_atomic(output, page, file_format="html", say=told.append)
        steps.update()
    # One line: "replaced out.html (was 12 kB, now 1.2 MB)" when a file was there.
    done = next((line for line in told if line.startswith("replaced")), None)
    size = describe_size(len(page.encode("utf-8")))
    print(f"attnscope: {done or f'wrote {output} ({size})'} in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
