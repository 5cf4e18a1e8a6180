"""The page's inline assets: its style sheet and its script, read from package data.

``static/report.css`` and ``static/report.js`` are written into every page verbatim, so a
report needs no server (docs/report.md).
"""

from __future__ import annotations

from importlib.resources import files

__all__ = ["REPORT_CSS", "REPORT_JS"]


def _asset(name: str, closing_tag: str) -> str:
    """The asset's text; it must not hold its element's closing tag (it is inlined)."""
    text = files("clinenv.report").joinpath("static", name).read_text(encoding="utf-8")
    if closing_tag in text.lower():
        raise RuntimeError(f"clinenv/report/static/{name} holds {closing_tag!r}, which "
                           "would end its inline element")
    return text


#: The page's style sheet.
REPORT_CSS = _asset("report.css", "</style")
#: The page's script.
REPORT_JS = _asset("report.js", "</script")
