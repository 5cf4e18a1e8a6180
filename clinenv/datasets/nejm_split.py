"""Split NEJM ``physical_exams`` free text into named test records.

The LLM-extracted test text (AgentClinic data facts, section 5.6) becomes a tree of
depth 1 or 2 with string leaves; see :func:`split_test_findings`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: Name of the record that holds findings with no name of their own.
FALLBACK_NAME = "Reported findings"

_MAX_NAME_WORDS = 12
_MAX_NAME_CHARS = 100

_NAME = r"[A-Z](?:[^.:;()\n]|\([^()\n]*\)){0,100}?"
_NAME_SENTENCE = re.compile(r"(?<=[.;])\s+(?=" + _NAME + r":(?:\s|$))")
_INLINE_BULLET = re.compile(r"\s[-\u2022]\s+(?=[^\s\d])")
_BULLET_START = re.compile(r"^(?:[-*\u2022]|\d{1,2}[.)])\s+")
_NUMBER = re.compile(r"(?<![\w.,])(\d{1,2})[.)]\s+(?=\S)")
_SENTENCE_END = re.compile(r"[.;]\s+")
_HEADER_TAIL = re.compile(
    r"\s+(?:includes?|included|including|indicated|showed|shown|revealed|demonstrated|"
    r"are as follows|is as follows|as follows|were|are|is)$",
    re.IGNORECASE,
)
_PREAMBLE = re.compile(
    r"\b(?:information|extracted|case report|instrument readings?|as follows|the following|"
    r"summary|relevant|here (?:are|is))\b",
    re.IGNORECASE,
)
_LEADING_PREAMBLE = re.compile(r"^([^:\n]{0,300}?):\s*")

_REFUSAL_ANY = re.compile(
    r"\bI(?:'|\u2019)?m sorry\b|\bI am sorry\b|\bI apologi[sz]e\b|"
    r"\b(?:cannot|can't|can\u2019t|can not|unable to)\s+"
    r"(?:generate|provide|extract|report|give|create|identify)\b",
    re.IGNORECASE,
)
_REFUSAL_START = re.compile(
    r"^\s*(?:there (?:are|is|were|was) no|no)\s+(?:specific\s+)?(?:numerical\s+)?"
    r"(?:test results|instrument readings|laboratory|lab results|tests)\b",
    re.IGNORECASE,
)
_REFUSAL_SENTENCE = re.compile(
    r"\b(?:does|do|did)\s*(?:not|n't|n\u2019t)\s+"
    r"(?:contain|include|provide|mention|report|list|specify|have|describe)\b|"
    r"\bthere (?:are|is|were|was) no\b",
    re.IGNORECASE,
)
_SOURCE_WORD = re.compile(
    r"\b(?:provided|given|case|text|report|information|description|scenario|passage|"
    r"vignette|to report|to extract|instrument readings?)\b",
    re.IGNORECASE,
)
_TESTISH = re.compile(r"test|reading|result|laborator|imaging|measurement|numerical|data",
                      re.IGNORECASE)


def is_refusal(text: str) -> bool:
    """Whether the text is an LLM refusal / "no test results" statement.

    True for an apology or "cannot generate/provide/extract...", for text opening with
    "There are no test results..." / "No instrument readings...", and for a sentence
    that says the source "does not contain/include/mention..." (or "there are no...")
    test results or readings while referring to the source (provided, case, text,
    report, information...).
    """
    if _REFUSAL_ANY.search(text) or _REFUSAL_START.search(text):
        return True
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        if (_REFUSAL_SENTENCE.search(sentence) and _SOURCE_WORD.search(sentence)
                and _TESTISH.search(sentence)):
            return True
    return False


def _depths(text: str) -> list[int]:
    """Bracket depth before each character (``(``/``[`` open, ``)``/``]`` close)."""
    depth, out = 0, []
    for ch in text:
        if ch in ")]":
            depth = max(0, depth - 1)
        out.append(depth)
        if ch in "([":
            depth += 1
    return out


def _split_top(text: str, pattern: re.Pattern[str]) -> list[str]:
    """Split ``text`` at matches of ``pattern`` that lie outside brackets."""
    depth = _depths(text)
    pieces, start = [], 0
    for m in pattern.finditer(text):
        if depth[m.start()] == 0 and m.start() > start:
            pieces.append(text[start:m.start()])
            start = m.end()
    pieces.append(text[start:])
    return [p for p in (piece.strip() for piece in pieces) if p]


def _split_numbered(line: str) -> list[str]:
    """Split an inline numbered list ``1. A 2. B`` (numbers must run 1, 2, 3...)."""
    depth = _depths(line)
    cuts, expect = [], 1
    for m in _NUMBER.finditer(line):
        if depth[m.start()] == 0 and int(m.group(1)) == expect:
            cuts.append(m)
            expect += 1
    if len(cuts) < 2:
        return [line]
    pieces = [line[: cuts[0].start()]]
    for m, nxt in zip(cuts, [*cuts[1:], None], strict=True):
        pieces.append(line[m.end(): nxt.start() if nxt else len(line)])
    return [p for p in (piece.strip() for piece in pieces) if p]


def _first_top_colon(text: str) -> int | None:
    """Index of the first ``:`` outside brackets that is not between two digits."""
    depth = _depths(text)
    for i, ch in enumerate(text):
        if ch != ":" or depth[i]:
            continue
        if 0 < i < len(text) - 1 and text[i - 1].isdigit() and text[i + 1].isdigit():
            continue
        return i
    return None


def _clean_value(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().rstrip(".;,").strip()


def _clean_name(text: str) -> str:
    return re.sub(r"\s+", " ", _BULLET_START.sub("", text.strip())).strip(" :-")


def _valid_name(name: str) -> bool:
    return 0 < len(name.split()) <= _MAX_NAME_WORDS and len(name) <= _MAX_NAME_CHARS


def _header_name(body: str) -> str | None:
    """The record name a group header gives, or ``None`` for a preamble."""
    if len(body.split()) >= 4 and _PREAMBLE.search(body):
        return None
    name = _clean_name(body)
    while True:
        shorter = _HEADER_TAIL.sub("", name)
        if shorter == name:
            break
        name = shorter
    return name if _valid_name(name) else None


def _split_trailing_header(rest: str) -> tuple[str, str | None]:
    """Split ``"value Header"`` (the text before a closing ``:``) into its two parts."""
    depth = _depths(rest)
    ends = [m for m in _SENTENCE_END.finditer(rest) if depth[m.start()] == 0]
    if ends and len(rest[ends[-1].end():].split()) <= _MAX_NAME_WORDS:
        return rest[: ends[-1].start() + 1], rest[ends[-1].end():]
    for m in re.finditer(r"(?<=\s)[A-Z]", rest):
        tail = rest[m.start():]
        if depth[m.start()] == 0 and ")" not in tail and len(tail.split()) <= _MAX_NAME_WORDS:
            return rest[: m.start()], tail
    return rest, None


@dataclass
class _Entry:
    """One record: a named ``Name: result`` item, or the unnamed findings of a group
    (``named=False``, one part per finding)."""

    name: str
    parts: list[str] = field(default_factory=list)
    named: bool = True


@dataclass
class _Group:
    """The items that follow a group header, in order (named entries and at most one
    unnamed entry collecting the unnamed findings)."""

    name: str
    items: list[_Entry] = field(default_factory=list)
    unnamed: _Entry | None = None

    @property
    def named(self) -> bool:
        return any(item.named for item in self.items)


@dataclass(frozen=True)
class _Piece:
    """One item of the text.

    Attributes:
        text: the item, bullet marker removed.
        follows_bullet: it directly follows an inline bullet separator, so it may end
            with the next group's header (``"- New anemia Imaging:"``).
        line_start: ``None`` unless the item opens a line; then whether that line opens
            with a bullet marker (``-``, ``*``, ``1.``...).
    """

    text: str
    follows_bullet: bool
    line_start: bool | None


def _pieces(text: str) -> list[_Piece]:
    out = []
    for line in text.split("\n"):
        line = line.strip()
        first = True
        for chunk in _split_numbered(line):
            chunk = _BULLET_START.sub("", chunk).strip()
            for i, piece in enumerate(_split_top(chunk, _INLINE_BULLET)):
                for j, sub in enumerate(_split_top(piece, _NAME_SENTENCE)):
                    sub = _BULLET_START.sub("", sub).strip()
                    if sub:
                        bullet = bool(_BULLET_START.match(line)) if first else None
                        out.append(_Piece(sub, i > 0 and j == 0, bullet))
                        first = False
    return out


def _parse(text: str) -> tuple[list[_Entry | _Group], bool]:
    """Top-level entries and groups in order, and whether any group header was seen."""
    entries: list[_Entry | _Group] = []
    header: str | None = None
    group: _Group | None = None
    loose: _Entry | None = None  # unnamed findings outside any group
    bullet_lines = False  # the current header is followed by bullet lines
    saw_header = False

    def set_header(body: str) -> None:
        nonlocal header, group, loose, bullet_lines, saw_header
        header, group, loose, bullet_lines = _header_name(body), None, None, False
        saw_header = saw_header or header is not None

    def current_group() -> _Group | None:
        nonlocal group
        if header is not None and group is None:
            group = _Group(header)
            entries.append(group)
        return group

    def add_named(name: str, value: str) -> None:
        target = current_group()
        (entries if target is None else target.items).append(_Entry(name, [value]))

    def add_unnamed(text: str) -> None:
        nonlocal loose
        target = current_group()
        if target is None:
            if loose is None:
                loose = _Entry(FALLBACK_NAME, named=False)
                entries.append(loose)
            loose.parts.append(_clean_value(text))
            return
        if target.unnamed is None:
            target.unnamed = _Entry(FALLBACK_NAME, named=False)
            target.items.append(target.unnamed)
        target.unnamed.parts.append(_clean_value(text))

    for item in _pieces(text):
        piece, follows_bullet = item.text, item.follows_bullet
        if item.line_start is not None and header is not None:
            if item.line_start:
                bullet_lines = True
            elif bullet_lines:  # a plain line after the header's bullet lines ends it
                set_header("")
        if piece.endswith(":"):
            body = piece[:-1].rstrip()
            colon = _first_top_colon(body)
            name = _clean_name(body[:colon]) if colon is not None else ""
            if colon is not None and _valid_name(name):
                value, tail = _split_trailing_header(body[colon + 1:].strip())
                if _clean_value(value):
                    add_named(name, _clean_value(value))
                set_header(tail or "")
                continue
            value, tail = _split_trailing_header(body) if follows_bullet else ("", body)
            if tail is not None and _clean_value(value):
                add_unnamed(value)
                set_header(tail)
            else:
                set_header(body)
            continue
        colon = _first_top_colon(piece)
        if colon is not None:
            name, value = _clean_name(piece[:colon]), _clean_value(piece[colon + 1:])
            if _valid_name(name) and value:
                add_named(name, value)
                continue
        add_unnamed(piece)
    return entries, saw_header


def _unique(name: str, used: set[str]) -> str:
    """``name``, or ``name (2)``, ``name (3)``... when already used (case-insensitive)."""
    unique, n = name, 1
    while unique.casefold() in used:
        n += 1
        unique = f"{name} ({n})"
    used.add(unique.casefold())
    return unique


def _value(entry: _Entry) -> str:
    return "; ".join(p for p in entry.parts if p)


def _drop_preamble(text: str) -> str:
    m = _LEADING_PREAMBLE.match(text)
    if m and len(m.group(1).split()) >= 4 and _PREAMBLE.search(m.group(1)):
        return text[m.end():]
    return text


def split_test_findings(text: str | None) -> dict[str, str | dict[str, str]]:
    """Turn NEJM ``physical_exams`` free text into ``{test name: result}``.

    Args:
        text: the free text (``None`` or blank gives ``{}``).

    Returns:
        Records in text order. A result is a string, or for a group header whose
        bullets are ``"Name: result"`` items a nested ``{item name: result}`` (unnamed
        bullets of a group are joined with ``"; "``; unstructured prose is one record
        named :data:`FALLBACK_NAME`); repeated names get ``" (2)"``, ``" (3)"``
        suffixes; ``{}`` for a refusal or empty text.

    Examples:
        >>> split_test_findings("Labs: - Hb: 10 g/dL - WBC: 12,000/mm3")
        {'Labs': {'Hb': '10 g/dL', 'WBC': '12,000/mm3'}}
        >>> split_test_findings("Labs showed: - Anemia - Leukocytosis")
        {'Labs': 'Anemia; Leukocytosis'}
    """
    if not text or not text.strip():
        return {}
    clean = text.replace("\r\n", "\n").replace("\r", "\n")
    clean = re.sub(r"\*\*|__|^#+\s*", "", clean, flags=re.MULTILINE).strip()
    body = _drop_preamble(clean)
    entries, saw_header = _parse(body)
    if not any(e.named for e in entries):
        if is_refusal(clean):
            return {}
        if not saw_header:
            return {FALLBACK_NAME: re.sub(r"\s+", " ", body).strip()} if body.strip() else {}
    out: dict[str, str | dict[str, str]] = {}
    used: set[str] = set()
    for entry in entries:
        if isinstance(entry, _Group) and entry.named:
            items: dict[str, str] = {}
            used_items: set[str] = set()
            for item in entry.items:
                if value := _value(item):
                    items[_unique(item.name, used_items)] = value
            out[_unique(entry.name, used)] = items
            continue
        if isinstance(entry, _Group):  # unnamed findings only: one string record
            value = "; ".join(v for item in entry.items if (v := _value(item)))
        else:
            value = _value(entry)
        if value:
            out[_unique(entry.name, used)] = value
    return out
