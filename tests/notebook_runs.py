"""Running a notebook in a real kernel, as the notebook tests do, with one cell timeout.

The timeout is there to end a hung cell, not to time one: a cell of what_does_bert_look_at.ipynb
took over 300 s with a CPU-bound job beside the suite on a 2-core machine, and failed a run whose
every result was right. Speed is measured in `make bench`; here a cell may take up to 20 minutes,
which a hang still exceeds well inside CI's 90.
"""

from pathlib import Path

CELL_TIMEOUT_S = 1200


def execute(notebook, cwd: Path | str) -> None:
    """Run `notebook` (an nbformat node, changed in place) with `cwd` as its working folder."""
    # Imported here: nbclient costs each pytest worker ~2 s at collection, and `make test-fast`
    # runs no notebook.
    from nbclient import NotebookClient

    NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                   resources={"metadata": {"path": str(cwd)}}).execute()
