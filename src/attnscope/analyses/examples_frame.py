"""The DataFrame of a head's examples (HeadFinder.examples), shown with each text whole: pandas
cuts a cell at 50 characters (display.max_colwidth), before the [[query]] and <<key>> marks that
say where the head fires. Imported when examples are asked for: pandas stays out of `import
attnscope`."""

from __future__ import annotations

import pandas as pd


class ExamplesFrame(pd.DataFrame):
    """A DataFrame in every way but its display, which shows the texts whole."""

    @property
    def _constructor(self):  # a slice or a copy is the same kind of frame
        return ExamplesFrame

    def _repr_html_(self) -> str | None:
        with pd.option_context("display.max_colwidth", None):
            return super()._repr_html_()

    def __repr__(self) -> str:
        with pd.option_context("display.max_colwidth", None):
            return super().__repr__()
