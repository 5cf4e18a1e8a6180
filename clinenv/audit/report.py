"""The audit's findings and report: what reached the doctor's input, case by case.

:class:`Finding` and :class:`AuditReport` (``leaks``, ``apart``; ``passed`` is ``not
leaks``); the JSON form is in docs/audit.md.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

#: Case flags whose target findings are reported apart.
APART_FLAGS = ("target_in_menu", "target_in_patient_facts")


@dataclass(frozen=True, slots=True)
class Finding:
    """One finding in one case's doctor inputs.

    Attributes:
        case_id: the case.
        turn: the doctor step after which it appeared (0: the first observation, before
            any doctor turn; n: after the n-th doctor utterance).
        doctor_turn: the kind of that utterance (``"prompt_injection"``...,
            :data:`clinenv.audit.turns.TurnKind`), ``None`` at turn 0.
        doctor_text: that utterance, ``None`` at turn 0.
        action_kind: how the environment read it (``info["action_kind"]``), if given.
        kind: ``"target"``, ``"target_word"`` or ``"unrequested_result"``.
        item: the target phrase, the word, or the recorded value found.
        exam: the examination of an unrequested result (``"; "``-joined when several
            unrequested examinations record the same value), else ``None``.
        text: the line of the doctor's input that holds it.
        placement: ``"leak"``, ``"menu"``, ``"patient_facts"`` or ``"bias"``.
        source: ``"observation"`` (the observation text) or ``"info"``.
    """

    case_id: str
    turn: int
    doctor_turn: str | None
    doctor_text: str | None
    action_kind: str | None
    kind: str
    item: str
    exam: str | None
    text: str
    placement: str
    source: str


@dataclass
class AuditReport:
    """The result of one audit; its JSON form is in docs/audit.md, "The JSON report".

    Attributes:
        env_id: the audited environment id (or a label).
        protocol: ``"egip"``, ``"agentclinic"`` or ``"medagentsim"``.
        seats: the seats driven, e.g. ``{"patient": "llm", "examiner": "lookup"}``.
        n_cases: cases driven.
        n_steps: doctor steps taken over all cases.
        wall_s: seconds the audit took (not part of :meth:`to_dict` when ``None``).
        findings: every :class:`Finding`, by case then turn.
        flagged: ``{flag: [case_id, ...]}`` for :data:`APART_FLAGS` and
            ``target_in_records``, the driven cases that carry each (the stored flag,
            else the flag's rule on the case's records).
    """

    env_id: str
    protocol: str
    seats: dict[str, str]
    n_cases: int = 0
    n_steps: int = 0
    wall_s: float | None = None
    findings: list[Finding] = field(default_factory=list)
    flagged: dict[str, list[str]] = field(default_factory=dict)

    def _apart_case(self, case_id: str) -> bool:
        return any(case_id in self.flagged.get(flag, ()) for flag in APART_FLAGS)

    def is_leak(self, finding: Finding) -> bool:
        """Whether ``finding`` counts as a leak.

        A finding placed ``"leak"`` is one, except a target finding (``"target"``,
        ``"target_word"``) on a case flagged in :data:`APART_FLAGS`; an unrequested
        result is a leak on every case.
        """
        if finding.placement != "leak":
            return False
        return finding.kind == "unrequested_result" or not self._apart_case(finding.case_id)

    @property
    def leaks(self) -> list[Finding]:
        """The findings that count as leaks."""
        return [f for f in self.findings if self.is_leak(f)]

    @property
    def apart(self) -> list[Finding]:
        """The findings reported apart (flagged cases, menu and patient-fact hits)."""
        return [f for f in self.findings if not self.is_leak(f)]

    @property
    def passed(self) -> bool:
        """No leak."""
        return not self.leaks

    def counts(self) -> dict[str, Any]:
        """Leak counts: ``n_leaks``, ``n_leaking_cases``, ``by_kind`` and
        ``by_doctor_turn`` (leaks only), ``n_apart``."""
        leaks = self.leaks
        return {
            "n_leaks": len(leaks),
            "n_leaking_cases": len({f.case_id for f in leaks}),
            "by_kind": dict(sorted(Counter(f.kind for f in leaks).items())),
            "by_doctor_turn": dict(sorted(Counter(str(f.doctor_turn) for f in leaks).items())),
            "n_apart": len(self.apart),
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: the header fields, ``passed``, ``counts``, ``leaks``,
        ``apart`` (each a list of :class:`Finding` dicts) and ``flagged``."""
        out: dict[str, Any] = {"env_id": self.env_id, "protocol": self.protocol,
                               "seats": dict(self.seats), "n_cases": self.n_cases,
                               "n_steps": self.n_steps}
        if self.wall_s is not None:
            out["wall_s"] = round(self.wall_s, 3)
        out.update(passed=self.passed, counts=self.counts(),
                   leaks=[asdict(f) for f in self.leaks],
                   apart=[asdict(f) for f in self.apart],
                   flagged={k: list(v) for k, v in self.flagged.items()})
        return out

    def to_text(self, *, max_listed: int = 50) -> str:
        """A readable summary: the verdict, counts, up to ``max_listed`` leaks, the
        flagged cases and the findings reported apart."""
        counts = self.counts()
        seats = ", ".join(f"{k}={v}" for k, v in self.seats.items())
        lines = [f"audit {self.env_id} ({self.protocol}; {seats}): {self.n_cases} cases, "
                 f"{self.n_steps} doctor steps"
                 + (f", {self.wall_s:.1f} s" if self.wall_s is not None else "")]
        if self.passed:
            lines.append("PASSED: no target and no unrequested result reached the doctor")
        else:
            lines.append(f"LEAKED: {counts['n_leaks']} findings in "
                         f"{counts['n_leaking_cases']} cases ("
                         + ", ".join(f"{k} {v}" for k, v in counts["by_kind"].items()) + ")")
        for f in self.leaks[:max_listed]:
            lines.append(_line(f))
        if len(self.leaks) > max_listed:
            lines.append(f"  ... and {len(self.leaks) - max_listed} more (see --json)")
        for flag, ids in self.flagged.items():
            if ids:
                lines.append(f"flagged {flag}: {len(ids)} cases: {', '.join(ids[:20])}"
                             + (" ..." if len(ids) > 20 else ""))
        if self.apart:
            bias = (", hits the patient's bias text holds"
                    if any(f.placement == "bias" for f in self.apart) else "")
            lines.append(f"reported apart ({len(self.apart)}: menu or patient-fact hits, "
                         f"target hits on flagged cases{bias}):")
            lines += [_line(f) for f in self.apart[:max_listed]]
            if len(self.apart) > max_listed:
                lines.append(f"  ... and {len(self.apart) - max_listed} more (see --json)")
        return "\n".join(lines)


def _line(f: Finding) -> str:
    where = f"turn {f.turn}" + (f" ({f.doctor_turn})" if f.doctor_turn else "")
    what = f"{f.kind} {f.item!r}" + (f" of {f.exam}" if f.exam else "")
    return f"  {f.case_id} {where} [{f.placement}, {f.source}]: {what} in: {f.text}"
