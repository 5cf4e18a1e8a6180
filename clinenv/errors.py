"""Errors raised by clinenv.

Errors about input data name the file, the 1-based line and the field; errors inside an
episode never raise (the environment answers with interface feedback).
"""

from __future__ import annotations

from pathlib import Path


class ClinenvError(Exception):
    """Base class of every clinenv error."""


class CaseFormatError(ClinenvError, ValueError):
    """A case file is malformed.

    Attributes:
        path: the file (``None`` for in-memory data).
        line: 1-based line number in the file (``None`` when the whole file is at fault).
        field: dotted path of the offending field inside the record (``None`` when the
            line itself is at fault, e.g. invalid JSON).
        reason: what is wrong, in words.
    """

    def __init__(
        self,
        reason: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = None if path is None else str(path)
        self.line = line
        self.field = field
        self.reason = reason
        where = self.path or "<memory>"
        if line is not None:
            where += f", line {line}"
        if field:
            where += f", field '{field}'"
        super().__init__(f"{where}: {reason}")


class DatasetNotFoundError(ClinenvError, FileNotFoundError):
    """A named dataset could not be resolved to a file; the message says how to get it."""


class DataDirError(DatasetNotFoundError):
    """A data folder that was named (``$CLINENV_DATA_DIR``) does not exist, is not a
    folder, or lacks the dataset's file; the message names the folder."""


class DatasetFolderError(DatasetNotFoundError):
    """A folder stands where a dataset file should be; the message calls it a folder."""


class ChecksumError(ClinenvError, ValueError):
    """A dataset file's records differ from the pinned ones (its bytes and its records
    digest both differ); the message names the first case that differs."""


class ChecksumWarning(UserWarning):
    """A dataset file whose records differ from the pinned ones is used anyway
    (``verify=False``, ``clinenv run --no-verify``); the message names the first case
    that differs."""


def install_hint(extra: str) -> str:
    """The install line of clinenv's optional extra ``extra`` (``"plot"``, ``"hf"``,
    ``"ray,openai"``...): clinenv is not on PyPI, so from a clone of the repository."""
    return f"pip install -e '.[{extra}]' in a clinenv clone"
