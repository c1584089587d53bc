"""`attnscope render "text" -o out.html`: the views as one offline HTML file, without a notebook."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .errors import AttnscopeError


def _layers(value: str) -> list[int]:
    try:
        return [int(part) for part in value.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"layers are integers like '0 5 11' or '0,5,11', not {value!r}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnscope", description="See what a transformer looks at.")
    commands = parser.add_subparsers(dest="command", required=True)
    render = commands.add_parser("render", help="write the head, model and neuron views as one offline HTML file")
    render.add_argument("text", help="the sentence (sentence A of a pair)")
    render.add_argument("--text-b", help="sentence B of a pair")
    render.add_argument("--model", help="a Hugging Face name or local path (default: the embedded all-MiniLM-L6-v2)")
    render.add_argument("--layers", type=_layers, help="layers to include, e.g. '0,5,11' (default: all)")
    render.add_argument("--view", choices=("head", "model", "neuron"), default="head", help="the view the page opens on")
    render.add_argument("--device", help="cpu or cuda (default: cuda when available)")
    render.add_argument("-o", "--output", type=Path, required=True, help="the HTML file to write")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from tqdm.auto import tqdm

    from .engine import load  # torch and transformers load here, after --help
    from .export import widget_html
    from .widget import AttentionWidget

    start = time.perf_counter()
    steps = tqdm(total=4, desc="attnscope", unit="step", file=sys.stderr)
    try:
        steps.set_postfix_str(f"loading {args.model or 'the embedded all-MiniLM-L6-v2'}")
        engine = load(args.model, device=args.device)
        steps.update()
        steps.set_postfix_str("running the model")
        widget = AttentionWidget(args.text, args.text_b, engine, view=args.view)
        steps.update()
        steps.set_postfix_str("building the page")
        page = widget_html(widget, args.layers)
        steps.update()
        steps.set_postfix_str(f"writing {args.output}")
        args.output.write_text(page, encoding="utf-8")
        steps.update()
    except (AttnscopeError, ValueError, OSError) as exc:
        steps.close()
        print(f"attnscope: error: {exc}", file=sys.stderr)
        return 2
    steps.close()
    size = len(page.encode("utf-8"))
    print(f"attnscope: wrote {args.output} ({size / 1e6:.1f} MB) in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
