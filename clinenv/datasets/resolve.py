"""Find a dataset's file: explicit path, data folder, cache, or a verified download.

An explicit path to an existing file is used as it is (no checksum). Resolution order
for a registry name:

1. the ``data_dir`` argument;
2. the folder named by the environment variable ``CLINENV_DATA_DIR``;
3. the user cache, ``platformdirs.user_cache_dir("clinenv")/datasets``;
4. a download from the pinned URL, only when ``allow_download=True``; the sha256 is
   checked before the file is moved into the cache, so a bad download leaves nothing;
5. otherwise :class:`~clinenv.errors.DatasetNotFoundError`, whose message names the
   file, lists where it looked and says how to get it.

The bundled ``demo`` set is read from the package (``importlib.resources``). A file found
locally whose sha256 differs from the pinned value raises
:class:`~clinenv.errors.ChecksumError` unless ``verify=False``.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from importlib import resources
from pathlib import Path
from typing import Any

import platformdirs

from clinenv.cases import iter_json_lines
from clinenv.datasets.registry import DATASETS, DatasetSpec, get_spec, normalize_name
from clinenv.errors import CaseFormatError, ChecksumError, DatasetNotFoundError

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


def checksum_error(path: str | Path, spec: DatasetSpec, actual: str) -> ChecksumError:
    """A :class:`ChecksumError` naming the file, the expected and the actual digest.

    The returned error carries ``path``, ``dataset``, ``expected`` and ``actual``
    attributes.
    """
    err = ChecksumError(
        f"{path}: sha256 mismatch for dataset {spec.name!r} ({spec.file_name}): expected "
        f"{spec.sha256}, got {actual}. The file is corrupt, truncated or a different "
        "version; replace it (e.g. download again), or pass verify=False to use it anyway."
    )
    err.path = str(path)  # type: ignore[attr-defined]
    err.dataset = spec.name  # type: ignore[attr-defined]
    err.expected = spec.sha256  # type: ignore[attr-defined]
    err.actual = actual  # type: ignore[attr-defined]
    return err


def _check(path: Path, spec: DatasetSpec, verify: bool) -> Path:
    if verify and spec.sha256 is not None:
        actual = sha256_file(path)
        if actual != spec.sha256:
            raise checksum_error(path, spec, actual)
    return path


def _candidates(spec: DatasetSpec, data_dir: str | Path | None) -> list[tuple[str, Path | None]]:
    env = os.environ.get(ENV_VAR)
    return [
        ("data_dir argument", None if data_dir is None else Path(data_dir) / spec.file_name),
        (f"${ENV_VAR}", Path(env).expanduser() / spec.file_name if env else None),
        ("user cache", cache_dir() / spec.file_name),
    ]


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
    """Find the file of a named dataset (order in the module docstring).

    Args:
        name: registry name, matched case-insensitively and tolerant of ``-``/``_``; or
            the path of an existing file, returned as it is (explicit paths come first
            and are not checksummed).
        data_dir: a folder to look in first.
        allow_download: download from the pinned URL into the cache when no local copy
            exists (never for credentialed or bundled datasets).
        verify: check a local file's sha256 against the pinned value.

    Returns:
        The path of the dataset file.

    Raises:
        DatasetNotFoundError: unknown name, a path that is not a file, or no file found
            (and no download allowed or possible); the message says where it looked and
            how to get the file.
        ChecksumError: a file was found but its sha256 differs from the pinned one.
    """
    if is_path_like(name):
        path = Path(name).expanduser()
        if not path.is_file():
            raise DatasetNotFoundError(f"no such dataset file: {path}")
        return path
    spec = get_spec(name)
    if spec.bundled:
        return bundled_path(spec)
    looked = _candidates(spec, data_dir)
    for _label, path in looked:
        if path is not None and path.is_file():
            return _check(path, spec, verify)
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
        ``{"name", "path", "sha256", "expected", "ok", "n_records", "expected_records"}``
        where ``ok`` is true when the digest matches the pinned one (or none is pinned)
        and the record count matches the expected one (or none is fixed);
        ``n_records`` is ``None`` when the file does not parse (``"error"`` then says
        why).

    Raises:
        DatasetNotFoundError: the file cannot be found.
    """
    spec = get_spec(name)
    path = resolve_dataset(spec.name, data_dir, verify=False)
    actual = sha256_file(path)
    result: dict[str, Any] = {
        "name": spec.name,
        "path": str(path),
        "sha256": actual,
        "expected": spec.sha256,
        "expected_records": spec.n_records,
    }
    try:
        n_records: int | None = count_records(path)
    except CaseFormatError as err:
        n_records = None
        result["error"] = f"does not parse as JSON Lines: {err}"
    result["n_records"] = n_records
    result["ok"] = (
        (spec.sha256 is None or actual == spec.sha256)
        and n_records is not None
        and (spec.n_records is None or n_records == spec.n_records)
    )
    return result
