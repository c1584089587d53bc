"""The trait contract between the kernel and the views, documented once, at each trait.

Every synced trait of AttentionWidget is declared with `synced(trait, doc, writer=, page=)`:
- doc: what it holds (and the shape of a payload);
- writer: who sets it: "kernel", "view" (the browser) or "both";
- page: what a saved page (js/standalone.js, no kernel) does when the view changes it:
  "view" keeps the change (it only affects drawing), "layer" serves the saved layer's attention,
  "edit" answers as the kernel answers a failed edit, "fixed" refuses it and says a kernel is
  needed (the page shows the view as it was saved).

js/contract.js lists the same names for the view's subscriptions; tests/test_contract.py compares
the two, and the saved page carries the page behaviours from here (export.page_traits).
"""

from __future__ import annotations

from typing import Any

import traitlets

WRITERS = ("kernel", "view", "both")
PAGE_BEHAVIOURS = ("view", "layer", "edit", "fixed")


def synced(trait: traitlets.TraitType, doc: str, *, writer: str = "kernel", page: str = "fixed", label: str = "") -> Any:
    """`trait`, synced to the views, with its contract: `doc`, `writer`, `page` behaviour, and the
    `label` a saved page uses to say it cannot change it."""
    if writer not in WRITERS or page not in PAGE_BEHAVIOURS:
        raise ValueError(f"writer must be one of {WRITERS} and page one of {PAGE_BEHAVIOURS}")
    trait.help = doc
    return trait.tag(sync=True, writer=writer, page=page, label=label)


def contract_traits(widget_class: type) -> dict[str, traitlets.TraitType]:
    """The synced traits declared with `synced` (anywidget's and ipywidgets' own are not ours)."""
    return {
        name: trait
        for name, trait in widget_class.class_traits(sync=True).items()
        if trait.metadata.get("writer") is not None
    }


def page_traits(widget_class: type) -> dict[str, dict[str, str]]:
    """For a saved page: each view-written trait's page behaviour and label."""
    return {
        name: {"page": trait.metadata["page"], "label": trait.metadata.get("label") or name}
        for name, trait in contract_traits(widget_class).items()
        if trait.metadata["writer"] in ("view", "both")
    }


def contract_markdown(widget_class: type) -> str:
    """The contract as a Markdown table (ARCHITECTURE.md quotes it)."""
    rows = ["| trait | writer | saved page | what it holds |", "|---|---|---|---|"]
    for name, trait in contract_traits(widget_class).items():
        doc = " ".join((trait.help or "").split()).replace("|", "\\|")
        rows.append(f"| `{name}` | {trait.metadata['writer']} | {trait.metadata['page']} | {doc} |")
    return "\n".join(rows)
