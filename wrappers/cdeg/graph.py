"""The Counterfactual Diagnostic Evidence Graph G = (V_D, V_E, V_A, E_AE, E_ED, E_D)
(CDEG paper, "Graph Consolidation", Eq. 6), and its versioned JSON file.

The file format is ``clinenv.cdeg/1``; E_{s->t} (Eq. 7) is :meth:`RevisionEdge.evidence_ids`.
"""

from __future__ import annotations

import json
import os
import tempfile
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from clinenv.config_model import first_error
from clinenv.errors import ClinenvError
from clinenv.wrappers.cdeg.atoms import EvidenceAtom

#: Format tag of the graph file; bump on incompatible changes.
FORMAT = "clinenv.cdeg/1"

#: Roles of validated evidence (candidate sets C_M, C_I, C_B; CDEG Eq. 5).
Role = Literal["missing", "ignored", "blocking"]


class GraphFileError(ClinenvError, ValueError):
    """A graph file cannot be read: not JSON, another format, or an invalid field.

    The message names the file and, for an invalid field, its JSON path
    (``revisions.3.target``).
    """


class DiagnosisNode(BaseModel):
    """A diagnosis node of V_D.

    Attributes:
        node_id: ``"D<n>"``.
        label: the normalized diagnosis (lower case, single spaces).
        aliases: the answers as written that were mapped to this node (at most a few).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    node_id: str = Field(pattern=r"^D\d+$")
    label: str = Field(min_length=1)
    aliases: tuple[str, ...] = ()


class EvidenceNode(BaseModel):
    """An evidence node of V_E: one evidence atom.

    Attributes:
        node_id: ``"E<n>"``.
        atom: the evidence atom (its :meth:`~EvidenceAtom.key` is unique in the graph).
        examples: up to a few observation texts the atom was extracted from.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    node_id: str = Field(pattern=r"^E\d+$")
    atom: EvidenceAtom
    examples: tuple[str, ...] = ()


class ActionNode(BaseModel):
    """An acquisition-action node of V_A.

    Attributes:
        node_id: ``"A<n>"``.
        kind: ``"exam"`` (a test or physical-exam section, by its catalog name, which is
            stable across cases while exam ids are not) or ``"question"`` (a patient
            question).
        name: the exam name (``"Chest X-Ray"``) or the question text.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    node_id: str = Field(pattern=r"^A\d+$")
    kind: Literal["exam", "question"]
    name: str = Field(min_length=1)


class ActionEvidenceEdge(BaseModel):
    """An E_AE edge: ``action`` yielded ``evidence`` in ``count`` trajectories."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    action: str
    evidence: str
    count: int = Field(default=1, ge=1)


class EvidenceDiagnosisEdge(BaseModel):
    """An E_ED edge: validated ``evidence`` linked to ``diagnosis``.

    Attributes:
        role: ``"missing"`` or ``"ignored"`` (linked to D_t: supports the revision) or
            ``"blocking"`` (linked to D_s: favours keeping it).
        count: validated pairs that support the link.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    evidence: str
    diagnosis: str
    role: Role
    count: int = Field(default=1, ge=1)


class RevisionEdge(BaseModel):
    """An E_D edge: the revision D_s -> D_t with its validated evidence.

    Attributes:
        edge_id: ``"R<n>"``.
        source: D_s, the failed trajectories' diagnosis node id.
        target: D_t, the paired successful trajectories' diagnosis node id.
        missing: validated missing-evidence node ids (completion test).
        ignored: validated ignored-evidence node ids (reappraisal test).
        blocking: validated blocking-evidence node ids (blocking test).
        context: evidence node ids both trajectories of a pair had (not validated).
        support: number of validated trajectory pairs with promoting (missing or
            ignored) evidence behind the edge (>= 1).
        cases: the edge's source cases: the case ids of every validated pair merged
            into it (those pairs first, then pairs that added only blocking evidence and
            context); the CDEG wrapper never uses the edge on these cases.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    edge_id: str = Field(pattern=r"^R\d+$")
    source: str
    target: str
    missing: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()
    blocking: tuple[str, ...] = ()
    context: tuple[str, ...] = ()
    support: int = Field(default=1, ge=1)
    cases: tuple[str, ...] = ()

    def promoting_ids(self) -> tuple[str, ...]:
        """Evidence that promotes the revision toward D_t: missing, then ignored."""
        return tuple(dict.fromkeys(self.missing + self.ignored))

    def evidence_ids(self) -> tuple[str, ...]:
        """E_{s->t} of CDEG Eq. 7: missing, ignored and blocking evidence (no repeats)."""
        return tuple(dict.fromkeys(self.missing + self.ignored + self.blocking))


class CDEGraph(BaseModel):
    """G = (V_D, V_E, V_A, E_AE, E_ED, E_D) (CDEG Eq. 6).

    Attributes:
        format: :data:`FORMAT`.
        diagnoses, evidence, actions: the node lists.
        action_evidence, evidence_diagnosis, revisions: the edge lists.
        metadata: how the graph was built (parameters, similarity model name, source run
            logs with their sha256, ``construction_cases`` ``{dataset: [case_id, ...]}``,
            counts); free-form JSON.

    Raises:
        pydantic.ValidationError: duplicate node or edge ids, duplicate atom keys, or an
            edge that names a missing node (on construction; :meth:`load` turns it into
            a :class:`GraphFileError` naming the file and field).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    format: Literal["clinenv.cdeg/1"] = FORMAT
    diagnoses: tuple[DiagnosisNode, ...] = ()
    evidence: tuple[EvidenceNode, ...] = ()
    actions: tuple[ActionNode, ...] = ()
    action_evidence: tuple[ActionEvidenceEdge, ...] = ()
    evidence_diagnosis: tuple[EvidenceDiagnosisEdge, ...] = ()
    revisions: tuple[RevisionEdge, ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _references(self) -> CDEGraph:
        for name, ids in (("diagnoses", [n.node_id for n in self.diagnoses]),
                          ("evidence", [n.node_id for n in self.evidence]),
                          ("actions", [n.node_id for n in self.actions]),
                          ("revisions", [e.edge_id for e in self.revisions])):
            if len(set(ids)) != len(ids):
                raise ValueError(f"{name}: duplicate ids")
        keys = [n.atom.key() for n in self.evidence]
        if len(set(keys)) != len(keys):
            raise ValueError("evidence: two nodes hold the same atom")
        d, e, a = self.diagnosis_by_id, self.evidence_by_id, self.action_by_id
        for i, edge in enumerate(self.action_evidence):
            _need(a, edge.action, f"action_evidence.{i}.action")
            _need(e, edge.evidence, f"action_evidence.{i}.evidence")
        for i, edge in enumerate(self.evidence_diagnosis):
            _need(e, edge.evidence, f"evidence_diagnosis.{i}.evidence")
            _need(d, edge.diagnosis, f"evidence_diagnosis.{i}.diagnosis")
        for i, edge in enumerate(self.revisions):
            _need(d, edge.source, f"revisions.{i}.source")
            _need(d, edge.target, f"revisions.{i}.target")
            for role in ("missing", "ignored", "blocking", "context"):
                for ref in getattr(edge, role):
                    _need(e, ref, f"revisions.{i}.{role}")
        return self

    # ---------------------------------------------------------------- indexes
    @cached_property
    def diagnosis_by_id(self) -> dict[str, DiagnosisNode]:
        """V_D by node id."""
        return {n.node_id: n for n in self.diagnoses}

    @cached_property
    def evidence_by_id(self) -> dict[str, EvidenceNode]:
        """V_E by node id."""
        return {n.node_id: n for n in self.evidence}

    @cached_property
    def evidence_by_key(self) -> dict[str, str]:
        """Evidence node id by :meth:`EvidenceAtom.key` (the exact part of matching)."""
        return {n.atom.key(): n.node_id for n in self.evidence}

    @cached_property
    def action_by_id(self) -> dict[str, ActionNode]:
        """V_A by node id."""
        return {n.node_id: n for n in self.actions}

    @cached_property
    def out_edges(self) -> dict[str, tuple[RevisionEdge, ...]]:
        """Revision edges by source diagnosis id (every D_s with at least one edge)."""
        out: dict[str, list[RevisionEdge]] = {}
        for edge in self.revisions:
            out.setdefault(edge.source, []).append(edge)
        return {k: tuple(v) for k, v in out.items()}

    @cached_property
    def actions_for_evidence(self) -> dict[str, tuple[str, ...]]:
        """Action node ids that yielded each evidence node (E_AE), most frequent first."""
        out: dict[str, list[tuple[int, str]]] = {}
        for edge in self.action_evidence:
            out.setdefault(edge.evidence, []).append((-edge.count, edge.action))
        return {k: tuple(a for _, a in sorted(v)) for k, v in out.items()}

    def counts(self) -> dict[str, int]:
        """Node and edge counts: ``{"diagnoses", "evidence", "actions",
        "action_evidence", "evidence_diagnosis", "revisions"}``."""
        return {name: len(getattr(self, name)) for name in (
            "diagnoses", "evidence", "actions", "action_evidence", "evidence_diagnosis",
            "revisions")}

    # -------------------------------------------------------------------- file
    def save(self, path: str | Path) -> Path:
        """Write the graph as one JSON file, atomically (a crash never leaves half a file).

        The file gets the permissions of a plainly created file (``0o666`` less the
        umask), not the ``0o600`` of the temporary file it is written through.

        Returns:
            The path written.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = self.model_dump(mode="json")
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, ensure_ascii=False, indent=1)
                f.write("\n")
            os.chmod(tmp, 0o666 & ~_umask())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    @classmethod
    def load(cls, path: str | Path) -> CDEGraph:
        """Read a graph file written by :meth:`save`.

        Raises:
            FileNotFoundError: no such file.
            IsADirectoryError: ``path`` is a folder.
            GraphFileError: not UTF-8 (with the byte offset), a
                run log (``clinenv.runlog/1``) instead of a graph, not JSON (with line
                and column), a format other than :data:`FORMAT`, or an invalid field
                (with its JSON path).
        """
        path = Path(path)
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            raise GraphFileError(f"{path}: not UTF-8 text (byte 0x{raw[err.start]:02x} at "
                                 f"offset {err.start}); a graph file is the JSON written "
                                 "by `clinenv cdeg build`") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            if _is_run_log(text):
                raise GraphFileError(f"{path}: this is a run log (clinenv.runlog/1), not a "
                                     "CDEG graph; build a graph from it with `clinenv cdeg "
                                     "build`") from None
            raise GraphFileError(f"{path}, line {err.lineno}, column {err.colno}: not "
                                 f"JSON ({err.msg})") from None
        if not isinstance(data, dict):
            raise GraphFileError(f"{path}: expected a JSON object, got {type(data).__name__}")
        found = data.get("format")
        if found is None and str(data.get("schema", "")).startswith("clinenv.runlog/"):
            raise GraphFileError(f"{path}: this is a run log ({data['schema']}), not a CDEG "
                                 "graph; build a graph from it with `clinenv cdeg build`")
        if found is None:
            raise GraphFileError(f"{path}: field 'format' is missing; this clinenv reads "
                                 f"{FORMAT!r} graph files (rebuild with `clinenv cdeg build`)")
        if found != FORMAT:
            raise GraphFileError(f"{path}: field 'format' is {found!r}; this clinenv reads "
                                 f"{FORMAT!r} graph files (rebuild with `clinenv cdeg build`)")
        try:
            return cls.model_validate(data)
        except ValidationError as err:
            where, message = first_error(err, "(top level)")
            raise GraphFileError(f"{path}: field {where}: {message}") from None


def _umask() -> int:
    """The process umask: read from ``/proc/self/status`` where there is one (reading
    it through ``os.umask`` sets it for a moment, which other threads would see)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _is_run_log(text: str) -> bool:
    """Whether the first line of ``text`` is a run-log line (JSON Lines)."""
    first = text.lstrip().split("\n", 1)[0]
    try:
        line = json.loads(first)
    except json.JSONDecodeError:
        return False
    return isinstance(line, dict) and str(line.get("schema", "")).startswith("clinenv.runlog/")


def _need(index: dict[str, Any], ref: str, where: str) -> None:
    if ref not in index:
        raise ValueError(f"{where}: unknown node id {ref!r}")


def coverage(edge: RevisionEdge, state: set[str] | frozenset[str]) -> float:
    """cov_t(D_s, D_t) = |S_t ∩ E_{s->t}| / |E_{s->t}| (CDEG Eq. 7).

    Args:
        edge: the revision edge.
        state: S_t, the evidence node ids matched so far.

    Returns:
        A float in ``[0, 1]``; 0.0 for an edge without evidence.
    """
    ids = edge.evidence_ids()
    if not ids:
        return 0.0
    return sum(1 for i in ids if i in state) / len(ids)
