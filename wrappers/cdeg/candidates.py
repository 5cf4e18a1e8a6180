"""Evidence sets of trajectories and the candidate sets of a pair (CDEG Eq. 5).

Observations with the same atom key merge, keeping their actions; for a pair:
C_M = E_t \\ E_s (missing), C_I = E_t ∩ E_s (ignored), C_B = E_s \\ E_t (blocking).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from clinenv.wrappers.cdeg.atoms import EvidenceAtom
from clinenv.wrappers.cdeg.extractors import AtomExtractor
from clinenv.wrappers.cdeg.trajectories import Trajectory, acquisition_action

#: Observation texts kept per merged atom (examples for prompts and the graph file).
MAX_EXAMPLES = 3
#: Characters kept of one example text.
EXAMPLE_CHARS = 300

#: An acquisition action: ``("exam", exam name)`` or ``("question", question text)``.
Action = tuple[str, str]
#: E for one trajectory: merged atoms by atom key, in order of first acquisition.
EvidenceSet = Mapping[str, "MergedAtom"]


@dataclass(frozen=True)
class MergedAtom:
    """One evidence atom of a trajectory with what produced it.

    Attributes:
        atom: the evidence atom.
        actions: acquisition actions whose observations gave it, first-seen order.
        examples: up to :data:`MAX_EXAMPLES` observation texts it came from.
    """

    atom: EvidenceAtom
    actions: tuple[Action, ...] = ()
    examples: tuple[str, ...] = ()


def observation_cache_key(observation: Mapping[str, Any]) -> tuple[Any, ...]:
    """What an extractor reads of an observation (source, context, content,
    availability): equal keys give equal atoms, so extraction runs once per key."""
    return (observation.get("source"), observation.get("context"),
            observation.get("content"), observation.get("availability"))


def evidence_set(trajectory: Trajectory, extractor: AtomExtractor, *,
                 cache: MutableMapping[tuple[Any, ...], list[EvidenceAtom]] | None = None,
                 ) -> dict[str, MergedAtom]:
    """E for ``trajectory``: its observations' atoms merged by key.

    Args:
        trajectory: the trajectory.
        extractor: maps one observation to atoms.
        cache: optional memo of extractor outputs by :func:`observation_cache_key`
            (shared across trajectories of a build: the K rollouts of a case repeat
            the same replies and results).

    Returns:
        ``{atom key: MergedAtom}`` in order of first acquisition.
    """
    merged: dict[str, MergedAtom] = {}
    for obs in trajectory.observations:
        key = observation_cache_key(obs)
        if cache is not None and key in cache:
            atoms = cache[key]
        else:
            atoms = extractor.extract(obs)
            if cache is not None:
                cache[key] = atoms
        action = acquisition_action(obs)
        example = str(obs.get("content") or "")[:EXAMPLE_CHARS]
        for atom in atoms:
            old = merged.get(atom.key(), MergedAtom(atom))
            actions = old.actions
            if action is not None and action not in actions:
                actions += (action,)
            examples = old.examples
            if example and example not in examples and len(examples) < MAX_EXAMPLES:
                examples += (example,)
            merged[atom.key()] = MergedAtom(old.atom, actions, examples)
    return merged


@dataclass(frozen=True)
class CandidateSets:
    """C_M, C_I, C_B of one pair (CDEG Eq. 5), as atom keys.

    Attributes:
        missing: C_M = E_t \\ E_s, in E_t order.
        ignored: C_I = E_t ∩ E_s, in E_t order.
        blocking: C_B = E_s \\ E_t, in E_s order.
    """

    missing: tuple[str, ...]
    ignored: tuple[str, ...]
    blocking: tuple[str, ...]


def candidate_sets(e_s: Mapping[str, MergedAtom],
                   e_t: Mapping[str, MergedAtom]) -> CandidateSets:
    """CDEG Eq. 5 for E_s (failed trajectory) and E_t (successful trajectory)."""
    return CandidateSets(missing=tuple(k for k in e_t if k not in e_s),
                         ignored=tuple(k for k in e_t if k in e_s),
                         blocking=tuple(k for k in e_s if k not in e_t))
