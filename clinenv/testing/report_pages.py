"""Run logs and page parsing shared by the report tests (core and browser).

:func:`demo_logs` runs the scripted doctor through ``clinenv run`` (in process) on the
bundled demo cases under EGIP and under AgentClinic's native loop, so the report has two
methods to compare. :func:`hostile_log` rewrites one of them with text that would break
out of markup or script if it were ever inserted as HTML. :func:`page_parts` reads a
page back with the standard library's HTML parser, independently of clinenv.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

from clinenv.testing.cli_calls import clinenv_main

#: Strings a log may hold that must render as text: tags, closing tags, quotes, entities
#: and the JavaScript line separators.
HOSTILE = [
    '<script>window.__pwned = 1;</script>',
    '</div></section><b onmouseover="x()">bold</b>',
    '</script><script>window.__pwned = 2;</script>',
    "it's \"quoted\" & &amp; <!-- comment --> <img src=x onerror=\"window.__pwned=3\">",
    "line\u2028separator\u2029paragraph",
]


def demo_logs(folder: Path, repetitions: int = 1) -> tuple[Path, Path]:
    """``(native.jsonl, egip.jsonl)``: the scripted doctor on the demo cases under
    ``AgentClinic-Demo-v0`` and ``EGIP-Demo-v0``."""
    main = clinenv_main()
    native, egip = folder / "native.jsonl", folder / "egip.jsonl"
    for env, out in (("AgentClinic-Demo-v0", native), ("EGIP-Demo-v0", egip)):
        code = main(["run", "--env", env, "--doctor", "scripted", "--repetitions",
                     str(repetitions), "--quiet", "--out", str(out)])
        assert code == 0
    return native, egip


def hostile_log(source: Path, out: Path) -> Path:
    """``source`` with hostile text in the first line's answer, target, first patient
    reply, first doctor question and objective; the other lines as they are."""
    lines = source.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["answer"] = HOSTILE[0]
    first["target"] = HOSTILE[1]
    for event in first["events"]:
        if event["source"] == "patient":
            event["reply"] = HOSTILE[2]
            break
    for event in first["events"]:
        if event["source"] == "doctor" and event["routed_as"] == "question":
            event["text"] = HOSTILE[3]
            break
    first["evidence"]["objective"] = HOSTILE[4]
    lines[0] = json.dumps(first, ensure_ascii=False)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


class _Parts(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self._in_script: dict[str, str | None] | None = None
        self._buffer: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script, self._buffer = dict(attrs), []

    def handle_endtag(self, tag):
        if tag == "script" and self._in_script is not None:
            self.scripts.append((self._in_script, "".join(self._buffer)))
            self._in_script = None

    def handle_data(self, data):
        if self._in_script is not None:
            self._buffer.append(data)


def page_parts(html_text: str) -> tuple[dict, list, list]:
    """``(island data, [(script attrs, text)], [(tag, attrs)])`` of a report page."""
    parser = _Parts()
    parser.feed(html_text)
    parser.close()
    islands = [text for attrs, text in parser.scripts if attrs.get("type") == "application/json"]
    assert len(islands) == 1, "one JSON data island"
    return json.loads(islands[0]), parser.scripts, parser.tags


def string(data: dict, ref: int | None) -> str | None:
    """The island string of index ``ref``."""
    return None if ref is None else data["strings"][ref]
