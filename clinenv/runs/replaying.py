"""The replay runner: one terminal decision per source episode, written to a new run log.

:func:`decide_and_score`, :func:`replay_run` / :func:`areplay_run`; scoring and reward
rules are in docs/api/runs.md.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clinenv.env.doctor_view import answer_outcome
from clinenv.env.simulators import accepts_seed, make_judge
from clinenv.env.spaces import clip_text
from clinenv.env.terminal_outcome import NOT_JUDGED, terminal_outcome
from clinenv.icd_map import cached_icd_map
from clinenv.llm.base import BackendError
from clinenv.protocol.evidence import render_evidence
from clinenv.protocol.history import event_to_dict
from clinenv.protocol.runtime import EGIPRuntime
from clinenv.reward_spec import spec_of_line
from clinenv.runlog import (
    RunLogWriter,
    dedupe_hint,
    doctor_config,
    is_error_line,
    read_run_log,
)
from clinenv.runlog_lock import RunLogLock
from clinenv.runs.concurrent import Concurrent
from clinenv.runs.episode import call_totals, error_dict, run_without_loop
from clinenv.runs.fail_fast import FailFast
from clinenv.runs.logged import Serial
from clinenv.runs.replay import (
    NAME_SUFFIXES,
    ReplayError,
    ReplaySource,
    SourceEpisode,
    ablate,
    load_source,
)
from clinenv.runs.spec import RunSpec, check_spec, check_unused
from clinenv.scoring import SCORING_VERSION, score_answer
from clinenv.seeding import call_seed

__all__ = ["ReplayResult", "areplay_run", "decide_and_score", "replay_doctor", "replay_run"]

#: Fields of a source line that belong to its own terminal decision and are dropped.
_DROPPED = ("llm", "doctor_log", "judge_verdict", "judge_disagrees", "timing", "error")


def replay_doctor(doctor: Any, ablation: str, source: ReplaySource) -> dict[str, Any]:
    """The ``doctor`` field of the replay's lines: the doctor's
    :func:`~clinenv.runlog.doctor_config`, its name suffixed by
    :data:`~clinenv.runs.replay.NAME_SUFFIXES` and its config extended with ``replay``:
    ``{"ablation", "source": file name, "source_sha256"}``."""
    base = doctor_config(doctor)
    return {"name": base["name"] + NAME_SUFFIXES[ablation],
            "config": {**base["config"], "replay": {
                "ablation": ablation, "source": source.path.name,
                "source_sha256": source.sha256}}}


async def decide_and_score(episode: SourceEpisode, doctor: Any, *, ablation: str,
                           judge: Any = None, use_async: bool = False) -> dict[str, Any]:
    """Recompute the terminal decision of ``episode`` and score it as the environment
    does (docs/api/runs.md, *Replay*).

    Args:
        episode: the source episode.
        doctor: a doctor policy (``reset(seed=)``, ``act``; ``aact`` with ``use_async``;
            ``drain_calls`` when it records model calls).
        ablation: one of :data:`~clinenv.runs.replay.ABLATIONS`.
        judge: ``None`` (the deterministic scorer) or a judge object (``judge`` /
            ``ajudge``).
        use_async: await ``aact`` / ``ajudge`` when present; otherwise nothing awaits,
            so :func:`~clinenv.runs.episode.run_without_loop` can drive it.

    Returns:
        ``{"outcome": outcome keys, "reward": terminal reward, "calls", "terminal_events",
        "applied": bool, "error": error dict or None, "doctor_s", "score_s"}``.
    """
    bundle = ablate(episode.bundle, ablation)
    text, clipped = clip_text(render_evidence(
        bundle, action_format=episode.protocol.action_format), episode.max_text_chars)
    line = episode.line
    info = {"case_id": episode.case.case_id, "dataset": episode.case.dataset,
            "phase": "decide", "turn": line["turns"], "menu": [],
            "candidates": None if bundle.candidates is None else list(bundle.candidates),
            "n_exams_requested": line.get("n_exams_requested", 0),
            "invalid_actions": line.get("invalid_actions", 0), "action_kind": None,
            "text_clipped": clipped, "new_observations": []}
    result: dict[str, Any] = {"applied": bundle != episode.bundle, "error": None, "calls": []}
    t0 = time.perf_counter()
    doctor.reset(seed=line["seed"])
    aact = getattr(doctor, "aact", None) if use_async else None
    try:
        action = await aact({"text": text}, info) if callable(aact) else doctor.act(
            {"text": text}, info)
    except BackendError as err:
        result["error"], action = error_dict(err), None
    drain = getattr(doctor, "drain_calls", None)
    if callable(drain):
        result["calls"] = [{"agent": "doctor", **c} for c in drain()]
    t1 = time.perf_counter()
    result["doctor_s"] = t1 - t0
    if action is None:
        result.update(outcome=None, reward=0.0, terminal_events=[], score_s=0.0)
        return result
    rt = EGIPRuntime(episode.prepared, episode.protocol)
    rt.turn, rt.phase = int(line["turns"]), "decide"  # the decision step of the source
    rt.submit_answer(action if isinstance(action, str) else str(action))
    # K is read only when the doctor saw it (no_candidates removes it: EGIP Table 3B)
    score = score_answer(rt.answer, rt.case, use_candidates=bundle.candidates is not None,
                         icd_map=None if episode.protocol.icd_map is None
                         else cached_icd_map(episode.protocol.icd_map))
    judgement: Any = NOT_JUDGED
    if judge is not None:
        if score.verdict != "unscored":  # non-answers and abstentions are never judged
            answer = score.matched if score.method == "option" and score.matched else rt.answer
            kwargs = ({"seed": call_seed(line["seed"], "replay", "judge")}
                      if accepts_seed(judge) else {})
            ajudge = getattr(judge, "ajudge", None) if use_async else None
            try:
                judgement = (await ajudge(answer, rt.case.target.text, **kwargs)
                             if callable(ajudge) else judge.judge(answer, rt.case.target.text,
                                                                  **kwargs))
            except BackendError as err:
                judgement, result["error"] = None, error_dict(err)
        drain = getattr(judge, "drain_calls", None)
        if callable(drain):
            result["calls"] += [{**c, "agent": "judge"} for c in drain()]
    verdict, final = terminal_outcome(score, judgement, with_judge=judge is not None)
    reward, outcome = answer_outcome(rt, score, verdict)
    result.update(outcome={**outcome, **final}, reward=reward,
                  terminal_events=[event_to_dict(e) for e in rt.history],
                  score_s=time.perf_counter() - t1)
    if result["error"] is not None:  # the judge failed: unfinished, as in an episode
        result.update(outcome=None, reward=0.0)
    return result


def _line(episode: SourceEpisode, decided: dict[str, Any], *, doctor: dict[str, Any],
          settings: dict[str, Any], source: ReplaySource) -> dict[str, Any]:
    """The output line of one replayed episode (its ``replay`` record: docs/evaluation.md,
    "The run-log line")."""
    src = episode.line
    line = {k: v for k, v in src.items() if k not in _DROPPED}
    line["scoring_version"] = SCORING_VERSION  # the replay's own verdicts
    spec, case = spec_of_line(src), episode.prepared.case
    # the legacy terms: reward = spec reward + legacy charges for a finished line (the
    # only kind a source holds: a cut-off line has no target and load_source refuses it)
    acquisition = float(src["reward"]) - spec.score(src, case)
    line["doctor"] = doctor
    if decided["outcome"] is None:  # an error line: unfinished, unscored
        line.update(answer=None, scored_answer=None, verdict="unscored", correct=False,
                    abstained=False, placeholder=False, answer_status="no_answer",
                    match_score=0.0, scorer="deterministic", terminated=False)
        if settings["judge"] is not None:
            line.update(judge_verdict=None, judge_disagrees=False)
    else:
        line.update(decided["outcome"])
    if decided["calls"]:
        line["llm"] = call_totals(decided["calls"]) | {"calls": decided["calls"]}
    line["timing"] = {"reset_s": 0.0, "doctor_s": decided["doctor_s"],
                      "env_s": decided["score_s"],
                      "total_s": decided["doctor_s"] + decided["score_s"]}
    if decided["error"] is not None:
        line["error"] = decided["error"]
    components = spec.components(line, case)
    line["reward_components"] = components.to_dict()
    line["reward"] = acquisition + spec.reward(components)
    line["replay"] = {"source": str(source.path), "source_sha256": source.sha256,
                      "source_line": episode.line_no, **settings,
                      "ablation_applied": decided["applied"],
                      "source_doctor": src.get("doctor"), "source_answer": src.get("answer"),
                      "source_verdict": src.get("verdict"),
                      "terminal_events": decided["terminal_events"]}
    return line


@dataclass
class ReplayResult:
    """Outcome of :func:`replay_run`.

    Attributes:
        out: the output log.
        lines: the line that stands for each source episode, in source order.
        n_new: episodes replayed now (retried error lines included).
        n_resumed: episodes kept from an existing output log.
        n_errors: standing error lines among ``lines``.
        n_skipped: source error lines skipped (nothing to replay).
        partial_bytes: bytes of a crash-cut last line removed from the output log.
    """

    out: Path
    lines: list[dict[str, Any]]
    n_new: int
    n_resumed: int
    n_errors: int
    n_skipped: int
    partial_bytes: int

    def __repr__(self) -> str:
        """Counts only, as :meth:`clinenv.runs.logged.RunResult.__repr__`."""
        return (f"ReplayResult(out={str(self.out)!r}, episodes={len(self.lines)}, "
                f"n_new={self.n_new}, n_resumed={self.n_resumed}, n_errors={self.n_errors}, "
                f"n_skipped={self.n_skipped}, partial_bytes={self.partial_bytes})")


def _existing(out: Path, *, resume: bool, doctor: dict[str, Any], settings: dict[str, Any],
              source: ReplaySource, retry_errors: bool) -> tuple[dict, list, int]:
    """``(done, todo, partial_bytes)``: the standing output lines by key and the source
    episodes left to replay (checks an output log before resuming it)."""
    if not resume and out.exists() and out.stat().st_size > 0:
        raise FileExistsError(f"{out} exists and is not empty; pass --resume to continue "
                              "it, or choose another --out file")
    log = read_run_log(out, repair=True) if resume else None
    done: dict[tuple[str, int], dict[str, Any]] = {}
    keys = {e.key for e in source.episodes}
    for line, number in zip(log.lines if log else [], log.line_numbers if log else [],
                            strict=True):
        replay = line.get("replay") if isinstance(line.get("replay"), dict) else {}
        for what, theirs, ours in (
                ("doctor", line.get("doctor"), doctor),
                ("replay.source_sha256", replay.get("source_sha256"), source.sha256),
                *((f"replay.{k}", replay.get(k), v) for k, v in settings.items())):
            if theirs != ours:
                raise ReplayError(f"{what} differs from this replay's; refusing to resume a "
                                  "different replay into the same log (use another --out)",
                                  path=out, line=number)
        key = (line["case_id"], line["repetition"])
        if key not in keys:
            raise ReplayError(f"episode {key} is not in the source log", path=out, line=number)
        if key in done and not is_error_line(done[key]):
            raise ReplayError(f"episode {key} appears twice; {dedupe_hint(out)}", path=out,
                              line=number)
        done[key] = line
    todo = [e for e in source.episodes if e.key not in done
            or retry_errors and is_error_line(done[e.key])]
    return done, todo, log.partial_bytes if log else 0


#: :class:`~clinenv.runs.spec.RunSpec` fields a replay has no use for: it replays every
#: decision of the source log, with the source's seeds, environment and settings.
NOT_REPLAYED = ("seed", "episodes", "repetitions", "env_id", "paper_settings", "cases")


def _replay_spec(spec: RunSpec, *, caller: str) -> RunSpec:
    """The replay's spec (it uses ``out``, ``resume``, ``retry_errors`` and
    ``max_consecutive_errors``), refusing one that sets a field of :data:`NOT_REPLAYED`."""
    spec = check_spec(spec, caller=caller)
    check_unused(spec, NOT_REPLAYED, caller=caller,
                 why="replays every episode of the source log with its own seed and "
                     "environment")
    return spec


def _width(executor: Any, *, caller: str) -> int | None:
    """The decisions ``executor`` runs at once: ``None`` for
    :class:`~clinenv.runs.logged.Serial` (and ``None``, its default: one at a time, no
    event loop), ``n`` for :class:`~clinenv.runs.concurrent.Concurrent`.

    Raises:
        TypeError: any other executor (:class:`clinenv.distributed.Ray` among them).
    """
    if executor is None or isinstance(executor, Serial):
        return None
    if isinstance(executor, Concurrent):
        return executor.n
    raise TypeError(f"{caller}() runs with Serial() or Concurrent(n), not "
                    f"{type(executor).__name__}: replay is not distributed (Ray's runners "
                    "build environments, not replay decisions); use Concurrent(n)")


def replay_run(source: str | Path | ReplaySource, make_doctor: Callable[[], Any],
               spec: RunSpec, executor: Serial | Concurrent | None = None, *,
               ablation: str = "full", judge: Any = None, judge_model: Any = None,
               data_dir: str | Path | None = None, allow_download: bool = False,
               progress: Callable[[dict[str, Any]], None] | None = None,
               on_start: Callable[[int], None] | None = None) -> ReplayResult:
    """Replay the terminal decisions of a run log under an ablation (docs/api/runs.md).

    Args:
        source: the source run log, or a :class:`~clinenv.runs.replay.ReplaySource`.
        make_doctor: factory of a fresh doctor (one per worker, all with one config).
        spec: a :class:`~clinenv.runs.spec.RunSpec`; only ``out``, ``resume``,
            ``retry_errors`` and ``max_consecutive_errors`` apply (:data:`NOT_REPLAYED`
            must keep their defaults).
        executor: :class:`~clinenv.runs.logged.Serial` (default) or
            :class:`~clinenv.runs.concurrent.Concurrent`.
        ablation: one of :data:`~clinenv.runs.replay.ABLATIONS`.
        judge: ``None`` / ``"deterministic"``, ``"llm"`` (with ``judge_model``) or a judge
            object (shared).
        judge_model: the chat model of ``judge="llm"``.
        data_dir: where the source's dataset is found.
        allow_download: whether it may be downloaded.
        progress: called with each new line after it is written.
        on_start: called once with the number of episodes about to be replayed.

    Returns:
        A :class:`ReplayResult`.

    Raises:
        ReplayError: the source cannot be replayed, or ``out`` is another replay's log.
        FileExistsError: ``out`` is not empty and ``resume`` is false.
        RunAborted: fail fast; the log keeps whole lines.
        RuntimeError: ``Concurrent`` inside a running event loop (use :func:`areplay_run`).
        ValueError: an unknown ablation, a bad ``max_consecutive_errors``, doctors with
            different configs, an invalid judge setting, or a spec that sets a
            :data:`NOT_REPLAYED` field.
        TypeError: ``spec`` is not a ``RunSpec``, or the executor is neither ``Serial`` nor
            ``Concurrent``.
    """
    spec = _replay_spec(spec, caller="replay_run")
    width = _width(executor, caller="replay_run")
    options = dict(ablation=ablation, judge=judge, judge_model=judge_model,
                   data_dir=data_dir, allow_download=allow_download,
                   progress=progress, on_start=on_start)
    if width is None:
        return run_without_loop(_replay(source, make_doctor, spec, use_async=False,
                                        workers=1, **options))
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_replay(source, make_doctor, spec, use_async=True,
                                   workers=width, **options))
    raise RuntimeError("replay_run() with Concurrent cannot run inside a running event "
                       "loop; use `await areplay_run(...)` there")


async def areplay_run(source: str | Path | ReplaySource, make_doctor: Callable[[], Any],
                      spec: RunSpec, executor: Serial | Concurrent | None = None, *,
                      ablation: str = "full", judge: Any = None, judge_model: Any = None,
                      data_dir: str | Path | None = None, allow_download: bool = False,
                      progress: Callable[[dict[str, Any]], None] | None = None,
                      on_start: Callable[[int], None] | None = None) -> ReplayResult:
    """:func:`replay_run` inside a running event loop (``await`` it): same arguments,
    result and errors, never refusing a running loop. The doctor's ``aact`` (and the
    judge's ``ajudge``) is awaited under either executor: ``Serial()`` has one decision
    in flight, ``Concurrent(n)`` ``n``."""
    spec = _replay_spec(spec, caller="areplay_run")
    width = _width(executor, caller="areplay_run")
    return await _replay(source, make_doctor, spec, use_async=True, workers=width or 1,
                         ablation=ablation, judge=judge, judge_model=judge_model,
                         data_dir=data_dir, allow_download=allow_download,
                         progress=progress, on_start=on_start)


async def _replay(source: Any, make_doctor: Callable[[], Any], spec: RunSpec,
                  **options: Any) -> ReplayResult:
    with RunLogLock(spec.out):  # one writer of the output log, from reading it to the end
        return await _replay_locked(source, make_doctor, spec, **options)


async def _replay_locked(source: Any, make_doctor: Callable[[], Any], spec: RunSpec, *,
                         use_async: bool, ablation: str = "full", judge: Any = None,
                         judge_model: Any = None, data_dir: Any = None,
                         allow_download: bool = False, workers: int = 1,
                         progress: Any = None, on_start: Any = None) -> ReplayResult:
    if not isinstance(source, ReplaySource):
        source = load_source(source, ablation=ablation, data_dir=data_dir,
                             allow_download=allow_download)
    out = spec.out
    guard = FailFast(out, spec.max_consecutive_errors)
    shared_judge = None if isinstance(judge, str) else make_judge(judge, judge_model)
    doctor0 = make_doctor()
    doctor = replay_doctor(doctor0, ablation, source)
    judge0 = make_judge(judge, judge_model) if isinstance(judge, str) else shared_judge
    settings = {"ablation": ablation,
                "judge": None if judge0 is None else doctor_config(judge0)}
    done, todo, partial = _existing(out, resume=spec.resume, doctor=doctor,
                                    settings=settings, source=source,
                                    retry_errors=spec.retry_errors)
    if on_start is not None:
        on_start(len(todo))
    items: Iterator[SourceEpisode] = iter(todo)
    with guard, RunLogWriter(out) as writer:  # guard: counts a stop from the file

        async def worker(index: int) -> None:
            own = doctor0 if index == 0 else make_doctor()
            if replay_doctor(own, ablation, source) != doctor:
                raise ValueError("make_doctor() must build identically configured doctors")
            own_judge = judge0 if index == 0 or not isinstance(judge, str) else make_judge(
                judge, judge_model)
            for episode in items:
                decided = await decide_and_score(episode, own, ablation=ablation,
                                                 judge=own_judge, use_async=use_async)
                if guard.stopped:
                    return
                line = _line(episode, decided, doctor=doctor, settings=settings,
                             source=source)
                guard.before_write(line)
                writer.write(line)
                done[episode.key] = line
                if progress is not None:
                    progress(line)
                guard.after_write(line)

        if not use_async:
            await worker(0)
        else:
            await guard.run_workers(worker, min(workers, len(todo)))
    lines = [done[e.key] for e in source.episodes]
    return ReplayResult(out, lines, n_new=len(todo), n_resumed=len(lines) - len(todo),
                        n_errors=sum(map(is_error_line, lines)),
                        n_skipped=source.n_error_lines, partial_bytes=partial)
