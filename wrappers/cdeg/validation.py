"""Counterfactual validation of candidate evidence (CDEG "Counterfactual Validation").

Completion, reappraisal and blocking tests, each in both diagnosis orders; a candidate
is kept only when both show the shift (docs/cdeg.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from clinenv.wrappers.cdeg.atoms import EvidenceAtom
from clinenv.wrappers.cdeg.candidates import CandidateSets, MergedAtom
from clinenv.wrappers.cdeg.verifier import Verifier

#: Test names and the role a passing candidate gets.
Test = Literal["completion", "reappraisal", "blocking"]
ROLE_OF_TEST = {"completion": "missing", "reappraisal": "ignored", "blocking": "blocking"}
#: Orders: D_s listed first, or D_t listed first.
ORDERS = ("st", "ts")


@dataclass(frozen=True)
class VerifierCall:
    """One verifier call.

    Attributes:
        test: ``"completion"``, ``"reappraisal"``, ``"blocking"``, or ``"before:E_s"`` /
            ``"before:E_t"`` for a before measurement.
        order: ``"st"`` (D_s first) or ``"ts"`` (D_t first).
        candidate: the intervened atom key; ``None`` for a before measurement.
        preferred: ``"D_s"``, ``"D_t"`` or ``None`` (no preference / unreadable).
    """

    test: str
    order: str
    candidate: str | None
    preferred: str | None


@dataclass
class PairValidation:
    """Validation outcome of one pair.

    Attributes:
        missing, ignored, blocking: validated atom keys per role, candidate order.
        calls: every verifier call for this pair, in call order.
        n_st_order_only: candidates that shifted with D_s listed first (``"st"``) but
            not with D_t listed first.
        n_skipped: candidates not tested because the before preference rules them out.
    """

    missing: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    blocking: list[str] = field(default_factory=list)
    calls: list[VerifierCall] = field(default_factory=list)
    n_st_order_only: int = 0
    n_skipped: int = 0

    @property
    def promoting(self) -> bool:
        """Whether validated evidence shifts the preference D_s -> D_t (missing or
        ignored): the condition for a revision edge (CDEG "Graph Consolidation")."""
        return bool(self.missing or self.ignored)


def validate_pair(d_s: str, d_t: str, e_s: Mapping[str, MergedAtom],
                  e_t: Mapping[str, MergedAtom], candidates: CandidateSets,
                  verifier: Verifier) -> PairValidation:
    """Run the three tests on one pair (docs/cdeg.md).

    Args:
        d_s, d_t: the failed and the successful trajectory's diagnoses.
        e_s, e_t: their evidence sets (atom key -> merged atom).
        candidates: the candidate sets to test (already restricted by any ablation).
        verifier: the verifier.

    Returns:
        A :class:`PairValidation`.
    """
    out = PairValidation()

    def ask(test: str, order: str, key: str | None, evidence: Sequence[EvidenceAtom],
            exposed: Sequence[EvidenceAtom] = ()) -> str | None:
        first, second = (d_s, d_t) if order == "st" else (d_t, d_s)
        raw = verifier.prefer(evidence, first, second, exposed=exposed)
        if raw not in ("first", "second", None):
            raise ValueError(f"verifier {getattr(verifier, 'name', verifier)!r} returned "
                             f"{raw!r}; expected 'first', 'second' or None")
        preferred = None if raw is None else (
            "D_s" if (raw == "first") == (order == "st") else "D_t")
        out.calls.append(VerifierCall(test, order, key, preferred))
        return preferred

    atoms_s = [m.atom for m in e_s.values()]
    atoms_t = [m.atom for m in e_t.values()]
    every = {**e_t, **e_s}
    tests: list[tuple[Test, tuple[str, ...], list[EvidenceAtom], str, str]] = [
        ("completion", candidates.missing, atoms_s, "D_s", "D_t"),
        ("reappraisal", candidates.ignored, atoms_s, "D_s", "D_t"),
        ("blocking", candidates.blocking, atoms_t, "D_t", "D_s"),
    ]
    before: dict[tuple[str, str], str | None] = {}
    for test, keys, base, start, goal in tests:
        if not keys:
            continue
        base_id = "E_t" if test == "blocking" else "E_s"
        for order in ORDERS:
            if (base_id, order) not in before:
                before[(base_id, order)] = ask(f"before:{base_id}", order, None, base)
        if any(before[(base_id, order)] != start for order in ORDERS):
            out.n_skipped += len(keys)
            continue
        kept = getattr(out, ROLE_OF_TEST[test])
        for key in keys:
            atom = every[key].atom
            shifted = []
            for order in ORDERS:
                if test == "reappraisal":
                    after = ask(test, order, key, base, exposed=[atom])
                else:
                    after = ask(test, order, key, [*base, atom])
                shifted.append(after == goal)
                if not shifted[-1]:
                    break
            if all(shifted) and len(shifted) == len(ORDERS):
                kept.append(key)
            elif shifted[0]:
                out.n_st_order_only += 1
    return out


def call_counts(calls: Sequence[VerifierCall]) -> dict[str, dict[str, int]]:
    """Verifier calls by test and outcome: ``{test: {"D_s": n, "D_t": n, "none": n}}``
    (before measurements under ``"before:E_s"`` / ``"before:E_t"``)."""
    counts: dict[str, Counter[str]] = {}
    for call in calls:
        counts.setdefault(call.test, Counter())[call.preferred or "none"] += 1
    return {name: {k: c.get(k, 0) for k in ("D_s", "D_t", "none")}
            for name, c in sorted(counts.items())}
