"""Trajectories for CDEG construction, read from run logs (CDEG "Candidate Evidence
Mining", Eq. 2-3).

Each episode line gives D(τ), an outcome, τ_pre and its observations (docs/cdeg.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from clinenv.runlog import RunLogError, check_privileged, is_error_line, read_run_log
from clinenv.scoring import CodeMap, icd_score
from clinenv.wrappers.reask import final_answer

#: Allowed :attr:`Trajectory.outcome` values (docs/cdeg.md).
Outcome = Literal["success", "failure", "abstained", "unscored"]
_VERDICTS = {"correct": "success", "wrong": "failure"}


@dataclass(frozen=True)
class Trajectory:
    """One episode τ of a construction run.

    Attributes:
        case_id: the case (trajectories are paired within a case, Eq. 4).
        repetition: the repetition index k of the rollout.
        dataset: the case pool's name (cases are grouped by ``(dataset, case_id)``).
        answer: D(τ), the diagnosis of the logged answer (``""`` when none can be read).
        outcome: ``"abstained"`` (flagged, or no diagnosis readable), else ``"success"`` /
            ``"failure"`` for a correct / wrong verdict (or by ICD codes), else
            ``"unscored"``.
        history: τ_pre as text (:func:`trajectory_text`), without the case objective.
        observations: the logged observation dicts, in acquisition order.
        source: ``"<file>:<line>"`` of the run-log line.
        by_icd: the outcome was decided by ICD codes, not the logged verdict.
    """

    case_id: str
    repetition: int
    dataset: str
    answer: str
    outcome: Outcome
    history: str
    observations: tuple[Mapping[str, Any], ...]
    source: str
    by_icd: bool = False

    def error(self, message: str) -> RunLogError:
        """A :class:`~clinenv.runlog.RunLogError` naming this trajectory's file and
        line."""
        path, _, line = self.source.rpartition(":")
        return RunLogError(message, path=path or self.source,
                           line=int(line) if line.isdigit() else None)

    @property
    def case_key(self) -> tuple[str, str]:
        """``(dataset, case_id)``: the case x whose rollouts form T_x."""
        return self.dataset, self.case_id


@dataclass(frozen=True)
class LoadedRuns:
    """What :func:`load_trajectories` read.

    Attributes:
        trajectories: every standing episode that is not an error line, file order.
        n_errors: standing error lines skipped (backend failures never retried).
        n_superseded: error lines replaced by a later retry line.
        partial_lines: files with a partial last line (a crash), not read.
    """

    trajectories: tuple[Trajectory, ...]
    n_errors: int
    n_superseded: int
    partial_lines: tuple[str, ...]


def load_trajectories(paths: Sequence[str | Path], *,
                      icd_map: CodeMap | None = None,
                      allow_privileged: bool = False) -> LoadedRuns:
    """Read ``clinenv.runlog/1`` logs into trajectories (K repetitions from one file or several).

    ``icd_map`` relabels outcomes by ICD code; logs of a privileged doctor are refused
    unless ``allow_privileged`` (:func:`clinenv.runlog.check_privileged`).

    Raises:
        FileNotFoundError: a log does not exist.
        clinenv.runlog.PrivilegedLogError: a privileged line without ``allow_privileged``.
        RunLogError: a line that is not a run-log line, an episode twice in one file (not a
            retry), or a missing or malformed field; file, line and field named.
    """
    out: list[Trajectory] = []
    n_errors = n_superseded = 0
    partial: list[str] = []
    for path in map(Path, paths):
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such run log")
        log = read_run_log(path)
        check_privileged(log, allow=allow_privileged, why="trajectories driven by the "
                         "target poison a CDEG graph or an experience memory built from them")
        if log.partial_bytes:
            partial.append(str(path))
        numbers = {id(line): n for line, n in zip(log.lines, log.line_numbers, strict=True)}
        episodes = log.episodes()
        n_superseded += len(log.lines) - len(episodes)
        for line in episodes.values():
            number = numbers[id(line)]
            if is_error_line(line):
                n_errors += 1
                continue
            out.append(trajectory_from_line(line, path=path, line_no=number,
                                            icd_map=icd_map))
    return LoadedRuns(tuple(out), n_errors, n_superseded, tuple(partial))


def trajectory_from_line(line: Mapping[str, Any], *, path: str | Path,
                         line_no: int, icd_map: CodeMap | None = None) -> Trajectory:
    """One run-log line (not an error line) as a :class:`Trajectory`; ``icd_map``
    relabels the outcome by ICD code (docs/cdeg.md).

    Raises:
        RunLogError: a missing or malformed field (named in the message with the file
            and line).
    """
    def bad(field: str, why: str) -> RunLogError:
        return RunLogError(f"field {field!r} {why}", path=path, line=line_no)

    verdict = line.get("verdict")
    if verdict not in ("correct", "wrong", "unscored"):
        raise bad("verdict", f"is {verdict!r}, expected 'correct', 'wrong' or 'unscored'")
    answer = line.get("answer")
    if answer is not None and not isinstance(answer, str):
        raise bad("answer", f"is {type(answer).__name__}, expected a string or null")
    evidence = line.get("evidence")
    observations = evidence.get("observations") if isinstance(evidence, Mapping) else None
    if not isinstance(observations, list) or not all(
            isinstance(o, Mapping) for o in observations):
        raise bad("evidence.observations", "is missing or not a list of objects")
    for i, obs in enumerate(observations):
        if obs.get("source") not in ("Patient", "Measurement"):
            raise bad(f"evidence.observations.{i}.source",
                      f"is {obs.get('source')!r}, expected 'Patient' or 'Measurement'")
    case_id = line.get("case_id")
    if not isinstance(case_id, str | int) or isinstance(case_id, bool) or str(case_id) == "":
        raise bad("case_id", f"is {case_id!r}, expected a non-empty string")
    repetition = line.get("repetition")
    if isinstance(repetition, bool) or not isinstance(repetition, int) or repetition < 0:
        raise bad("repetition", f"is {repetition!r}, expected an integer >= 0")
    diagnosis = (final_answer(answer or "", "decide") or "").strip()
    if line.get("abstained") or not diagnosis:
        outcome: Outcome = "abstained"
    else:
        outcome = _VERDICTS.get(verdict, "unscored")  # type: ignore[assignment]
    target = line.get("target")
    by_code = (icd_score(diagnosis, target, icd_map) if icd_map is not None
               and outcome != "abstained" and isinstance(target, str) and target.strip()
               else None)
    if by_code is not None:
        outcome = "success" if by_code.correct else "failure"
    return Trajectory(
        case_id=str(case_id), repetition=repetition,
        dataset=str(line.get("dataset") or ""), answer=diagnosis,
        outcome=outcome, history=trajectory_text(observations),
        observations=tuple(dict(o) for o in observations), source=f"{path}:{line_no}",
        by_icd=by_code is not None)


#: Characters of one observation's content kept in a τ_pre text.
CONTENT_CHARS = 400


def observation_line(obs: Mapping[str, Any]) -> str:
    """One observation as a line of :func:`trajectory_text`: ``Patient, asked
    "<question>": <reply>`` or ``Measurement <exam>: <result>`` (the availability, e.g.
    ``not_recorded``, when there is no content; content clipped to
    :data:`CONTENT_CHARS`)."""
    content = " ".join(str(obs.get("content") or obs.get("availability") or "").split())
    content = content[:CONTENT_CHARS]
    if obs.get("source") == "Patient":
        return f"Patient, asked \"{obs.get('context', '')}\": {content}"
    return f"Measurement {obs.get('context', '')}: {content}"


def trajectory_text(observations: Iterable[Mapping[str, Any]]) -> str:
    """τ_pre as text (CDEG Eq. 2, 4): one :func:`observation_line` per observation, in
    acquisition order. The same text for a run-log line's ``evidence.observations``
    (construction pairing, the retrieval baselines' memories) and for the observations
    an episode has acquired so far (``info["new_observations"]``, the baselines'
    queries). The final diagnostic action, diagnosis proposals and interface feedback
    are not observations and are left out, and so is the objective (see
    :attr:`Trajectory.history`)."""
    return "\n".join(observation_line(o) for o in observations)


def outcome_counts(trajectories: Iterable[Trajectory]) -> dict[str, int]:
    """``{"success", "failure", "abstained", "unscored"}`` -> number of trajectories."""
    counts = Counter(t.outcome for t in trajectories)
    return {k: counts.get(k, 0) for k in ("success", "failure", "abstained", "unscored")}


def acquisition_action(observation: Mapping[str, Any]) -> tuple[str, str] | None:
    """The acquisition action of an observation as ``(kind, name)``: ``("exam", exam
    name)`` for a Measurement (its context: the catalog name, stable across cases) or
    ``("question", question)`` for a Patient reply; ``None`` without a context."""
    context = str(observation.get("context") or "").strip()
    if not context:
        return None
    return ("exam" if observation.get("source") == "Measurement" else "question"), context
