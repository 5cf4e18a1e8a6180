"""A user-supplied ICD mapping: diagnosis synonyms and codes onto one ICD code.

For CDEG's ICD-aligned label space (CDEG Eq. 3); the ``clinenv.icd_map/1`` file format
and the scoring rule are in docs/cdeg.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from pathlib import Path

from clinenv.datasets.icd_codes import normalize_code
from clinenv.errors import CaseFormatError
from clinenv.scoring import normalize_answer

__all__ = ["FORMAT", "IcdMap", "IcdMapError", "cached_icd_map", "load_icd_map",
           "normalize_code"]

#: Name of the file format (docs/cdeg.md).
FORMAT = "clinenv.icd_map/1"


class IcdMapError(CaseFormatError):
    """An ICD mapping file is malformed (file, line and column named)."""


class IcdMap:
    """Normalized diagnosis term -> canonical ICD code.

    Args:
        terms: ``{code: [term, ...]}``; codes in any accepted spelling.
        name: how messages name the map (its file).

    Raises:
        ValueError: an invalid code, an empty term, or a term under two codes.
    """

    def __init__(self, terms: Mapping[str, Iterable[str]], *, name: str = "<memory>") -> None:
        self.name = name
        self._codes: dict[str, str] = {}
        for raw_code, words in terms.items():
            code = normalize_code(raw_code)
            if code is None:
                raise ValueError(f"{name}: {raw_code!r} is not an ICD code")
            for word in (raw_code, code, *words):
                self._add(word, code, lambda why: ValueError(f"{name}: {why}"))

    def _add(self, term: str, code: str, error: Callable[[str], Exception]) -> None:
        key = normalize_answer(term)
        if not key:
            raise error(f"term {term!r} is empty once normalized")
        known = self._codes.setdefault(key, code)
        if known != code:
            raise error(f"term {term!r} names {known} already, not {code}")

    def __len__(self) -> int:
        return len(self._codes)

    @property
    def codes(self) -> frozenset[str]:
        """The canonical codes of the map."""
        return frozenset(self._codes.values())

    def code(self, text: str) -> str | None:
        """The canonical code of a diagnosis text (or of a code written as text), or
        ``None`` when the map does not know it. ``text`` is normalized as by
        :func:`clinenv.scoring.normalize_answer`."""
        return self._codes.get(normalize_answer(text))

    @classmethod
    def from_file(cls, path: str | Path) -> IcdMap:
        """Read a ``clinenv.icd_map/1`` file (format: docs/cdeg.md).

        Raises:
            FileNotFoundError: no such file.
            IsADirectoryError: ``path`` is a folder.
            IcdMapError: a malformed line, naming file, line and column.
        """
        path = Path(path)
        if path.is_dir():
            raise IsADirectoryError(f"{path} is a folder, not an ICD mapping file")
        out = cls({}, name=str(path))
        try:
            text = path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as err:
            raise IcdMapError(f"invalid UTF-8 byte 0x{err.object[err.start]:02x}",
                              path=path) from None
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            cells = [c.strip() for c in raw.split("\t")]
            code = normalize_code(cells[0])
            if code is None:
                raise IcdMapError(f"{cells[0]!r} is not an ICD code (3-7 letters and "
                                  "digits, dots allowed)", path=path, line=number,
                                  field="code")
            if len(cells) < 2 or not any(cells[1:]):
                raise IcdMapError("no term after the code (columns are separated by TAB)",
                                  path=path, line=number, field="term 1")
            # column 0 twice: the code as written and its canonical spelling
            for column, term in [(0, code), *enumerate(cells)]:
                if not term:
                    continue
                try:
                    out._add(term, code, ValueError)
                except ValueError as err:
                    raise IcdMapError(str(err), path=path, line=number,
                                      field="code" if column == 0 else f"term {column}"
                                      ) from None
        if not len(out):
            raise IcdMapError("no mapping in the file", path=path)
        return out


def load_icd_map(path: str | Path) -> IcdMap:
    """:meth:`IcdMap.from_file`."""
    return IcdMap.from_file(path)


@lru_cache(maxsize=8)
def _cached(path: str, mtime_ns: int, size: int) -> IcdMap:
    return IcdMap.from_file(path)


def cached_icd_map(path: str | Path) -> IcdMap:
    """:func:`load_icd_map`, read once per file version (path, modification time and
    size) in this process: for callers that score many lines of one run log against the
    map its ``env_spec`` names (``clinenv replay``, :mod:`clinenv.runs.replaying`).

    Raises:
        the errors of :meth:`IcdMap.from_file`.
    """
    stat = Path(path).stat()
    return _cached(str(path), stat.st_mtime_ns, stat.st_size)
