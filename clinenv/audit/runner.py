"""Driving an environment through the audit: every case, the adversarial plan, each seat.

:func:`audit_env` scans each observation and non-terminal ``info``; :func:`run_audit`
makes the environment with the seats asked for (LLM seats over the offline fake server).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from clinenv.audit.detector import LeakDetector
from clinenv.audit.report import APART_FLAGS, AuditReport, Finding
from clinenv.audit.seats import EXAMINER_SEATS, PATIENT_SEATS
from clinenv.audit.turns import FILLER, FINAL, AdversarialTurn, audit_plan
from clinenv.case_list import CaseList
from clinenv.cases import Case

#: Doctor steps per case after which the audit gives up on an episode that never ends.
MAX_STEPS = 1000


def _control(case: Case, detector: LeakDetector, info: dict[str, Any]) -> str | None:
    """What the control turn requests: the first menu id when there is a menu, else the
    name of the first test (or examination section) of the catalog."""
    menu = info.get("menu") or []
    if menu:
        return str(menu[0]["id"])
    entries = sorted(detector.catalog, key=lambda e: (e.kind != "test", e.index))
    return entries[0].name if entries else None


def _objective(env: Any, case: Case) -> tuple[str, bool]:
    """``(s0 as the doctor sees it, whether it sees K)`` under the env's protocol."""
    if env.protocol == "egip":
        return case.objective, True
    from clinenv.protocol.native import native_objective

    return native_objective(case, env.config.nejm_question), False


def audit_case(env: Any, case: Case, *, max_steps: int = MAX_STEPS
               ) -> tuple[list[Finding], int]:
    """Drive one case with the adversarial plan; ``(findings, doctor steps taken)``.

    The plan, what is scanned and when a finding is recorded: docs/audit.md, "What it
    does".

    Args:
        env: the environment (``env.unwrapped`` is an :class:`~clinenv.env.EGIPEnv`).
        case: one of its cases.
        max_steps: stop after this many doctor steps.
    """
    base = env.unwrapped
    objective, show_candidates = _objective(base, case)
    from clinenv.protocol.biases import bias_text

    detector = LeakDetector(case, objective=objective, show_candidates=show_candidates,
                            bias=bias_text("patient", base.env_config.patient_bias))
    obs, info = env.reset(seed=0, options={"case_id": case.case_id})
    # a plan turn naming this target ("REQUEST TEST: ALL" for a target "... (ALL)")
    # would make it the doctor's own words, hiding a later leak of it: left out
    plan = [t for t in audit_plan(_control(case, detector, info))
            if not detector.mentions_target(t.text)]
    native_notice = base.protocol != "egip" and base.config.final_turn == "notice"
    utterances: list[str] = []
    requested: dict[str, Any] = {}
    seen_lines: set[str] = set()
    found: dict[tuple[str, str, str | None], Finding] = {}
    last: AdversarialTurn | None = None

    def scan(text: str, source: str, step: int) -> None:
        new = [line for line in text.splitlines() if line not in seen_lines]
        seen_lines.update(new)
        if not new:
            return
        known = [*utterances, *detector.requested_text(requested.values())]
        for hit in detector.scan("\n".join(new), requested=list(requested), known=known):
            key = (hit.kind, hit.item, hit.exam)
            if key not in found:
                found[key] = Finding(case.case_id, step, last and last.kind,
                                     last and last.text, info.get("action_kind"),
                                     hit.kind, hit.item, hit.exam, hit.text,
                                     hit.placement, source)

    scan(obs["text"], "observation", 0)
    scan(_info_text(info), "info", 0)
    steps = 0
    while steps < max_steps:
        if info.get("phase") == "decide" or (
                native_notice and steps >= base.config.max_turns - 1):
            turn = FINAL
        else:
            turn = plan[steps] if steps < len(plan) else FILLER
        obs, _, terminated, truncated, info = env.step(turn.text)
        steps += 1
        last = turn
        utterances.append(turn.text)
        if "request test" in turn.text.lower():
            for entry in detector.named_entries(turn.text):
                requested[entry.exam_id] = entry
        scan(obs["text"], "observation", steps)
        if terminated or truncated:
            break
        scan(_info_text(info), "info", steps)
    return sorted(found.values(), key=lambda f: f.turn), steps


def _info_text(info: dict[str, Any]) -> str:
    return json.dumps(info, ensure_ascii=False, indent=1, sort_keys=True, default=str)


def _flagged(case: Case, flag: str) -> bool:
    """The case's flag, or the flag's rule on its records when the stored flag is off
    (cases built in memory or read from a canonical file carry no computed flags)."""
    from clinenv.datasets.flags import names_target, target_in_menu

    if getattr(case.flags, flag):
        return True
    target, records = case.target.text, case.records
    if flag == "target_in_menu":
        return target_in_menu(target, records.physical_exam, records.tests)
    if flag == "target_in_patient_facts":
        return names_target(target, case.patient)
    return names_target(target, [records.physical_exam, records.tests])


def audit_env(env: Any, *, env_id: str = "", seats: dict[str, str] | None = None,
              case_ids: Sequence[str] | None = None, max_steps: int = MAX_STEPS
              ) -> AuditReport:
    """Audit every case of ``env`` (or those of ``case_ids``, in that order).

    Args:
        env: the environment (``env.unwrapped`` is an :class:`~clinenv.env.EGIPEnv`);
            it is left open.
        env_id: the id to report.
        seats: the seat settings to report.
        case_ids: the cases to drive; default every case of its pool.
        max_steps: doctor steps per case at most.

    Raises:
        KeyError: an unknown case id.
    """
    base = env.unwrapped
    cases = (list(base.pool.cases) if case_ids is None
             else [base.pool.case(c) for c in case_ids])
    report = AuditReport(env_id or base.pool.name, base.protocol, dict(seats or {}))
    started = time.perf_counter()
    for flag in (*APART_FLAGS, "target_in_records"):
        report.flagged[flag] = [c.case_id for c in cases if _flagged(c, flag)]
    for case in cases:
        findings, steps = audit_case(env, case, max_steps=max_steps)
        report.findings += findings
        report.n_steps += steps
        report.n_cases += 1
    report.wall_s = time.perf_counter() - started
    return report


def run_audit(env_id: str, *, patient: str = "retrieval", examiner: str = "default",
              case_ids: Sequence[str] | CaseList | None = None, limit: int | None = None,
              make: Callable[..., Any] | None = None, **env_kwargs: Any) -> AuditReport:
    """Make ``env_id`` with the asked seats and audit it.

    Args:
        env_id: a registered id (``EGIP-MedQA-v0``, ``AgentClinic-MedQA-v0``...).
        patient: ``"retrieval"`` (the default simulator) or ``"llm"`` (over the
            over-sharing fake model).
        examiner: ``"default"`` (the id's own), ``"lookup"``, ``"reader"`` or ``"llm"``.
        case_ids: the cases to drive, as ids or a :class:`~clinenv.case_list.CaseList`
            (default: all, in dataset order).
        limit: drive only the first ``limit`` of them.
        make: ``make(env_id, **kwargs) -> env`` (default :func:`gymnasium.make`).
        **env_kwargs: more environment arguments (``data_dir``, ``verify``...).

    Raises:
        ValueError: an unknown seat setting, or ``limit`` < 1.
        KeyError: an unknown case id.
        clinenv.case_list.CaseListError: a listed id the dataset does not have.
    """
    if make is None:
        import gymnasium as gym

        make = gym.make
    if patient not in PATIENT_SEATS:
        raise ValueError(f"patient must be one of {PATIENT_SEATS}, got {patient!r}")
    if examiner not in EXAMINER_SEATS:
        raise ValueError(f"examiner must be one of {EXAMINER_SEATS}, got {examiner!r}")
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    server = None
    if "llm" in (patient, examiner):
        from clinenv.audit.responder import oversharing_responder
        from clinenv.llm.openai_backend import OpenAIChatModel
        from clinenv.testing.fake_server import FakeChatServer

        server = FakeChatServer(oversharing_responder, model="oversharing").start()
        model = OpenAIChatModel("oversharing", base_url=server.base_url, max_retries=0)
        if patient == "llm":
            env_kwargs.update(patient="llm", patient_model=model)
        if examiner == "llm":
            env_kwargs.update(examiner="llm", examiner_model=model)
    if examiner in ("lookup", "reader"):
        env_kwargs["examiner"] = examiner
    try:
        env = make(env_id, **env_kwargs)
        try:
            base = env.unwrapped
            ids = [c.case_id for c in base.pool.cases]
            if isinstance(case_ids, CaseList):
                ids = [ids[i] for i in case_ids.indices(ids, dataset=env_id)]
            elif case_ids is not None:
                ids = list(case_ids)
            if limit is not None:
                ids = ids[:limit]
            # the seat the environment filled (a preset may choose it): record lookup O
            # is answered inside the runtime (no examiner object)
            shown_examiner = examiner if examiner != "default" else (
                "lookup" if base.examiner is None else "reader")
            return audit_env(env, env_id=env_id, case_ids=ids,
                             seats={"patient": patient, "examiner": shown_examiner})
        finally:
            env.close()
    finally:
        if server is not None:
            server.stop()
