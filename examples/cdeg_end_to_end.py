"""CDEG end to end, offline and held out: split -> sampled runs -> graph -> a wrapped
doctor on the held-out cases.

1. The demo cases are split (:func:`clinenv.datasets.case_split.split_cases`, half for
   construction, seed 0), as ``clinenv data split`` does.
2. A seeded, *sampling* scripted doctor (``exploration`` > 0: random menu picks and a
   score-weighted answer) runs K = 6 repetitions of every construction case (a case
   list, as ``clinenv run --cases``), with ``premature_diagnosis="decide"`` (the doctor
   decides when to stop, as in the CDEG setting); sampling gives successful and failed
   trajectories of the same case.
3. :func:`clinenv.wrappers.cdeg.build.build_graph` builds the graph from that run log
   with the deterministic extractor, the documented deterministic verifier
   (:class:`~clinenv.wrappers.cdeg.verifier.LexicalVerifier`, its default
   ``min_overlap``) and the lexical similarity with its documented thresholds
   (:data:`~clinenv.embeddings.lexical.LEXICAL_THRESHOLDS`). The script prints the
   build counts and the revision edges with their source cases.
4. The same sampling doctor, wrapped by :class:`~clinenv.wrappers.cdeg.policy.CDEGDoctor`
   (lexical thresholds, ``coverage_basis="edge+context"``), runs every held-out case
   with 10 fresh seeds; the script prints every intervention of the wrapper's log
   (the run-log field ``doctor_log``: edge, source cases, evidence, action) or says
   that there was none, and then shows that on an edge's own source case the wrapper
   skips that edge (``own_case_edges``). On the command line, ``clinenv cdeg build RUNS
   --out graph.json`` uses the same defaults, and ``clinenv run ... --cdeg graph.json
   --cdeg-coverage-basis edge+context`` the same wrapper settings.

Run from the repository root (offline, a few seconds)::

    python examples/cdeg_end_to_end.py
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import gymnasium as gym

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv import read_case_list, write_case_list
from clinenv.agents import ScriptedDoctor
from clinenv.datasets import split_cases
from clinenv.embeddings import LEXICAL_THRESHOLDS, LexicalSimilarity
from clinenv.runs import RunSpec, run, run_episode
from clinenv.wrappers.cdeg import (
    BuildConfig,
    CDEGConfig,
    CDEGDoctor,
    ConstructionOverlapWarning,
    DeterministicExtractor,
    LexicalVerifier,
    build_graph,
)


def sampling_doctor() -> ScriptedDoctor:
    """All history questions, two sampled examinations, a sampled answer."""
    return ScriptedDoctor(n_questions=5, exam_budget=2, exploration=0.5)


def main() -> int:
    env = gym.make("EGIP-Demo-v0", premature_diagnosis="decide")
    split = split_cases(env.unwrapped.pool.cases, 0.5, seed=0)
    print(f"split: {len(split.construction)} construction cases, "
          f"{len(split.evaluation)} held-out evaluation cases")
    with tempfile.TemporaryDirectory() as folder:
        listed = write_case_list(Path(folder) / "construction.txt", split.construction)
        log = Path(folder) / "construction.jsonl"
        runs = run(lambda: env, sampling_doctor, RunSpec(out=log, repetitions=6, seed=1,
                                                         cases=read_case_list(listed)))
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
    shown = 0
    for seed in range(100, 110):
        for case_id in split.evaluation:
            record = run_episode(env, doctor, case_id=case_id, seed=seed)
            for entry in record["doctor_log"]:
                if entry["kind"] in ("acquire", "reappraise"):
                    shown += 1
                    print(f"intervention: {case_id} seed {seed} turn {entry['turn']} "
                          f"({entry['phase']}): {entry['kind']} on {entry['edge']} (from "
                          f"{entry['edge_cases']}, coverage {entry['coverage']}), proposed "
                          f"{entry['proposed']!r}, evidence {entry['evidence']}, action "
                          f"{entry['action']}; answer {record['answer']!r} "
                          f"({record['verdict']})")
    if not shown:
        why = ("the graph's edges do not apply to them" if graph.revisions else
               "the construction cases gave no validated revision edge")
        print(f"no intervention on the {len(split.evaluation)} held-out cases in 10 seeds "
              f"each: {why}")
    for edge in graph.revisions[:1]:  # on its own source case an edge is never used
        record = run_episode(env, doctor, case_id=edge.cases[0], seed=100)
        own = [e for e in record["doctor_log"] if e["kind"] == "own_case_edges"]
        print(f"on construction case {edge.cases[0]}: edges skipped {own[0]['edges']}")
    return 0


if __name__ == "__main__":
    with warnings.catch_warnings():  # the last episode is a construction case, on purpose
        warnings.simplefilter("ignore", ConstructionOverlapWarning)
        raise SystemExit(main())
