"""Datasets: load AgentClinic case files (and clinenv's own) as :class:`~clinenv.cases.Case`.

Main exports: :func:`load_cases`, :func:`load_cases_with_report`, :func:`resolve_dataset`,
:data:`DATASETS`, :func:`split_cases`; schemas and flags: docs/api/cases.md.
"""

from __future__ import annotations

import functools
import os
import re
import warnings
from pathlib import Path

from clinenv.cases import Case, no_cases_error, read_cases, scan_json_lines
from clinenv.datasets.flags import iter_leaf_texts, near_duplicates
from clinenv.datasets.lenient import LoadReport
from clinenv.datasets.mimic_idx import case_from_mimic_idx, is_mimic_idx
from clinenv.datasets.nejm import DISCLOSURES, Disclosure, case_from_nejm
from clinenv.datasets.nejm_split import split_test_findings
from clinenv.datasets.osce import case_from_osce
from clinenv.datasets.registry import DATASETS, DatasetSpec, get_spec
from clinenv.datasets.resolve import (
    ENV_VAR,
    dataset_mismatch,
    download_dataset,
    is_path_like,
    resolve_dataset,
    sha256_file,
    verify_dataset,
)
from clinenv.errors import CaseFormatError, ChecksumWarning
from clinenv.lazy import lazy_exports

#: Names loaded on first use -> their module.
_LAZY = {"CaseSplit": "clinenv.datasets.case_split",
         "split_cases": "clinenv.datasets.case_split"}
__getattr__, __dir__, _lazy = lazy_exports(__name__, _LAZY)

__all__ = [
    "DATASETS",
    "ENV_VAR",
    "DatasetSpec",
    "LoadReport",
    "dataset_mismatch",
    "download_dataset",
    "get_spec",
    "load_cases",
    "load_cases_with_report",
    "resolve_dataset",
    "sha256_file",
    "split_test_findings",
    "verify_dataset",
    *_lazy,
]


def _locate(
    name_or_path: str | os.PathLike[str],
    data_dir: str | Path | None,
    allow_download: bool,
) -> tuple[Path, DatasetSpec | None, str]:
    """``(path, registry spec or None for an explicit file, dataset name)``; the file's
    records are not checked here."""
    path = resolve_dataset(name_or_path, data_dir, allow_download=allow_download,
                           verify=False)
    if not is_path_like(name_or_path):
        spec = get_spec(str(name_or_path))
        return path, spec, spec.name
    for spec in DATASETS.values():
        if spec.file_name == path.name:
            return path, None, spec.name
    slug = re.sub(r"[^a-z0-9]+", "_", path.stem.lower()).strip("_") or "cases"
    return path, None, slug


def _sniff_schema(path: Path) -> str:
    """Tell the schema of a user file from its first recognizable record."""
    for _line, obj in scan_json_lines(path):
        if isinstance(obj, dict):
            if "OSCE_Examination" in obj:
                return "osce"
            if is_mimic_idx(obj):
                return "mimic_idx"
            if {"answers", "question", "patient_info", "physical_exams"} & obj.keys():
                return "nejm"
            if "case_id" in obj and "target" in obj:
                return "canonical"
    return "osce"


def _load_canonical(path: Path, report: LoadReport, strict: bool) -> list[Case]:
    return read_cases(path, on_error=functools.partial(report.skip, strict=strict))


def _identity_text(case: Case) -> str:
    vignette = case.metadata.get("vignette")
    head = vignette if isinstance(vignette, str) else case.objective
    return " ".join([head, *iter_leaf_texts(case.patient)])


def _load_records(path: Path, schema: str, dataset: str, report: LoadReport, strict: bool,
                  disclosure: Disclosure) -> list[Case]:
    cases: list[Case] = []
    index = 0
    seen: dict[str, int] = {}
    for line, obj in scan_json_lines(path):
        index += 1
        try:
            if isinstance(obj, CaseFormatError):
                raise obj
            if schema == "mimic_idx":
                case = case_from_mimic_idx(obj, dataset=dataset, path=path, line=line)
                if case.case_id in seen:
                    raise CaseFormatError(f"hadm_id {case.metadata['hadm_id']!r} is already "
                                          f"on line {seen[case.case_id]}", path=path,
                                          line=line, field="hadm_id")
                seen[case.case_id] = line
            elif schema == "nejm":
                case = case_from_nejm(obj, dataset=dataset, index=index, disclosure=disclosure,
                                      path=path, line=line)
            else:
                case = case_from_osce(obj, dataset=dataset, index=index, path=path, line=line)
        except CaseFormatError as err:
            report.skip(err, strict=strict)
            continue
        cases.append(case)
    duplicates = near_duplicates([c.case_id for c in cases], [_identity_text(c) for c in cases])
    return [
        case if dup is None else case.model_copy(
            update={"flags": case.flags.model_copy(update={"near_duplicate_of": dup})}
        )
        for case, dup in zip(cases, duplicates, strict=True)
    ]


def load_cases_with_report(
    name_or_path: str | os.PathLike[str],
    data_dir: str | Path | None = None,
    *,
    allow_download: bool = False,
    disclosure: Disclosure = "presentation",
    strict: bool = True,
    verify: bool = True,
) -> tuple[list[Case], LoadReport]:
    """Load cases and report what was skipped or suspicious.

    Args and raises: as :func:`load_cases`.

    Returns:
        ``(cases, report)``; ``report.skipped`` lists ``(line, reason)`` for lines
        skipped in lenient mode and ``report.warnings`` other problems (e.g. a record
        count that differs from the registry's, or records that differ from the pinned
        ones under ``verify=False``).
    """
    if disclosure not in DISCLOSURES:
        raise ValueError(f"disclosure must be one of {DISCLOSURES}, got {disclosure!r}")
    path, spec, dataset = _locate(name_or_path, data_dir, allow_download)
    mismatch = None if spec is None else dataset_mismatch(path, spec)
    if mismatch is not None and verify:
        raise mismatch
    schema = spec.schema if spec is not None else _sniff_schema(path)
    report = LoadReport(path=str(path), dataset=dataset, schema=schema)
    if mismatch is not None:
        message = f"{getattr(mismatch, 'summary', mismatch)}; used anyway (verify=False)"
        report.warnings.append(message)
        warnings.warn(message, ChecksumWarning, stacklevel=3)
    if schema == "canonical":
        cases = _load_canonical(path, report, strict)
    else:
        cases = _load_records(path, schema, dataset, report, strict, disclosure)
    if not cases:
        raise no_cases_error(path, report.n_skipped)
    if spec is not None and spec.n_records is not None and len(cases) != spec.n_records:
        report.warn(
            f"dataset {spec.name!r} should hold {spec.n_records} records, loaded {len(cases)}",
            strict=strict,
        )
    report.n_loaded = len(cases)
    return cases, report


def load_cases(
    name_or_path: str | os.PathLike[str],
    data_dir: str | Path | None = None,
    *,
    allow_download: bool = False,
    disclosure: Disclosure = "presentation",
    strict: bool = True,
    verify: bool = True,
) -> list[Case]:
    """Load the cases of a named dataset or of a file.

    A name is found by :func:`resolve_dataset`; a file's schema comes from the registry
    or its first record. Case ids are ``f"{dataset}-{index:04d}"`` (1-based; canonical
    files keep theirs, MIMIC-IDx-style ones are ``f"{dataset}-{hadm_id}"``).

    Args:
        name_or_path: registry name, or path of a JSON Lines file.
        data_dir: a folder to look in first for a named dataset.
        allow_download: permit downloading a public dataset into the cache.
        disclosure: NEJM s0: ``"question"``, ``"presentation"`` or ``"vignette"``.
        strict: raise at the first bad line (default); ``False`` skips bad lines (use
            :func:`load_cases_with_report` to see them) and turns a record-count
            mismatch into a warning.
        verify: check a named dataset's records against the pinned ones; ``False``
            loads differing records with a :class:`~clinenv.errors.ChecksumWarning`.

    Returns:
        The cases in file order.

    Raises:
        DatasetNotFoundError: unknown name, or the file cannot be found (the message
            says where it looked and how to get it).
        DataDirError: ``$CLINENV_DATA_DIR`` is set but cannot supply the file.
        ChecksumError: the named dataset's records differ from the pinned ones (the
            message names the first differing case).
        CaseFormatError: a bad line (strict mode), an empty file, or (strict mode) a
            record count that differs from the registry's; names file, line and field.
        ValueError: unknown ``disclosure``.
    """
    return load_cases_with_report(
        name_or_path, data_dir, allow_download=allow_download, disclosure=disclosure,
        strict=strict, verify=verify,
    )[0]
