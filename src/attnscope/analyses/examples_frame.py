"""The DataFrame of a head's examples (HeadFinder.examples), shown with each text whole: pandas
cuts a cell at 50 characters (display.max_colwidth), before the [[query]] and <<key>> marks that
say where the head fires. Imported when examples are asked for: pandas stays out of `import
attnscope`."""

from __future__ import annotations

import textwrap

import pandas as pd

TEXT_WIDTH = 80  # a plain-text screen; a text column that wide makes pandas hide the others behind "..."


class ExamplesFrame(pd.DataFrame):
    """A DataFrame in every way but its display, which shows the texts whole."""

    @property
    def _constructor(self):  # a slice or a copy is the same kind of frame
        return ExamplesFrame

    def _repr_html_(self) -> str | None:
        with pd.option_context("display.max_colwidth", None):
            return super()._repr_html_()

    def __repr__(self) -> str:
        """The other columns as a table, then each row's text whole, wrapped under its row number:
        as one table the text would push score and keys behind pandas' "...". A frame too long to
        print whole is left to pandas."""
        if "text" not in self.columns or not len(self) or len(self) > (pd.get_option("display.max_rows") or len(self)):
            with pd.option_context("display.max_colwidth", None):
                return super().__repr__()
        rest = self.drop(columns="text")
        keys = {"keys": _short_keys} if "keys" in rest.columns else {}
        table = rest.to_string(formatters=keys, float_format="{:.3f}".format) if len(rest.columns) else ""
        texts = [textwrap.fill(str(text), width=TEXT_WIDTH, initial_indent=f"{index}: ",
                               subsequent_indent=" " * (len(str(index)) + 2), break_long_words=True)
                 for index, text in zip(self.index, self["text"])]
        return "\n".join([table] * bool(table) + ["text ([[query]], <<its strongest key>>):", *texts])


def _short_keys(keys) -> str:
    """The first three keys as "token 0.61, …": the rest are in the frame's cell."""
    if not isinstance(keys, (list, tuple)):
        return str(keys)
    shown = ", ".join(f"{token} {weight:.2f}" for token, weight in keys[:3])
    return shown + (", …" if len(keys) > 3 else "")
