"""`make contract`: regenerate js/transport/contract.js, js/views/view_modules.js, js/views/layout_modules.js
and the contract table that ends ARCHITECTURE.md from the widget's `synced(...)` declarations
(attnscope.widget.contract renders them; run from the repository root)."""

from pathlib import Path

from attnscope.widget.attention_widget import AttentionWidget
from attnscope.widget.contract import CONTRACT_HEADING, contract_js, contract_markdown, layout_modules_js, view_modules_js


def main(js: str = "js", architecture: str = "ARCHITECTURE.md") -> None:
    folder = Path(js)
    (folder / "transport" / "contract.js").write_text(contract_js(AttentionWidget), encoding="utf-8")
    # The views' and the layouts' registries sit beside the modules they import ("./<name>_view.js").
    (folder / "views" / "view_modules.js").write_text(view_modules_js(), encoding="utf-8")
    (folder / "views" / "layout_modules.js").write_text(layout_modules_js(), encoding="utf-8")
    page = Path(architecture)
    text = page.read_text(encoding="utf-8")
    head = text[: text.index(CONTRACT_HEADING) + len(CONTRACT_HEADING)]
    page.write_text(f"{head}\n{contract_markdown(AttentionWidget)}\n", encoding="utf-8")


if __name__ == "__main__":
    main()
