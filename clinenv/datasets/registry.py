"""The dataset registry: which case files clinenv knows by name.

AgentClinic's files (MIT licence) and the bundled demo set; the table is in
docs/api/cases.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from clinenv.datasets.record_digests import RECORDS_SHA256
from clinenv.errors import DatasetNotFoundError

Schema = Literal["osce", "nejm", "canonical"]

_RAW_BASE = "https://raw.githubusercontent.com/SamuelSchmidgall/AgentClinic/main/"

#: How to obtain the credentialed MIMIC-IV file (AgentClinic issue #8).
MIMIC_ACCESS_NOTE = (
    "MIMIC-IV cases are derived from credentialed data and are not published: complete "
    "PhysioNet credentialing for MIMIC-IV (https://physionet.org/content/mimiciv/), then "
    "request agentclinic_mimiciv.jsonl from the AgentClinic authors "
    "(https://github.com/SamuelSchmidgall/AgentClinic, issue #8), put the file in a folder "
    "and set CLINENV_DATA_DIR to that folder (or pass data_dir=... or the file's path)."
)


@dataclass(frozen=True)
class DatasetSpec:
    """One named dataset.

    Attributes:
        name: registry key (lower case, ``_`` separated), also the ``Case.dataset`` value.
        file_name: the file name looked up in data folders and the cache.
        n_records: expected number of records, or ``None`` when not fixed.
        url: pinned download URL, or ``None`` when the file cannot be downloaded.
        sha256: pinned hex digest of the file, or ``None`` when not pinned.
        schema: record schema: ``"osce"`` (MedQA, MIMIC-IV), ``"nejm"`` or
            ``"canonical"`` (clinenv's own ``Case`` JSON Lines).
        display_name: human-readable name, e.g. ``"MedQA_Ext"``.
        description: one sentence about the dataset.
        bundled: the file ships inside the package (``clinenv/datasets/data``).
        access_note: how to obtain a file that cannot be downloaded (empty otherwise).
        records_sha256: pinned sha256 of the file's canonical form (its records, whatever
            the bytes: :mod:`clinenv.datasets.digests`), or ``None`` when not pinned.
    """

    name: str
    file_name: str
    n_records: int | None
    url: str | None
    sha256: str | None
    schema: Schema
    display_name: str
    description: str
    bundled: bool = False
    access_note: str = ""
    records_sha256: str | None = None


def _public(name: str, file_name: str, n: int, sha: str, schema: Schema, display: str,
            description: str) -> DatasetSpec:
    return DatasetSpec(name, file_name, n, _RAW_BASE + file_name, sha, schema, display,
                       description, records_sha256=RECORDS_SHA256[name])


#: Known datasets by registry name. Treat as read-only.
DATASETS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        _public("medqa", "agentclinic_medqa.jsonl", 107,
                "d91038a2984f21bb1d43edd88c7958d090ef42ba80f5be487b22b903bf3a35ea", "osce",
                "MedQA", "AgentClinic-MedQA: OSCE cases built from USMLE-style questions."),
        _public("medqa_ext", "agentclinic_medqa_extended.jsonl", 214,
                "54a024eb2705c6c55d1988766adf4ab02ea7bbe2a28f843107b740032200f232", "osce",
                "MedQA_Ext", "AgentClinic-MedQA extended (the first 107 records are MedQA)."),
        _public("nejm", "agentclinic_nejm.jsonl", 15,
                "22ac74ed6e0efd9d280e4e4c53918d7446ea4a4d56816bbb364ae87812b8ea71", "nejm",
                "NEJM", "AgentClinic-NEJM: NEJM Image Challenge cases with five options."),
        _public("nejm_ext", "agentclinic_nejm_extended.jsonl", 120,
                "d945305ee17ee1456053fbfe2e9d9c5e8b27d14538bf48ab8ace7306dc437b85", "nejm",
                "NEJM_Ext", "AgentClinic-NEJM extended (the first 15 records are NEJM)."),
        DatasetSpec("mimiciv", "agentclinic_mimiciv.jsonl", None, None, None, "osce",
                    "MIMIC-IV", "AgentClinic-MIMIC-IV: credentialed OSCE cases, user-supplied.",
                    access_note=MIMIC_ACCESS_NOTE),
        DatasetSpec("demo", "demo.jsonl", None, None, None, "canonical", "Demo",
                    "Small offline demo set written for clinenv (canonical schema).",
                    bundled=True),
    )
}

_SEPARATORS = re.compile(r"[\s_\-]+")


def normalize_name(name: str) -> str:
    """Normalize a dataset name: case-insensitive, ``-``/``_``/space tolerant.

    ``"MedQA_Ext"``, ``"medqa-ext"`` → ``"medqa_ext"``; ``"MIMIC-IV"`` → ``"mimiciv"``.
    """
    parts = [p for p in _SEPARATORS.split(name.strip().lower()) if p]
    joined = "_".join(parts)
    if joined in DATASETS:
        return joined
    squashed = "".join(parts)
    for key in DATASETS:
        if key.replace("_", "") == squashed:
            return key
    return joined


def get_spec(name: str) -> DatasetSpec:
    """The registry entry for ``name`` (matched by :func:`normalize_name`).

    Raises:
        DatasetNotFoundError: the name is not in the registry; the message lists the
            known names.
    """
    key = normalize_name(name)
    try:
        return DATASETS[key]
    except KeyError:
        known = ", ".join(sorted(DATASETS))
        raise DatasetNotFoundError(
            f"unknown dataset {name!r}; known datasets: {known}. "
            "Pass a file path to load any other file."
        ) from None


def records_digest_of(sha256: str | None) -> str | None:
    """The records digest a run log's ``dataset_sha256`` stands for: a pinned file's raw
    sha256 (what clinenv wrote before run logs recorded the records digest) maps to that
    dataset's ``records_sha256``; any other value is returned as it is."""
    for spec in DATASETS.values():
        if sha256 is not None and sha256 == spec.sha256 and spec.records_sha256:
            return spec.records_sha256
    return sha256
