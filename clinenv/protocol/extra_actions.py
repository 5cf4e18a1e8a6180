"""CDEG's extra acquisition actions: clinical-history review and knowledge retrieval.

``REVIEW HISTORY`` and ``RETRIEVE KNOWLEDGE: <query>`` (CDEG "Problem Setup", Eq. 1),
off unless ``history_review`` / ``knowledge_source`` enable them (docs/cdeg.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from clinenv.errors import CaseFormatError
from clinenv.protocol.parser import split_reasoning

__all__ = ["FORMAT", "HISTORY_RECORD", "ExtraAction", "KnowledgeEntry", "KnowledgeSource",
           "extra_actions_hint", "read_extra_action"]

#: Name of the knowledge-source file format (docs/cdeg.md).
FORMAT = "clinenv.knowledge/1"
#: Readable name of the clinical-history record (the ``Clinical_History`` test group).
HISTORY_RECORD = "Clinical History"
#: Entries returned per query.
TOP_K = 3
#: Characters of one entry's text shown.
ENTRY_CHARS = 600

_NOISE = re.compile(r"[*`#>]+")
_REVIEW = re.compile(r"review\s+(?:the\s+)?(?:clinical\s+)?history\b[\s:.\-]*(.*)",
                     re.IGNORECASE | re.DOTALL)
_KNOWLEDGE = re.compile(r"(?:retrieve|search)\s+knowledge\s*:\s*(.*)",
                        re.IGNORECASE | re.DOTALL)
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("the and for with what which are was were how does this that from into "
                  "about when who whom why can could should would patient patients".split())


@dataclass(frozen=True)
class ExtraAction:
    """A recognised extra action: ``kind`` and its ``payload`` (the topic or query)."""

    kind: Literal["history_review", "knowledge_query"]
    payload: str


def read_extra_action(text: str) -> ExtraAction | None:
    """The extra action ``text`` starts with, or ``None``."""
    visible = _NOISE.sub("", split_reasoning(text if isinstance(text, str) else "")[0])
    visible = visible.strip()
    found = _KNOWLEDGE.match(visible)
    if found:
        return ExtraAction("knowledge_query", found[1].strip())
    found = _REVIEW.match(visible)
    if found:
        return ExtraAction("history_review", found[1].strip())
    return None


def extra_actions_hint(history_review: bool, knowledge: bool) -> str:
    """The sentence the round footer adds for the enabled extra actions (``""`` for
    none)."""
    parts = []
    if history_review:
        parts.append("review the clinical history with REVIEW HISTORY")
    if knowledge:
        parts.append("look up medical knowledge with RETRIEVE KNOWLEDGE: <query>")
    return f" You may also {' or '.join(parts)}." if parts else ""


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _STOP}


@dataclass(frozen=True)
class KnowledgeEntry:
    """One entry of a knowledge source: a ``title`` and its ``text``."""

    title: str
    text: str


class KnowledgeSource:
    """A user-supplied knowledge source, searched by content-word overlap.

    score(entry) = |words(query) ∩ words(title + text)| / |words(query)| (words: 3+
    letters or digits, lower case, without a few stop words); entries with score 0 are
    never returned; ties keep file order; the best :data:`TOP_K` are returned.

    Args:
        entries: the entries, in file order.
        name: how messages name the source.
    """

    def __init__(self, entries: list[KnowledgeEntry], *, name: str = "<memory>") -> None:
        self.entries = tuple(entries)
        self.name = name
        self._words = [_words(f"{e.title} {e.text}") for e in self.entries]

    @classmethod
    def from_file(cls, path: str | Path) -> KnowledgeSource:
        """Read a ``clinenv.knowledge/1`` file: one JSON object per line with non-empty
        strings ``title`` and ``text`` (other keys are ignored); blank lines skipped.

        Raises:
            FileNotFoundError: no such file.
            IsADirectoryError: ``path`` is a folder.
            CaseFormatError: a bad line (file, line and field named) or no entry.
        """
        from clinenv.cases import scan_json_lines

        path = Path(path)
        entries = []
        for line, obj in scan_json_lines(path):
            if isinstance(obj, CaseFormatError):
                raise obj
            if not isinstance(obj, dict):
                raise CaseFormatError("expected a JSON object", path=path, line=line)
            for key in ("title", "text"):
                value = obj.get(key)
                if not isinstance(value, str) or not value.strip():
                    raise CaseFormatError("expected a non-empty string", path=path,
                                          line=line, field=key)
            entries.append(KnowledgeEntry(obj["title"].strip(), obj["text"].strip()))
        if not entries:
            raise CaseFormatError("no knowledge entry in the file", path=path)
        return cls(entries, name=str(path))

    def search(self, query: str) -> list[KnowledgeEntry]:
        """The best entries for ``query`` (class docstring)."""
        wanted = _words(query)
        if not wanted:
            return []
        scored = [(len(wanted & words) / len(wanted), i)
                  for i, words in enumerate(self._words) if wanted & words]
        scored.sort(key=lambda s: (-s[0], s[1]))
        return [self.entries[i] for _, i in scored[:TOP_K]]

    def answer(self, query: str) -> str:
        """The interface text for ``query``: the entries found, or that none matched."""
        if not query.strip():
            return "RETRIEVE KNOWLEDGE needs a query, e.g. RETRIEVE KNOWLEDGE: causes of " \
                   "dermatomal vesicular rash."
        found = self.search(query)
        if not found:
            return f"Knowledge: no entry matches '{query}'."
        lines = [f"Knowledge for '{query}':"]
        for k, entry in enumerate(found, start=1):
            text = entry.text if len(entry.text) <= ENTRY_CHARS else \
                entry.text[:ENTRY_CHARS].rstrip() + " ..."
            lines.append(f"{k}. {entry.title}: {text}")
        return "\n".join(lines)
