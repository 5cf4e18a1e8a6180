"""Find a dataset's file: explicit path, data folder, cache, or a verified download.

The lookup order and the records check are in docs/api/cases.md.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import platformdirs

from clinenv.cases import iter_json_lines
from clinenv.datasets.registry import DATASETS, DatasetSpec, get_spec, normalize_name
from clinenv.errors import (
    CaseFormatError,
    ChecksumError,
    DataDirError,
    DatasetFolderError,
    DatasetNotFoundError,
)

#: Environment variable naming a folder that holds dataset files.
ENV_VAR = "CLINENV_DATA_DIR"

_CHUNK = 1 << 16


def sha256_file(path: str | Path) -> str:
    """Hex sha256 digest of a file's bytes.

    Args:
        path: the file.

    Returns:
        64 lower-case hex digits.
    """
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def cache_dir() -> Path:
    """The user cache folder for dataset files (it may not exist yet)."""
    return Path(platformdirs.user_cache_dir("clinenv")) / "datasets"


def bundled_path(spec: DatasetSpec) -> Path:
    """Path of a dataset file shipped inside the package (``clinenv/datasets/data``).

    Raises:
        DatasetNotFoundError: the package data file is missing (broken install).
    """
    ref = resources.files("clinenv.datasets").joinpath("data", spec.file_name)
    if not ref.is_file():
        raise DatasetNotFoundError(
            f"the bundled dataset file {spec.file_name} is missing from the clinenv "
            "package (clinenv/datasets/data); reinstall clinenv"
        )
    return Path(str(ref))


#: How to use a file whose records differ anyway (every entry point takes the override).
OVERRIDE_HINT = ("pass verify=False (load_cases, gym.make) or clinenv run --no-verify to "
                 "use it anyway")


def checksum_error(path: str | Path, spec: DatasetSpec, actual: str, *,
                   records: str | None = None, where: str | None = None) -> ChecksumError:
    """A :class:`ChecksumError` naming the file, the pinned and the actual digests and,
    when known, the first case that differs (``where``, see
    :func:`clinenv.datasets.digests.first_difference`).

    The returned error carries ``path``, ``dataset``, ``expected`` and ``actual`` (raw
    sha256 of the bytes), ``expected_records`` and ``actual_records`` (records digests;
    ``None`` when not computed), ``where`` and ``summary`` (the message without the
    advice) attributes.
    """
    if records is None:
        head = (f"{path}: sha256 mismatch for dataset {spec.name!r} ({spec.file_name}): "
                f"expected {spec.sha256}, got {actual}")
    else:
        head = (f"{path}: the records differ from the pinned dataset {spec.name!r} "
                f"({spec.file_name})" + (f": {where}" if where else "")
                + f" (records sha256 expected {spec.records_sha256}, got {records}; file "
                f"sha256 expected {spec.sha256}, got {actual})")
    err = ChecksumError(
        f"{head}. The file is corrupt, truncated, edited or a different version; replace "
        f"it (e.g. `clinenv data download {spec.name}`), or {OVERRIDE_HINT}."
    )
    err.path = str(path)  # type: ignore[attr-defined]
    err.dataset = spec.name  # type: ignore[attr-defined]
    err.expected = spec.sha256  # type: ignore[attr-defined]
    err.actual = actual  # type: ignore[attr-defined]
    err.expected_records = spec.records_sha256  # type: ignore[attr-defined]
    err.actual_records = records  # type: ignore[attr-defined]
    err.where = where  # type: ignore[attr-defined]
    err.summary = head  # type: ignore[attr-defined]
    return err


@dataclass(frozen=True)
class DatasetIdentity:
    """What names the cases of one dataset file (for run logs and resume).

    Attributes:
        records_sha256: sha256 of the file's canonical form (its records;
            :mod:`clinenv.datasets.digests`), the run log's ``dataset_sha256``.
        file_sha256: sha256 of the file's bytes.
        aliases: raw sha256 digests known to name these same records: the file's own
            and, when the records equal a pinned dataset's, the pinned raw digest.
        mismatch: ``None``, or the :class:`ChecksumError` of records that differ from
            the pinned ones (:func:`dataset_mismatch`).
    """

    records_sha256: str
    file_sha256: str
    aliases: tuple[str, ...]
    mismatch: ChecksumError | None


def _mismatch(path: str | Path, spec: DatasetSpec, raw: str,
              records: Any) -> ChecksumError | None:
    """The mismatch of a file with raw digest ``raw`` and, unless ``None``, record
    digests ``records`` (a :class:`~clinenv.datasets.digests.RecordDigests`)."""
    if spec.sha256 is None or raw == spec.sha256:
        return None
    if spec.records_sha256 is None or records is None:
        return checksum_error(path, spec, raw)
    if records.sha256 == spec.records_sha256:
        return None
    from clinenv.datasets.digests import first_difference
    from clinenv.datasets.record_digests import RECORD_DIGESTS

    pinned = RECORD_DIGESTS.get(spec.name)
    where = None if pinned is None else first_difference(records, pinned, spec.name)
    return checksum_error(path, spec, raw, records=records.sha256, where=where)


def dataset_mismatch(path: str | Path, spec: DatasetSpec) -> ChecksumError | None:
    """``None`` when ``path`` holds the pinned records of ``spec`` (or nothing is pinned),
    else the :class:`ChecksumError` to raise.

    The raw sha256 is tried first; only a file with other bytes is parsed, and its
    records digest compared with ``spec.records_sha256``; when that differs too, the
    per-record digests (:mod:`clinenv.datasets.record_digests`) name the first differing
    case.
    """
    if spec.sha256 is None:
        return None
    raw = sha256_file(path)
    if raw == spec.sha256 or spec.records_sha256 is None:
        return _mismatch(path, spec, raw, None)
    from clinenv.datasets.digests import file_digests

    return _mismatch(path, spec, raw, file_digests(path))


def dataset_identity(path: str | Path, spec: DatasetSpec | None = None) -> DatasetIdentity:
    """The :class:`DatasetIdentity` of a dataset file (``spec``: its registry entry, or
    ``None`` for a file outside the registry). A pinned file with the pinned bytes is
    not parsed.

    Raises:
        OSError: the file cannot be read.
    """
    from clinenv.datasets.digests import file_digests

    raw = sha256_file(path)
    if spec is not None and raw == spec.sha256 and spec.records_sha256 is not None:
        return DatasetIdentity(spec.records_sha256, raw, (raw,), None)
    records = file_digests(path)
    aliases = [raw]
    if spec is not None and spec.sha256 not in (None, raw) and \
            records.sha256 == spec.records_sha256:
        aliases.append(spec.sha256)
    mismatch = None if spec is None else _mismatch(path, spec, raw, records)
    return DatasetIdentity(records.sha256, raw, tuple(aliases), mismatch)


def _check(path: Path, spec: DatasetSpec, verify: bool) -> Path:
    if verify:
        mismatch = dataset_mismatch(path, spec)
        if mismatch is not None:
            raise mismatch
    return path


def _env_dir() -> Path | None:
    """The folder ``$CLINENV_DATA_DIR`` names, or ``None`` when it is unset or empty."""
    env = os.environ.get(ENV_VAR, "").strip()
    return Path(env).expanduser() if env else None


def _candidates(spec: DatasetSpec, data_dir: str | Path | None) -> list[tuple[str, Path | None]]:
    env = _env_dir()
    return [
        ("data_dir argument", None if data_dir is None else Path(data_dir) / spec.file_name),
        (f"${ENV_VAR}", None if env is None else env / spec.file_name),
        ("user cache", cache_dir() / spec.file_name),
    ]


def folder_error(path: Path, what: str) -> DatasetFolderError:
    """The error for a folder found where a file should be (``what``: which file)."""
    return DatasetFolderError(f"{path} is a folder, not {what}; a JSON Lines file must "
                              "stand at that path")


def data_dir_error(spec: DatasetSpec, folder: Path,
                   data_dir: str | Path | None = None) -> DataDirError:
    """The error for a ``$CLINENV_DATA_DIR`` that cannot supply ``spec``'s file."""
    if not folder.exists():
        problem, fix = "does not exist", f"create it and put {spec.file_name} in it"
    elif not folder.is_dir():
        problem = "is a file, not a folder"
        fix = f"set it to the folder that holds {spec.file_name} (e.g. {folder.parent})"
    else:
        problem, fix = f"holds no {spec.file_name}", f"put {spec.file_name} in it"
    also = "" if data_dir is None else f" (nor does the data_dir argument {data_dir})"
    # a file that cannot be downloaded (credentialed: MIMIC-IV) says how to obtain it
    how = f". How to get {spec.file_name}: {spec.access_note}" if spec.access_note else ""
    return DataDirError(
        f"${ENV_VAR} is set to {folder}, which {problem}{also}, so dataset {spec.name!r} "
        f"({spec.display_name}) cannot be loaded: {fix}, point ${ENV_VAR} at another "
        f"folder that holds it, or unset {ENV_VAR} to use the user cache ({cache_dir()})"
        f"{how}"
    )


def not_found_message(spec: DatasetSpec, looked: list[tuple[str, Path | None]]) -> str:
    """The text of the error raised when a dataset file cannot be found."""
    lines = [f"dataset {spec.name!r} ({spec.display_name}): file {spec.file_name} not found."]
    lines.append("Looked in:")
    for label, path in looked:
        lines.append(f"  - {label}: {path if path is not None else '(not set)'}")
    lines.append("How to get it:")
    if spec.access_note:
        lines.append("  - " + spec.access_note)
    else:
        lines.append(
            f"  - download it once into the cache: load_cases({spec.name!r}, "
            f"allow_download=True) or `clinenv data download {spec.name}` "
            f"(from {spec.url}, sha256 {spec.sha256});"
        )
        lines.append(
            f"  - or put {spec.file_name} in a folder and set {ENV_VAR} to that folder "
            "(or pass data_dir=... or the file's path)."
        )
    return "\n".join(lines)


def download_dataset(name: str, *, force: bool = False, timeout: float = 60.0) -> Path:
    """Download a public dataset into the user cache, verifying its pinned sha256.

    The bytes are streamed to a temporary file inside the cache folder, hashed, and
    moved to their final name only when the digest matches; otherwise the temporary
    file is deleted, so no unverified file is ever left behind.

    Args:
        name: registry name (see :data:`~clinenv.datasets.registry.DATASETS`).
        force: download even if the cache already holds a verified copy.
        timeout: socket timeout in seconds.

    Returns:
        The path of the cached file.

    Raises:
        DatasetNotFoundError: the dataset has no URL (``mimiciv``, ``demo``) or the
            download failed.
        ChecksumError: the downloaded bytes do not match the pinned sha256.
    """
    spec = get_spec(name)
    if spec.url is None or spec.sha256 is None:
        reason = spec.access_note or "it has no pinned download URL"
        raise DatasetNotFoundError(
            f"dataset {spec.name!r} ({spec.file_name}) cannot be downloaded: {reason}"
        )
    target = cache_dir() / spec.file_name
    if target.is_file() and not force and sha256_file(target) == spec.sha256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{spec.file_name}.", suffix=".part",
                                    dir=target.parent)
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(spec.url, timeout=timeout) as src:
            for chunk in iter(lambda: src.read(_CHUNK), b""):
                digest.update(chunk)
                out.write(chunk)
        actual = digest.hexdigest()
        if actual != spec.sha256:
            raise checksum_error(spec.url, spec, actual)
        os.replace(tmp, target)
    except (urllib.error.URLError, OSError) as err:
        raise DatasetNotFoundError(
            f"download of dataset {spec.name!r} from {spec.url} failed: {err}"
        ) from err
    finally:
        tmp.unlink(missing_ok=True)
    return target


def is_path_like(name_or_path: str | os.PathLike[str]) -> bool:
    """Whether ``name_or_path`` denotes a file rather than a registry name.

    True for ``os.PathLike`` objects, strings containing a path separator or ending in
    ``.jsonl``/``.json``, and strings naming an existing file that are not registry names.
    """
    if not isinstance(name_or_path, str):
        return True
    text = name_or_path
    if "/" in text or os.sep in text or text.lower().endswith((".jsonl", ".json")):
        return True
    return normalize_name(text) not in DATASETS and Path(text).is_file()


def resolve_dataset(
    name: str | os.PathLike[str],
    data_dir: str | Path | None = None,
    *,
    allow_download: bool = False,
    verify: bool = True,
) -> Path:
    """Find the file of a named dataset (order in docs/api/cases.md).

    Args:
        name: registry name (case and ``-``/``_`` ignored), or the path of an existing
            file, returned as it is.
        data_dir: a folder to look in first.
        allow_download: download from the pinned URL into the cache when no local copy
            exists (never for credentialed or bundled datasets).
        verify: check a local file's records against the pinned ones
            (:func:`dataset_mismatch`); ``False`` skips the check.

    Returns:
        The path of the dataset file.

    Raises:
        DataDirError: ``$CLINENV_DATA_DIR`` is set but the folder is missing, is a file,
            or lacks the file (and ``data_dir`` does not hold it).
        DatasetFolderError: a folder stands where the file should be.
        DatasetNotFoundError: unknown name, a path that is not a file, or no file found.
        ChecksumError: the file's records differ from the pinned ones.
    """
    if is_path_like(name):
        path = Path(name).expanduser()
        if path.is_dir():
            raise folder_error(path, "a dataset file")
        if not path.is_file():
            raise DatasetNotFoundError(f"no such dataset file: {path}")
        return path
    spec = get_spec(name)
    if spec.bundled:
        return bundled_path(spec)
    looked = _candidates(spec, data_dir)
    for label, path in looked:
        if path is None:
            continue
        if path.is_file():
            return _check(path, spec, verify)
        if path.is_dir():
            raise folder_error(path, f"the file of dataset {spec.name!r} ({label})")
        if label == f"${ENV_VAR}":
            raise data_dir_error(spec, path.parent, data_dir)
    if allow_download and spec.url is not None:
        return download_dataset(spec.name)
    raise DatasetNotFoundError(not_found_message(spec, looked))


def count_records(path: Path) -> int:
    """Number of non-blank lines, each parsed as JSON.

    Raises:
        CaseFormatError: the first line that is not UTF-8 JSON.
    """
    return sum(1 for _ in iter_json_lines(path))


def verify_dataset(name: str, data_dir: str | Path | None = None) -> dict[str, Any]:
    """Check a locally available dataset file (for ``clinenv data verify``).

    Never downloads. Records are counted by parsing each non-blank line as JSON.

    Args:
        name: registry name.
        data_dir: a folder to look in first.

    Returns:
        ``{"name", "path", "sha256", "expected", "ok", "n_records", "expected_records",
        "same_records", "difference"}``: raw digests, whether the records equal the
        pinned ones (true when nothing is pinned), the first difference in words or
        ``None``; ``ok`` when records and count match. ``n_records`` is ``None`` (and
        ``"error"`` says why) when the file does not parse.

    Raises:
        DatasetNotFoundError: the file cannot be found.
    """
    spec = get_spec(name)
    path = resolve_dataset(spec.name, data_dir, verify=False)
    actual = sha256_file(path)
    mismatch = dataset_mismatch(path, spec)
    result: dict[str, Any] = {
        "name": spec.name,
        "path": str(path),
        "sha256": actual,
        "expected": spec.sha256,
        "expected_records": spec.n_records,
        "same_records": mismatch is None,
        "difference": None if mismatch is None else getattr(mismatch, "where", None),
    }
    try:
        n_records: int | None = count_records(path)
    except CaseFormatError as err:
        n_records = None
        result["error"] = f"does not parse as JSON Lines: {err}"
    result["n_records"] = n_records
    result["ok"] = (
        mismatch is None
        and n_records is not None
        and (spec.n_records is None or n_records == spec.n_records)
    )
    return result
