"""mkdocs hook: the site's home page is README.md.

README stays the one copy of the overview. Its links point into docs/ from the repository
root (``docs/cdeg.md``); on the home page, which mkdocs renders from ``docs/index.md``,
the same targets are ``cdeg.md``, so the hook drops the ``docs/`` prefix and mkdocs then
checks every link as it checks the other pages' (``mkdocs build --strict``).
"""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri != "index.md":
        return markdown
    text = README.read_text(encoding="utf-8")
    return re.sub(r"(\]\(|\]: )docs/", r"\1", text)
