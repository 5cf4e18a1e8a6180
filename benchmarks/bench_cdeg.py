"""Per-step overhead of the CDEG policy wrapper with a 10,000-edge graph.

A synthetic graph (seeded): ``--edges`` revision edges (default 10,000) over
``--diagnoses`` diagnosis nodes and ``--evidence`` evidence nodes, each edge with 1-3
missing, 1-4 ignored, 0-1 blocking and 0-3 context evidence ids. Its evidence nodes
include the atoms that the deterministic extractor reads from the demo episodes, so
exact matching, semantic matching, coverage updates and retrieval all run on real
observations; its diagnosis labels include the demo targets and candidates. So that
the intervention path runs too, the first edges are seeded from the demo episodes
themselves: for each case, an edge from the inner doctor's own answer with the first
three atoms it observed as ignored evidence and the last one as missing evidence (linked
to an exam it did not request), so localized retrieval finds the edge when the doctor
answers (coverage 4/4) and the wrapper prompts reappraisal (the deferral limit then
lets the answer stand). The script prints a histogram of
the wrapper's log kinds.

The encoder is precomputed: a seeded random unit vector per text (dimension ``--dim``,
default 768 like SapBERT) behind :class:`~clinenv.embeddings.similarity.EncoderSimilarity`
and its cache. Each episode set runs twice; the first pass fills the encoder cache and
only the second is measured ("excluding encoder calls, which are cached").

Over real episodes (:class:`~clinenv.agents.scripted_doctor.ScriptedDoctor` on the demo
set, or MedQA with ``--data-dir``; ``premature_diagnosis="decide"``), the wrapper's time
per doctor step is its ``act`` time minus the inner doctor's ``act`` time (re-asks
included in the inner time). Reported: mean and p95 in µs per step, with and without the
extractor's time. Target: < 1 ms per step.

Usage::

    python benchmarks/bench_cdeg.py [--edges N] [--evidence N] [--diagnoses N]
                                    [--dim D] [--data-dir DIR] [--episodes N]
"""

from __future__ import annotations

import argparse
import time
import zlib
from collections import Counter

import gymnasium as gym
import numpy as np

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.embeddings.similarity import EncoderSimilarity
from clinenv.protocol.catalog import Catalog
from clinenv.runs.episode import run_episode
from clinenv.wrappers.cdeg.atoms import EvidenceAtom
from clinenv.wrappers.cdeg.extractors import DeterministicExtractor
from clinenv.wrappers.cdeg.graph import (
    ActionEvidenceEdge,
    ActionNode,
    CDEGraph,
    DiagnosisNode,
    EvidenceNode,
    RevisionEdge,
)
from clinenv.wrappers.cdeg.policy import CDEGDoctor


class HashEncoder:
    """A precomputed encoder: a seeded random unit vector per text."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.name = f"hash-{dim}"

    def encode(self, texts):
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            rng = np.random.default_rng(zlib.crc32(text.encode("utf-8")))
            v = rng.standard_normal(self.dim).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out


class Timed:
    """Accumulates the wall time of a wrapped object's ``act`` or ``extract``."""

    def __init__(self, inner, method: str) -> None:
        self.inner, self.method, self.seconds = inner, method, 0.0
        self.name = getattr(inner, "name", "timed")

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _call(self, *args):
        t0 = time.perf_counter()
        try:
            return getattr(self.inner, self.method)(*args)
        finally:
            self.seconds += time.perf_counter() - t0

    def act(self, *args):
        return self._call(*args)

    def extract(self, *args):
        return self._call(*args)

    def reset(self, *, seed=None):
        self.inner.reset(seed=seed)


def episode_atoms(env, cases) -> tuple[list[EvidenceAtom], list[tuple[str, list, set]]]:
    """The atoms of the demo episodes' observations (deterministic extractor), and per
    episode ``(answer, its atoms in order, the exam names it requested)``."""
    extractor, atoms, episodes = DeterministicExtractor(), {}, []
    for case in cases:
        record = run_episode(env, ScriptedDoctor(), case_id=case, seed=0)
        seen, exams = [], set()
        for obs in record["evidence"]["observations"]:
            if obs.get("source") == "Measurement":
                exams.add(str(obs.get("context")))
            for atom in extractor.extract(obs):
                atoms.setdefault(atom.key(), atom)
                seen.append(atom)
        episodes.append((str(record.get("answer") or ""), seen, exams))
    return list(atoms.values()), episodes


def synthetic_graph(real_atoms, labels, exams, *, n_edges, n_evidence, n_diagnoses,
                    episodes=(), seed=0) -> CDEGraph:
    rng = np.random.default_rng(seed)
    atoms = list(real_atoms) + [EvidenceAtom(concept=f"finding {i}")
                                for i in range(max(0, n_evidence - len(real_atoms)))]
    answers = [answer.lower() for answer, _, _ in episodes if answer]
    labels = list(dict.fromkeys([*answers, *(x.lower() for x in labels)]))
    labels += [f"disease {i}" for i in range(max(0, n_diagnoses - len(labels)))]
    n_e, n_d = len(atoms), len(labels)
    atom_id = {a.key(): f"E{i + 1}" for i, a in enumerate(atoms)}
    label_id = {lab: f"D{i + 1}" for i, lab in enumerate(labels)}
    exam_id = {name: f"A{i + 1}" for i, name in enumerate(exams)}
    revisions, seeded_ae = [], []
    for k, (answer, seen, requested) in enumerate(episodes):  # edges the episodes reach
        keys = list(dict.fromkeys(a.key() for a in seen))
        if not answer or len(keys) < 4:
            continue
        missing = atom_id[keys[-1]]  # observed last: stands for evidence seen late
        unasked = [e for e in exams if e not in requested] or list(exams)
        seeded_ae.append(ActionEvidenceEdge(action=exam_id[unasked[0]], evidence=missing))
        revisions.append(RevisionEdge(
            edge_id=f"R{len(revisions) + 1}", source=label_id[answer.lower()],
            target=label_id[labels[(k + 1) % n_d]], missing=(missing,),
            ignored=tuple(atom_id[x] for x in keys[:3]), support=3))
    for _ in range(n_edges - len(revisions)):
        s, t = rng.choice(n_d, 2, replace=False)
        ids = rng.choice(n_e, 11, replace=False)
        m, i, b, c = 1 + rng.integers(3), 1 + rng.integers(4), rng.integers(2), rng.integers(4)
        cut = np.cumsum([m, i, b, c])
        name = [f"E{x + 1}" for x in ids]
        revisions.append(RevisionEdge(
            edge_id=f"R{len(revisions) + 1}", source=f"D{s + 1}", target=f"D{t + 1}",
            missing=tuple(name[:cut[0]]), ignored=tuple(name[cut[0]:cut[1]]),
            blocking=tuple(name[cut[1]:cut[2]]), context=tuple(name[cut[2]:cut[3]]),
            support=int(1 + rng.integers(3))))
    actions = [ActionNode(node_id=f"A{i + 1}", kind="exam", name=n) for i, n in enumerate(exams)]
    action_evidence = seeded_ae + [
        ActionEvidenceEdge(action=f"A{1 + int(rng.integers(len(exams)))}", evidence=f"E{e + 1}")
        for e in range(n_e) if f"E{e + 1}" not in {x.evidence for x in seeded_ae}]
    return CDEGraph(
        diagnoses=tuple(DiagnosisNode(node_id=f"D{i + 1}", label=lab.lower())
                        for i, lab in enumerate(labels)),
        evidence=tuple(EvidenceNode(node_id=f"E{i + 1}", atom=a) for i, a in enumerate(atoms)),
        actions=tuple(actions), action_evidence=tuple(action_evidence),
        revisions=tuple(revisions))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--edges", type=int, default=10_000)
    parser.add_argument("--evidence", type=int, default=2_000)
    parser.add_argument("--diagnoses", type=int, default=500)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--episodes", type=int, default=None)
    args = parser.parse_args()

    kwargs = {"premature_diagnosis": "decide"}
    env_id = "EGIP-Demo-v0"
    if args.data_dir:
        env_id, kwargs["data_dir"] = "EGIP-MedQA-v0", args.data_dir
    env = gym.make(env_id, **kwargs)
    pool = env.unwrapped.pool.cases
    cases = [c.case_id for c in pool][:args.episodes]
    labels = [c.target.text for c in pool] + [k for c in pool for k in (c.candidates or ())]
    exams = sorted({e.label for c in pool for e in Catalog(c.records).entries})
    t0 = time.perf_counter()
    real_atoms, episodes = episode_atoms(env, cases)
    graph = synthetic_graph(real_atoms, labels, exams, n_edges=args.edges,
                            n_evidence=args.evidence, n_diagnoses=args.diagnoses,
                            episodes=episodes)
    similarity = EncoderSimilarity(HashEncoder(args.dim))
    inner = Timed(ScriptedDoctor(), "act")
    extractor = Timed(DeterministicExtractor(), "extract")
    doctor = CDEGDoctor(inner, graph, similarity=similarity, extractor=extractor)
    print(f"graph {graph.counts()}; built and indexed in {time.perf_counter() - t0:.1f} s")

    per_step: list[float] = []
    per_step_no_extractor: list[float] = []
    interventions = 0
    kinds: Counter[str] = Counter()
    for measured in (False, True):
        for seed, case in enumerate(cases):
            doctor.reset(seed=seed)
            observation, info = env.reset(seed=seed, options={"case_id": case})
            done = False
            while not done:
                inner.seconds = extractor.seconds = 0.0
                t0 = time.perf_counter()
                action = doctor.act(observation, info)
                wrapper = time.perf_counter() - t0 - inner.seconds
                if measured:
                    per_step.append(wrapper)
                    per_step_no_extractor.append(wrapper - extractor.seconds)
                observation, _, terminated, truncated, info = env.step(action)
                done = terminated or truncated
            if measured:
                interventions += sum(e["kind"] in ("acquire", "reappraise")
                                     for e in doctor.episode_log())
                kinds.update(e["kind"] for e in doctor.episode_log())
    us = np.array(per_step) * 1e6
    us_core = np.array(per_step_no_extractor) * 1e6
    print(f"{env_id}: {len(cases)} episodes, {len(us)} doctor steps, "
          f"{interventions} interventions")
    print("log kinds: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    print(f"wrapper overhead per step: mean {us.mean():.0f} µs, p95 "
          f"{np.percentile(us, 95):.0f} µs (with the deterministic extractor)")
    print(f"without the extractor:     mean {us_core.mean():.0f} µs, p95 "
          f"{np.percentile(us_core, 95):.0f} µs (target < 1000 µs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
