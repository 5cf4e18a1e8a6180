"""Trajectories for CDEG construction, read from run logs (CDEG "Candidate Evidence
Mining", Eq. 2-3).

Each run-log line that stands for an episode (:meth:`clinenv.runlog.RunLog.episodes`:
error lines superseded by a retry are dropped) becomes a :class:`Trajectory` τ with its
final diagnosis D(τ) (the logged ``answer``), its outcome against Y, the
action–observation history τ_pre before the final diagnostic action (the text embedded
for pairing, Eq. 4) and its observations with their acquisition actions.

Outcomes (Eq. 3 partitions T_x into T+ and T-; the rest is neither):

- ``"success"`` — verdict ``"correct"`` (τ ∈ T+);
- ``"failure"`` — verdict ``"wrong"`` (τ ∈ T-);
- ``"abstained"`` — verdict ``"unscored"`` because no diagnosis was named (the line's
  ``abstained`` flag, or no answer): not a diagnosis, so neither a success nor a failure;
- ``"unscored"`` — verdict ``"unscored"`` for another reason (an unparsed LLM-judge
  verdict): correctness unknown.

Only successes and failures are paired; abstentions and unscored trajectories are
counted in the build report (:func:`outcome_counts`). Error lines still standing (a
backend failure without a retry) are skipped and counted as ``"error"``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from clinenv.runlog import RunLogError, is_error_line, read_run_log

#: Allowed :attr:`Trajectory.outcome` values (module docstring).
Outcome = Literal["success", "failure", "abstained", "unscored"]
_VERDICTS = {"correct": "success", "wrong": "failure"}


@dataclass(frozen=True)
class Trajectory:
    """One episode τ of a construction run.

    Attributes:
        case_id: the case (trajectories are paired within a case, Eq. 4).
        repetition: the repetition index k of the rollout.
        dataset: the case pool's name (cases are grouped by ``(dataset, case_id)``).
        answer: D(τ), the final diagnosis as logged (``""`` when none was given).
        outcome: see the module docstring.
        history: τ_pre as text: the objective, then one line per action and observation
            (``Doctor: ...``, ``Patient: ...``, ``Exam <name>: <result>``), without the
            final diagnostic action, interface events and diagnosis proposals.
        observations: the logged observation dicts (``evidence.observations``), in
            acquisition order; ``context`` is the question asked (Patient) or the exam
            name (Measurement).
        source: ``"<file>:<line>"`` of the run-log line.
    """

    case_id: str
    repetition: int
    dataset: str
    answer: str
    outcome: Outcome
    history: str
    observations: tuple[Mapping[str, Any], ...]
    source: str

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


def load_trajectories(paths: Sequence[str | Path]) -> LoadedRuns:
    """Read run logs (``clinenv run`` output, schema ``clinenv.runlog/1``) into
    trajectories; K repetitions of a case may come from one file or several.

    Raises:
        FileNotFoundError: a log does not exist.
        RunLogError: a line is not JSON / not a run-log line, an episode appears twice
            in one file (not a retry of an error line), or a field is missing or
            malformed (``answer``, ``verdict``, ``events``, ``evidence.observations``);
            the message names the file, the line and the field.
    """
    out: list[Trajectory] = []
    n_errors = n_superseded = 0
    partial: list[str] = []
    for path in map(Path, paths):
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such run log")
        log = read_run_log(path)
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
            out.append(trajectory_from_line(line, path=path, line_no=number))
    return LoadedRuns(tuple(out), n_errors, n_superseded, tuple(partial))


def trajectory_from_line(line: Mapping[str, Any], *, path: str | Path,
                         line_no: int) -> Trajectory:
    """One run-log line (not an error line) as a :class:`Trajectory`.

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
    events = line.get("events")
    if not isinstance(events, list) or not all(isinstance(e, Mapping) for e in events):
        raise bad("events", "is missing or not a list of objects")
    evidence = line.get("evidence")
    observations = evidence.get("observations") if isinstance(evidence, Mapping) else None
    if not isinstance(observations, list) or not all(
            isinstance(o, Mapping) for o in observations):
        raise bad("evidence.observations", "is missing or not a list of objects")
    for i, obs in enumerate(observations):
        if obs.get("source") not in ("Patient", "Measurement"):
            raise bad(f"evidence.observations.{i}.source",
                      f"is {obs.get('source')!r}, expected 'Patient' or 'Measurement'")
    if verdict in _VERDICTS:
        outcome = _VERDICTS[verdict]
    else:
        outcome = "abstained" if (line.get("abstained") or not (answer or "").strip()) \
            else "unscored"
    objective = evidence.get("objective") or ""
    return Trajectory(
        case_id=str(line["case_id"]), repetition=int(line["repetition"]),
        dataset=str(line.get("dataset") or ""), answer=(answer or "").strip(),
        outcome=outcome, history=history_text(objective, events),
        observations=tuple(dict(o) for o in observations), source=f"{path}:{line_no}")


def history_text(objective: str, events: Iterable[Mapping[str, Any]]) -> str:
    """τ_pre as text (see :attr:`Trajectory.history`).

    Doctor events routed as ``question`` or ``test_request`` are actions; ``diagnosis``
    and ``clarification`` events (a proposal replaced by a fixed question) carry the
    doctor's diagnosis, not an acquisition, and are left out so that pairing compares
    what was acquired; interface events are left out too.
    """
    lines = [f"Objective: {objective}"] if objective else []
    for event in events:
        source = event.get("source")
        if source == "doctor" and event.get("routed_as") in ("question", "test_request"):
            lines.append(f"Doctor: {event.get('text', '')}")
        elif source == "patient":
            lines.append(f"Patient: {event.get('reply', '')}")
        elif source == "measurement":
            value = event.get("recorded_value")
            if value is None:
                value = f"({event.get('result_availability', 'not recorded')})"
            lines.append(f"Exam {event.get('name') or event.get('request', '')}: {value}")
    return "\n".join(lines)


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
