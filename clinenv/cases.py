"""Cases: the private state z = (P, M, Y) of one diagnosis task, plus s0 and K.

Notation of EGIP section 3.1 (Eq. 1): s0 ``objective``, K ``candidates``, P
``patient``, M ``records``, Y ``target``; on disk one JSON object per line
(:func:`read_cases`, :func:`write_cases`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, model_validator

from clinenv.config_model import first_error
from clinenv.errors import CaseFormatError

#: Canonical-form schema version, written into every case's ``metadata``-free header
#: field ``schema_version``. Bump when the canonical form changes incompatibly.
SCHEMA_VERSION = 1


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Target(_Frozen):
    """The reference target Y. Never part of any agent-facing input.

    Attributes:
        text: the reference answer text (a diagnosis, or for some NEJM items another kind
            of answer, see ``CaseFlags.non_diagnostic_target``). Non-empty.
        option_index: 0-based index into ``Case.candidates`` of the correct option when
            the case has candidate labels K; ``None`` otherwise.
    """

    text: str = Field(min_length=1)
    option_index: int | None = Field(default=None, ge=0)


class Records(_Frozen):
    """Stored examination records M (EGIP section 3.1).

    Attributes:
        physical_exam: physical-examination sections, ``{section: tree}``. Each top-level
            key is one requestable exam section (e.g. ``Vital_Signs``).
        tests: test results, ``{name or group: tree}``. A test may sit at depth 1 or under
            a grouping key such as ``Imaging``; the rule that tells groups from tests is in
            docs/protocols.md ("EGIP's action grammar, step by step", *The catalog A and
            the menu B*).

    Leaves are display strings; placeholders such as ``"Pending"`` are kept verbatim and
    classified as unavailable at lookup time (:mod:`clinenv.datasets.availability`).
    """

    physical_exam: dict[str, JsonValue] = Field(default_factory=dict)
    tests: dict[str, JsonValue] = Field(default_factory=dict)


class CaseFlags(_Frozen):
    """Per-case data-quality flags, carried so that analyses can stratify or exclude.

    Attributes:
        target_in_records: some record text in M names the reference target, so a single
            lookup can reveal the answer (AgentClinic weakness W4).
        target_in_patient_facts: the patient facts P name the target; the patient view
            withholds those sentences.
        target_in_menu: a name the menu shows names the target (setting
            ``target_in_menu`` of :class:`~clinenv.protocol.config.ProtocolConfig`).
        patient_facts_contain_findings: P holds examination or test findings (NEJM role
            cards sometimes do, weakness W5).
        caregiver_voice: the patient is too young to self-report; a caregiver answers.
        near_duplicate_of: ``case_id`` of an earlier case this one nearly duplicates.
        non_diagnostic_target: the target is not a diagnosis (a treatment, a pathogen, a
            mechanism...), e.g. 17 NEJM_Ext items (EGIP appendix F).
        no_recorded_tests: M holds no test results at all (e.g. NEJM refusal records).
        target_in_bias: the target is a malignancy, which AgentClinic's cognitive-bias
            texts hint at; a run log's ``case_flags`` holds it only on runs with a bias.
    """

    target_in_records: bool = False
    target_in_patient_facts: bool = False
    target_in_menu: bool = False
    patient_facts_contain_findings: bool = False
    caregiver_voice: bool = False
    near_duplicate_of: str | None = None
    non_diagnostic_target: bool = False
    no_recorded_tests: bool = False
    target_in_bias: bool = False


class Case(_Frozen):
    """One diagnosis case: s0, K and the private state z = (P, M, Y) (EGIP Eq. 1).

    Attributes:
        case_id: unique within a dataset, e.g. ``"medqa-0001"``.
        dataset: registry name of the source dataset (``"medqa"``, ``"nejm"``, ``"demo"``...).
        objective: s0, the task objective plus initially disclosed information.
        candidates: K, candidate labels (e.g. NEJM's five options) or ``None``.
        patient: P, patient-facing facts as a tree ``{field: tree}``.
        records: M, the stored examination records.
        target: Y, the reference target.
        flags: data-quality flags.
        metadata: anything else from the source record (unknown keys, question type,
            source file and line...). Never shown to any agent.
        schema_version: version of the canonical form.

    Raises:
        pydantic.ValidationError: on construction with invalid fields; the readers in this
        package convert it to :class:`clinenv.errors.CaseFormatError`.
    """

    case_id: str = Field(min_length=1)
    dataset: str = Field(min_length=1)
    objective: str
    candidates: tuple[str, ...] | None = None
    patient: dict[str, JsonValue] = Field(default_factory=dict)
    records: Records = Field(default_factory=Records)
    target: Target
    flags: CaseFlags = Field(default_factory=CaseFlags)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    @model_validator(mode="after")
    def _check_target_option(self) -> Case:
        if self.target.option_index is not None:
            if not self.candidates:
                raise ValueError("target.option_index is set but the case has no candidates")
            if self.target.option_index >= len(self.candidates):
                raise ValueError(
                    f"target.option_index {self.target.option_index} is out of range for "
                    f"{len(self.candidates)} candidates"
                )
        if self.candidates is not None and len(self.candidates) == 0:
            raise ValueError("candidates must be None or non-empty")
        return self

    def to_json_line(self) -> str:
        """The canonical JSON Lines form of this case (one line, no trailing newline)."""
        return json.dumps(self.model_dump(mode="json"), ensure_ascii=False, sort_keys=False)


def case_from_dict(data: Any, *, path: str | Path | None = None, line: int | None = None) -> Case:
    """Validate one canonical-form record.

    Raises:
        CaseFormatError: naming ``path``, ``line`` and the first offending field.
    """
    if not isinstance(data, dict):
        raise CaseFormatError(
            f"expected a JSON object, got {type(data).__name__}", path=path, line=line
        )
    try:
        return Case.model_validate(data)
    except ValidationError as err:
        field, msg = first_error(err)
        raise CaseFormatError(msg, path=path, line=line, field=field) from None


_BOM = b"\xef\xbb\xbf"


def scan_json_lines(path: str | Path) -> Iterator[tuple[int, Any | CaseFormatError]]:
    """Yield ``(line_number, parsed JSON or CaseFormatError)`` for each non-blank line.

    The one low-level JSON Lines reader of the package: :func:`iter_json_lines` raises
    the first error it yields, lenient dataset loading collects them and reads on. The
    file is read as UTF-8 whatever the locale; a leading byte-order mark
    is accepted; a missing final newline is fine; blank lines are skipped.

    A bad line gives a :class:`~clinenv.errors.CaseFormatError` naming the file and line:
    ``"invalid UTF-8 byte 0xff at column 12"`` or ``"invalid JSON: <what> at column
    N"``.

    Raises:
        FileNotFoundError: the file does not exist.
        IsADirectoryError: ``path`` is a folder (the message says so).
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder, not a JSON Lines file")
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if number == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM):]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                yield number, CaseFormatError(
                    f"invalid UTF-8 byte 0x{raw[err.start]:02x} at column {err.start + 1}",
                    path=path,
                    line=number,
                )
                continue
            if not text.strip():
                continue
            try:
                yield number, json.loads(text)
            except json.JSONDecodeError as err:
                # some messages end in "at" ("Invalid control character at"): no "at at"
                what = err.msg[:-3] if err.msg.endswith(" at") else err.msg
                yield number, CaseFormatError(
                    f"invalid JSON: {what} at column {err.colno}", path=path, line=number
                )


def iter_json_lines(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, parsed_object)`` for each non-blank line of a JSONL file.

    Strict form of :func:`scan_json_lines` (same decoding rules).

    Raises:
        CaseFormatError: invalid UTF-8 or invalid JSON, with file and line.
        FileNotFoundError: the file does not exist.
    """
    for number, obj in scan_json_lines(path):
        if isinstance(obj, CaseFormatError):
            raise obj
        yield number, obj


def no_cases_error(path: str | Path, n_skipped: int = 0) -> CaseFormatError:
    """The error for a file that yields no case (``n_skipped`` bad lines were skipped)."""
    reason = "the file holds no cases"
    if n_skipped:
        reason += f" ({n_skipped} bad lines skipped)"
    return CaseFormatError(reason, path=path)


def read_cases(
    path: str | Path, *, on_error: Callable[[CaseFormatError], None] | None = None
) -> list[Case]:
    """Read a canonical-form JSONL file.

    Args:
        path: the file.
        on_error: called with the error of each bad line (bad JSON, a non-object line, an
            invalid field, a duplicate ``case_id``); the line is then skipped and reading
            goes on. ``None`` (the default) raises the first one.

    Raises:
        CaseFormatError: a bad line (unless ``on_error`` is given), or a file that yields
            no case; each names file, line and field.
    """
    cases: list[Case] = []
    seen: dict[str, int] = {}
    n_skipped = 0
    for number, obj in scan_json_lines(path):
        try:
            if isinstance(obj, CaseFormatError):
                raise obj
            case = case_from_dict(obj, path=path, line=number)
            if case.case_id in seen:
                raise CaseFormatError(
                    f"duplicate case_id {case.case_id!r} (first on line {seen[case.case_id]})",
                    path=path,
                    line=number,
                    field="case_id",
                )
        except CaseFormatError as err:
            if on_error is None:
                raise
            on_error(err)
            n_skipped += 1
            continue
        seen[case.case_id] = number
        cases.append(case)
    if not cases:
        raise no_cases_error(path, n_skipped)
    return cases


def write_cases(path: str | Path, cases: Iterable[Case]) -> Path:
    """Write cases in canonical JSONL form (UTF-8, one case per line) atomically.

    The file is written to a temporary sibling and renamed, so an existing file is never
    left half-written.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8", newline="\n") as fh:
        for case in cases:
            fh.write(case.to_json_line())
            fh.write("\n")
    tmp.replace(path)
    return path
