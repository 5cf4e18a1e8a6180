"""CDEG end to end, offline: sampled runs -> graph -> a wrapped doctor that intervenes.

1. A seeded, *sampling* scripted doctor (``exploration`` > 0: random menu picks and a
   score-weighted answer) runs K = 6 repetitions of every demo case, with
   ``premature_diagnosis="decide"`` (the doctor decides when to stop, as in the CDEG
   setting); sampling gives successful and failed trajectories of the same case.
2. :func:`clinenv.wrappers.cdeg.build.build_graph` builds the graph from that run log
   with the deterministic extractor, the documented deterministic verifier
   (:class:`~clinenv.wrappers.cdeg.verifier.LexicalVerifier`, its default
   ``min_overlap``) and the lexical similarity with its documented thresholds
   (:data:`~clinenv.embeddings.lexical.LEXICAL_THRESHOLDS`): pairing, candidate sets,
   counterfactual validation in both orders, consolidation. The script prints the
   build counts and the revision edges.
3. The same sampling doctor, wrapped by :class:`~clinenv.wrappers.cdeg.policy.CDEGDoctor`
   (lexical thresholds, and ``coverage_basis="edge+context"``: the demo graph's edges
   hold only missing evidence, which the literal Eq. 7 basis never retrieves before it
   is acquired), runs the cases of those edges again with fresh seeds; the script
   prints every intervention of the wrapper's log (the run-log field ``doctor_log``)
   and the episode's answer. On the command line, ``clinenv cdeg build RUNS --out
   graph.json`` uses the same defaults, and ``clinenv run ... --cdeg graph.json
   --cdeg-coverage-basis edge+context`` the same wrapper settings.

Run from the repository root (offline, a few seconds)::

    python examples/cdeg_end_to_end.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import gymnasium as gym

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.embeddings.lexical import LEXICAL_THRESHOLDS, LexicalSimilarity
from clinenv.episode import run_episode
from clinenv.rollouts import run_logged
from clinenv.wrappers.cdeg.build import BuildConfig, build_graph
from clinenv.wrappers.cdeg.extractors import DeterministicExtractor
from clinenv.wrappers.cdeg.policy import CDEGConfig, CDEGDoctor
from clinenv.wrappers.cdeg.verifier import LexicalVerifier


def sampling_doctor() -> ScriptedDoctor:
    """All history questions, two sampled examinations, a sampled answer."""
    return ScriptedDoctor(n_questions=5, exam_budget=2, exploration=0.5)


def main() -> int:
    env = gym.make("EGIP-Demo-v0", premature_diagnosis="decide")
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "construction.jsonl"
        runs = run_logged(env, sampling_doctor(), out=log, repetitions=6, seed=1)
        n_correct = sum(bool(line["correct"]) for line in runs.lines)
        print(f"construction runs: {len(runs.lines)} episodes, {n_correct} correct")
        result = build_graph([log], extractor=DeterministicExtractor(),
                             verifier=LexicalVerifier(), similarity=LexicalSimilarity(),
                             config=BuildConfig(
                                 diagnosis_threshold=LEXICAL_THRESHOLDS["diagnosis"]))
    graph = result.graph
    print(f"graph: {graph.counts()}")
    for edge in graph.revisions:
        source = graph.diagnosis_by_id[edge.source].label
        target = graph.diagnosis_by_id[edge.target].label
        names = [graph.evidence_by_id[e].atom.text() for e in edge.evidence_ids()]
        print(f"  {edge.edge_id}: {source} -> {target}; evidence {names}; cases "
              f"{list(edge.cases)}")
    config = CDEGConfig(coverage_basis="edge+context",
                        evidence_threshold=LEXICAL_THRESHOLDS["evidence"],
                        diagnosis_threshold=LEXICAL_THRESHOLDS["diagnosis"])
    doctor = CDEGDoctor(sampling_doctor(), graph, similarity=LexicalSimilarity(),
                        config=config)
    cases = sorted({c for edge in graph.revisions for c in edge.cases})
    shown = 0
    for seed in range(100, 130):
        for case_id in cases:
            record = run_episode(env, doctor, case_id=case_id, seed=seed)
            for entry in record["doctor_log"]:
                if entry["kind"] in ("acquire", "reappraise"):
                    shown += 1
                    print(f"intervention: {case_id} seed {seed} turn {entry['turn']} "
                          f"({entry['phase']}): {entry['kind']} on {entry['edge']} "
                          f"(coverage {entry['coverage']}), proposed "
                          f"{entry['proposed']!r}, evidence {entry['evidence']}, action "
                          f"{entry['action']}")
            if shown:
                print(f"episode answer: {record['answer']!r} ({record['verdict']})")
                return 0
    print("no intervention in these episodes")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
