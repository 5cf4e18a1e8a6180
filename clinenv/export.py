"""Episodes of run logs as training data: one row per episode.

:func:`episode_rows`, :func:`episodes_dataset` (a ``datasets.Dataset``) and
:func:`write_rows` (``.jsonl``, ``.parquet``); columns and rules in docs/export.md.
"""

from __future__ import annotations

import copy
import hashlib
import json
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from clinenv.agents.llm_doctor import evidence_part
from clinenv.agents.prompts import (
    AGENTCLINIC_BUDGET_KNOWN,
    AGENTCLINIC_BUDGET_UNKNOWN,
    AGENTCLINIC_DOCTOR_SYSTEM,
    DIRECT_SYSTEM,
    EGIP_DOCTOR_SYSTEM,
)
from clinenv.datasets.registry import DATASETS, normalize_name
from clinenv.errors import ClinenvError, install_hint
from clinenv.protocol.biases import bias_text
from clinenv.runlog import RunLogError, is_error_line, is_privileged_line, read_run_log

__all__ = ["CREDENTIALED_DATASETS", "DUA_WARNING", "EXTRA_HINT", "FORMATS",
           "REWARD_COMPONENTS_SCHEMA", "TOOL_ARGUMENTS", "TOOL_RESULTS", "ExportError",
           "episode_rows", "episodes_dataset", "group_id", "per_turn_rows", "write_rows"]

#: Export formats: the doctor's text chat, or the tool view's calls and results.
FORMATS = ("messages", "tools")
#: ``tool_results`` settings of an export (:class:`clinenv.protocol.config.ProtocolConfig`).
TOOL_RESULTS = ("full", "compact")
#: How the tools format writes a call's arguments: a dict (Hugging Face chat templates)
#: or a JSON string (OpenAI's wire and fine-tuning format).
TOOL_ARGUMENTS = ("dict", "json")
#: Registry names of credentialed datasets (never exported without an explicit opt-in).
CREDENTIALED_DATASETS = ("mimiciv",)
#: The warning of an export that includes credentialed episodes.
DUA_WARNING = (
    "this export holds MIMIC-IV episodes: they are covered by the PhysioNet credentialed "
    "data-use agreement; share the file only with credentialed users bound by it, never "
    "publish it (e.g. on the Hugging Face Hub) and never send it to a third-party service")
#: How to get the optional dependency of parquet files and ``datasets.Dataset``.
EXTRA_HINT = f"{install_hint('export')} (the datasets package)"
#: The fixed fields and Arrow types of the ``reward_components`` column (a struct in
#: ``.parquet`` and ``datasets.Dataset``), in :data:`clinenv.reward_components.COMPONENTS`
#: order.
REWARD_COMPONENTS_SCHEMA: dict[str, str] = {
    "diagnosis": "float64", "workup_recall": "float64", "workup_precision": "float64",
    "workup_f1": "float64", "exam_spend": "float64", "turns": "int64",
    "invalid_actions": "int64", "format": "int64"}
_DOCTOR_SEAT = "doctor"
_CUT_FLAGS = ("wrote_past_turn", "empty_reply")


class ExportError(RunLogError):
    """A run log that cannot be exported; the message names the file, the 1-based line
    and the field."""


# ------------------------------------------------------------------------ public API
def episode_rows(paths: Iterable[str | Path], *, fmt: str = "messages",
                 allow_credentialed: bool = False, rebuild: bool = False,
                 data_dir: str | Path | None = None, per_turn: bool = False,
                 delta: bool = False, tool_results: str | None = None,
                 tool_arguments: str = "dict",
                 chat_template: str | None = None) -> Iterator[dict[str, Any]]:
    """One row per finished episode of the run logs ``paths``, or one per assistant turn with
    ``per_turn``; the columns are in docs/export.md.

    Args:
        paths: run-log files, read in the given order.
        fmt: ``"messages"`` or ``"tools"``.
        allow_credentialed: export MIMIC-IV episodes too (warns, :data:`DUA_WARNING`).
        rebuild: rebuild the messages by replay even where the log holds them.
        data_dir: where the datasets are found for a replay.
        per_turn: one row per assistant turn (:func:`per_turn_rows`).
        delta: ``"messages"`` only: each user turn is what is new since the last action.
        tool_results: ``"full"`` or ``"compact"`` for delta turns; ``None``: the run's own.
        tool_arguments: ``"dict"`` (default, as chat templates expect) or ``"json"``.
        chat_template: a Jinja chat template; each problem
            :func:`clinenv.template_check.check_template` finds is a ``UserWarning``.

    Yields:
        Row dicts, JSON-ready.

    Raises:
        ExportError: a log that cannot be exported (file, line and field named), a
            credentialed dataset without ``allow_credentialed``, the same file twice, or an
            episode that two logs of one run both hold.
        RunLogError: a corrupt log.
        ValueError: an unknown ``fmt``, ``tool_results`` or ``tool_arguments``; ``delta``
            with ``fmt="tools"``; ``tool_results`` without delta turns.
    """
    _check_options(fmt, delta, tool_results, tool_arguments)
    from clinenv.evaluation.components import CaseLookup

    if chat_template is not None:
        from clinenv.template_check import check_template

        for problem in check_template(chat_template, fmt=fmt,
                                      tool_arguments=tool_arguments):
            warnings.warn(f"the chat template does not fit {fmt}-format rows: {problem}",
                          stacklevel=2)

    lookup = CaseLookup(None if data_dir is None else str(data_dir))
    for line, path, number in exported_lines(paths, allow_credentialed=allow_credentialed):
        row = _row(line, path, number, fmt=fmt, rebuild=rebuild, data_dir=data_dir,
                   delta=delta, tool_results=tool_results,
                   tool_arguments=tool_arguments)
        row["reward_components"] = _reward_components(line, lookup, path, number)
        row["privileged"] = is_privileged_line(line)
        if per_turn:
            yield from per_turn_rows(row, fmt=fmt)
        else:
            yield row


def exported_lines(paths: Iterable[str | Path], *, allow_credentialed: bool = False
                   ) -> Iterator[tuple[dict[str, Any], Path, int]]:
    """``(line, path, 1-based line number)`` of each finished episode of the run logs
    ``paths`` that export writes (error lines skipped; the checks of
    :func:`episode_rows`: required fields, credentialed data, each file and episode
    once).

    Raises:
        ExportError, RunLogError: as :func:`episode_rows`.
    """
    seen_files: dict[Path, str] = {}
    seen_keys: dict[tuple[str, str, int], tuple[str, int]] = {}
    warned = False
    for raw_path in paths:
        path = Path(raw_path)
        if not path.is_file():
            raise ExportError("no such run-log file", path=path)
        resolved = path.resolve()
        if resolved in seen_files:
            raise ExportError(f"given twice (also as {seen_files[resolved]})", path=path)
        seen_files[resolved] = str(path)
        log = read_run_log(path)
        if log.partial_bytes:
            warnings.warn(f"{path}: ignored a partial last line ({log.partial_bytes} bytes)",
                          stacklevel=2)
        standing = log.episodes()
        numbers = {}
        for line, number in zip(log.lines, log.line_numbers, strict=True):
            numbers[(line["case_id"], line["repetition"])] = number
        for key, line in standing.items():
            number = numbers[key]
            if is_error_line(line):
                continue
            _check_line(line, path, number)
            if _credentialed(line):
                if not allow_credentialed:
                    raise ExportError(
                        f"field 'dataset' is {line.get('dataset')!r}, credentialed data "
                        "(MIMIC-IV data-use agreement): its episodes are exported only with "
                        "--allow-credentialed (allow_credentialed=True)", path=path,
                        line=number)
                if not warned:
                    warnings.warn(DUA_WARNING, stacklevel=2)
                    warned = True
            gid = group_id(line)
            where = seen_keys.get((gid, *key))
            if where is not None:
                raise ExportError(f"episode {key} of this run is also in {where[0]}, line "
                                  f"{where[1]}; export each episode once", path=path,
                                  line=number)
            seen_keys[(gid, *key)] = (str(path), number)
            yield line, path, number


def _check_options(fmt: str, delta: bool, tool_results: str | None,
                   tool_arguments: str) -> None:
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {FORMATS}, got {fmt!r}")
    if tool_results not in (None, *TOOL_RESULTS):
        raise ValueError(f"tool_results must be one of {TOOL_RESULTS}, got {tool_results!r}")
    if tool_arguments not in TOOL_ARGUMENTS:
        raise ValueError(f"tool_arguments must be one of {TOOL_ARGUMENTS}, got "
                         f"{tool_arguments!r}")
    if delta and fmt == "tools":
        raise ValueError("delta applies to fmt='messages' (the tools format's results are "
                         "delta observations already)")
    if tool_results is not None and not (fmt == "tools" or delta):
        raise ValueError("tool_results applies to delta turns: fmt='tools', or "
                         "fmt='messages' with delta=True")


def per_turn_rows(row: Mapping[str, Any], *, fmt: str = "messages") -> list[dict[str, Any]]:
    """The per-turn rows of one episode row of :func:`episode_rows` (docs/export.md):
    one per assistant message, with ``prompt`` (the messages before it), ``completion``
    (``[that message]``), ``tools`` (JSON: the tool schemas for ``fmt="tools"``, else
    ``"[]"``), ``turn_index`` and the episode's other columns.

    Raises:
        ValueError: an unknown ``fmt``.
    """
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {FORMATS}, got {fmt!r}")
    from clinenv.integrations.tools import TOOL_SCHEMAS  # not imported by the core

    messages = row["messages"]
    tools = json.dumps(TOOL_SCHEMAS if fmt == "tools" else [], ensure_ascii=False)
    episode = {k: v for k, v in row.items() if k != "messages"}
    rows = []
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        rows.append({"prompt": copy.deepcopy(list(messages[:index])),
                     "completion": [copy.deepcopy(message)], "tools": tools,
                     "turn_index": len(rows), **copy.deepcopy(episode)})
    return rows


def group_id(line: Mapping[str, Any]) -> str:
    """The group of an episode: ``"<case_id>:<16 hex digits>"``, the digits a sha256 of
    the run's identity (``env_id``, ``env_spec``, ``dataset``, ``dataset_sha256``,
    ``doctor``, ``run_seed``, ``scoring_version``, ``clinenv_version``) and the case
    (``case_id``, ``case_index``).

    The repetitions of one case in one run share it; another case, another seed,
    doctor, environment or dataset file gives another. A resumed run keeps it (the
    schedule fields, which resuming may grow, are left out)."""
    identity = {name: line.get(name) for name in (
        "env_id", "env_spec", "dataset", "dataset_sha256", "doctor", "run_seed",
        "scoring_version", "clinenv_version", "case_id", "case_index")}
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True, ensure_ascii=False)
                            .encode("utf-8")).hexdigest()
    return f"{line.get('case_id')}:{digest[:16]}"


def episodes_dataset(paths: Iterable[str | Path], *, fmt: str = "messages",
                     allow_credentialed: bool = False,
                     data_dir: str | Path | None = None, per_turn: bool = False,
                     **options: Any) -> Any:
    """The rows of :func:`episode_rows` as a ``datasets.Dataset`` (``Dataset.from_list``:
    no generator cache, so a changed log never gives stale rows); ``options``: the
    other keywords of :func:`episode_rows` (``delta``, ``tool_results``,
    ``tool_arguments``).

    Raises:
        ImportError: ``datasets`` is not installed (the message names the extra).
        ExportError, RunLogError, ValueError: as :func:`episode_rows`.
    """
    datasets = _import_datasets("episodes_dataset()")
    rows = list(episode_rows(paths, fmt=fmt, allow_credentialed=allow_credentialed,
                             data_dir=data_dir, per_turn=per_turn, **options))
    return _dataset(datasets, rows)


#: Columns of chat messages: stored as JSON objects where ``datasets`` has the ``Json``
#: feature, so each message keeps exactly its own keys (an Arrow struct would give every
#: message every key, ``None`` where absent, and merge the tools' arguments).
_MESSAGE_COLUMNS = ("messages", "prompt", "completion")


def _dataset(datasets: Any, rows: list[Mapping[str, Any]]) -> Any:
    """``Dataset.from_list(rows)`` with the ``reward_components`` column cast to its
    fixed struct (:data:`REWARD_COMPONENTS_SCHEMA`) and the message columns stored as
    JSON objects (:data:`_MESSAGE_COLUMNS`; ``datasets`` with ``datasets.Json``)."""
    json_feature = getattr(datasets, "Json", None)
    features = None
    if json_feature is not None and rows and any(n in rows[0] for n in _MESSAGE_COLUMNS):
        inferred = datasets.Dataset.from_list(
            [{k: v for k, v in r.items() if k not in _MESSAGE_COLUMNS} for r in rows]).features
        features = datasets.Features({
            name: datasets.List(json_feature()) if name in _MESSAGE_COLUMNS
            else inferred[name] for name in rows[0]})
    dataset = datasets.Dataset.from_list(rows, features=features)
    if "reward_components" in dataset.column_names:
        dataset = dataset.cast_column("reward_components", {
            name: datasets.Value(kind) for name, kind in REWARD_COMPONENTS_SCHEMA.items()})
    return dataset


def write_rows(rows: Iterable[Mapping[str, Any]], out: str | Path) -> int:
    """Write rows to ``out``: ``.jsonl`` (one JSON object a line, UTF-8, no NaN; needs
    nothing) or ``.parquet`` (through ``datasets``). The file is written whole or not at
    all (a temporary file renamed at the end).

    Returns:
        The number of rows written.

    Raises:
        ValueError: another suffix.
        ImportError: ``.parquet`` without ``datasets`` (the message names the extra).
    """
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in (".jsonl", ".parquet"):
        raise ValueError(f"{out}: the output must end in .jsonl or .parquet")
    datasets = _import_datasets("a .parquet export") if suffix == ".parquet" else None
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    n = 0
    try:
        if datasets is None:
            with tmp.open("w", encoding="utf-8") as fh:
                for row in rows:
                    fh.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")
                    n += 1
        else:
            listed = list(rows)
            n = len(listed)
            _dataset(datasets, listed).to_parquet(str(tmp))
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    return n


def _import_datasets(what: str) -> Any:
    try:
        import datasets
    except ImportError:
        raise ImportError(f"{what} needs the datasets package: {EXTRA_HINT}") from None
    return datasets


# ------------------------------------------------------------------------ one row
_REQUIRED = (("env_id", str), ("seed", int), ("events", list), ("evidence", dict),
             ("doctor", dict), ("reward", (int, float)), ("terminated", bool),
             ("truncated", bool), ("steps", int))


def _check_line(line: Mapping[str, Any], path: Path, number: int) -> None:
    for name, kind in _REQUIRED:
        value = line.get(name)
        if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
            raise ExportError(f"field {name!r} is missing or malformed ({value!r:.60})",
                              path=path, line=number)
    if "replay" in line:
        raise ExportError("field 'replay': a clinenv replay log (its acquisition and its "
                          "decision come from different doctors); export the source run "
                          "log instead", path=path, line=number)


def _reward_components(line: Mapping[str, Any], lookup: Any, path: Path,
                       number: int) -> dict[str, float | int | None]:
    """The row's ``reward_components`` (docs/export.md), typed as
    :data:`REWARD_COMPONENTS_SCHEMA`.

    Raises:
        ExportError: the line has none and its case cannot be found (file, line and
            case id named), or they are malformed.
    """
    from clinenv.evaluation.components import ComponentsError, line_components

    try:
        components, _ = line_components(line, lookup, path=str(path), number=number)
    except ComponentsError as err:
        reason = str(err).removeprefix(f"{path}, line {number}: ")
        raise ExportError(reason, path=path, line=number) from None
    out: dict[str, float | int | None] = {}
    for name, kind in REWARD_COMPONENTS_SCHEMA.items():
        value = components[name]
        out[name] = None if value is None else int(value) if kind == "int64" else float(value)
    return out


def _credentialed(line: Mapping[str, Any]) -> bool:
    names = [line.get("dataset")]
    kwargs = (line.get("env_spec") or {}).get("kwargs") or {}
    names.append(kwargs.get("dataset"))
    for name in names:
        if not isinstance(name, str):
            continue
        if normalize_name(name) in CREDENTIALED_DATASETS:
            return True
        if Path(name).name in {DATASETS[n].file_name for n in CREDENTIALED_DATASETS}:
            return True
    return "mimic" in str(line.get("env_id", "")).lower()


def _row(line: Mapping[str, Any], path: Path, number: int, *, fmt: str, rebuild: bool,
         data_dir: Any, delta: bool = False, tool_results: str | None = None,
         tool_arguments: str = "dict") -> dict[str, Any]:
    doctor = line["doctor"]
    config = doctor.get("config") if isinstance(doctor.get("config"), Mapping) else {}
    events = line["events"]
    actions = [e for e in events if e.get("source") == "doctor"]
    if len(actions) != line["steps"]:
        raise ExportError(f"field 'events' holds {len(actions)} doctor actions but 'steps' "
                          f"is {line['steps']}", path=path, line=number)
    calls = [c for c in (line.get("llm") or {}).get("calls") or []
             if c.get("agent") == _DOCTOR_SEAT]
    logged = bool(calls) and all("messages" in c and "raw_reply" in c for c in calls)
    replayed = None
    if fmt == "tools" or delta or rebuild or not logged:
        if "doctor_log" in line and not logged:
            raise ExportError("field 'doctor_log': a wrapped doctor (e.g. CDEG) saw more "
                              "than the environment's observations; export a run written "
                              "with --log-messages", path=path, line=number)
        replayed = _replay(line, path, number, data_dir=data_dir,
                           observation_format="delta" if fmt == "tools" or delta else None,
                           # the tool view's wording, as GRPO's tool view shows it
                           action_format="tools" if fmt == "tools" and not _native(line)
                           else None, tool_results=tool_results)
    if fmt == "tools":
        messages = _tool_messages(replayed, events, arguments=tool_arguments)
        source = "rebuilt"
    elif logged and not (rebuild or delta):
        messages = _logged_messages(calls, actions, line, path, number)
        source = "logged"
    else:
        messages = _rebuilt_messages(replayed, line, delta=delta)
        source = "rebuilt"
    exams = [e.get("exam_id") or e.get("request") for e in events
             if e.get("source") == "measurement"]
    return {
        "messages": messages,
        "reward": float(line["reward"]),
        "terminated": bool(line["terminated"]),
        "truncated": bool(line["truncated"]),
        "num_turns": len(actions),
        "answer": line.get("answer"),
        "verdict": line.get("verdict"),
        "correct": bool(line.get("correct", False)),
        "exams_ordered": [str(x) for x in exams],
        "case_id": line["case_id"],
        "seed": line["seed"],
        "repetition": line["repetition"],
        "group_id": group_id(line),
        "env_id": line["env_id"],
        "clinenv_version": line.get("clinenv_version"),
        "dataset": line.get("dataset"),
        "dataset_sha256": line.get("dataset_sha256"),
        "doctor": doctor.get("name"),
        "model": config.get("model") if isinstance(config.get("model"), str) else None,
        "target": line.get("target"),
        "tool_calls": [c for c in _tool_calls(events) if c is not None],
        "messages_source": source,
        "tool_results": _effective_tool_results(line, tool_results) if (
            fmt == "tools" or delta) else None,
    }


def _effective_tool_results(line: Mapping[str, Any], chosen: str | None) -> str:
    """The ``tool_results`` setting the delta turns were rendered with: the export's
    choice, else the run's (its ``env_spec`` kwargs), else the default ``"full"``."""
    if chosen is not None:
        return chosen
    kwargs = (line.get("env_spec") or {}).get("kwargs") or {}
    return str(kwargs.get("tool_results") or "full")


# ---------------------------------------------------------------- logged messages
def _logged_messages(calls: Sequence[Mapping[str, Any]], actions: Sequence[Mapping],
                     line: Mapping[str, Any], path: Path, number: int) -> list[dict]:
    """The chat of the doctor's logged calls (docs/export.md)."""
    acquire = [c for c in calls if c.get("purpose") == "acquire"]
    decide = [c for c in calls if c.get("purpose") != "acquire"]
    n_steps = len(acquire) + (1 if decide else 0)
    if n_steps != len(actions):
        raise ExportError(f"field 'llm.calls': {len(acquire)} doctor acquisition call(s) "
                          f"and {len(decide)} decision call(s) do not make the "
                          f"{len(actions)} doctor actions of 'events'", path=path,
                          line=number)
    messages: list[dict[str, str]] = []
    system: str | None = None

    def take(call: Mapping[str, Any], said: str, where: str) -> None:
        nonlocal system
        sent = call["messages"]
        if not (isinstance(sent, list) and sent and isinstance(sent[-1], Mapping)
                and sent[-1].get("role") == "user"):
            raise ExportError(f"field '{where}.messages' must end with a user message",
                              path=path, line=number)
        head = sent[0].get("content") if sent[0].get("role") == "system" else None
        user = sent[-1]["content"]
        if head is not None and head != system:
            if messages:  # one system message at most, first (Gemma 3 raises on more)
                user = _with_instructions(head, user)
            else:
                messages.append({"role": "system", "content": head})
            system = head
        messages.append({"role": "user", "content": user})
        messages.append({"role": "assistant", "content": said})

    for i, call in enumerate(acquire):
        take(call, _said(call, actions[i]), f"llm.calls[{calls.index(call)}]")
    if decide:
        first = decide[0]
        said = _said(first, actions[-1]) if len(decide) == 1 else actions[-1]["text"]
        take(first, said, f"llm.calls[{calls.index(first)}]")
    return messages


def _said(call: Mapping[str, Any], action: Mapping[str, Any]) -> str:
    """The assistant text of one call: its raw reply, unless the client cut it (then
    the environment's record of the action)."""
    raw = call.get("raw_reply") or [""]
    flags = call.get("flags") or []
    if call.get("stop_enforced") or any(f in flags for f in _CUT_FLAGS):
        return str(action.get("text", ""))
    return str(raw[0])


# ---------------------------------------------------------------- rebuilt messages
class _LoggedPatient:
    """A patient that gives the logged replies in order (replay of an LLM patient)."""

    def __init__(self, replies: Sequence[str]) -> None:
        self._replies = list(replies)

    def reply(self, view: Any) -> str:
        return self._replies.pop(0) if self._replies else ""


class _LoggedExaminer:
    """An examiner that gives the logged measurement texts in order."""

    def __init__(self, texts: Sequence[str]) -> None:
        self._texts = list(texts)

    def measure(self, view: Any) -> str:
        return self._texts.pop(0) if self._texts else ""


_DETERMINISTIC_PATIENTS = (None, "retrieval")
_DETERMINISTIC_EXAMINERS = (None, "lookup", "reader")


@dataclass(frozen=True)
class _Replay:
    """A replayed episode: ``steps`` = ``[(observation text, phase, doctor event),
    ...]`` (each observation the doctor acted on, its phase, the logged action that
    answered it), ``final``, the observation text after the last action, and ``ended``,
    whether that action ended the episode."""

    steps: list[tuple[str, str, Mapping[str, Any]]]
    final: str
    ended: bool


def _replay(line: Mapping[str, Any], path: Path, number: int, *, data_dir: Any,
            observation_format: str | None, action_format: str | None = None,
            tool_results: str | None = None) -> _Replay:
    """Replay the logged doctor actions through a fresh environment (docs/export.md)."""
    spec = line.get("env_spec") or {}
    kwargs = dict(spec.get("kwargs") or {})
    events = line["events"]
    if kwargs.get("patient") not in _DETERMINISTIC_PATIENTS:
        kwargs["patient"] = _LoggedPatient(
            [e["reply"] for e in events if e.get("source") == "patient"])
        kwargs.pop("patient_model", None)
    if kwargs.get("examiner") not in _DETERMINISTIC_EXAMINERS:
        kwargs["examiner"] = _LoggedExaminer(
            [e.get("recorded_value") or "" for e in events if e.get("source") == "measurement"])
        kwargs.pop("examiner_model", None)
    kwargs["judge"] = None  # the verdict is logged; the doctor never sees it
    kwargs.pop("judge_model", None)
    if data_dir is not None:
        kwargs["data_dir"] = str(data_dir)
    if observation_format is not None:
        kwargs["observation_format"] = observation_format
    if action_format is not None:
        kwargs["action_format"] = action_format
    if tool_results is not None:
        kwargs["tool_results"] = tool_results
    try:
        env = gym.make(line["env_id"], disable_env_checker=True, **kwargs)
    except (ClinenvError, gym.error.Error, ValueError, TypeError) as err:
        raise ExportError(f"field 'env_spec': cannot make {line['env_id']!r} to rebuild the "
                          f"messages ({err})", path=path, line=number) from None
    try:
        try:
            observation, info = env.reset(seed=line["seed"],
                                          options={"case_id": line["case_id"]})
        except (KeyError, IndexError) as err:
            raise ExportError(f"field 'case_id': {line['case_id']!r} is not in the "
                              f"dataset ({err})", path=path, line=number) from None
        steps, ended = [], False
        for action in (e for e in events if e.get("source") == "doctor"):
            steps.append((observation["text"], info.get("phase"), action))
            observation, _, terminated, truncated, info = env.step(action["text"])
            ended = bool(terminated or truncated)
        record = env.unwrapped.episode_record()
    finally:
        env.close()
    _compare(record, line, path, number)
    return _Replay(steps, observation["text"], ended)


#: A doctor event with one of these flags was a template placeholder: older logs routed it
#: as the diagnosis or request it imitated, with the template's inner words as its
#: payload (now ``"placeholder"`` and the reply), so neither is compared (its text is).
_PLACEHOLDER_FLAGS = frozenset({"placeholder_request", "placeholder_answer"})


def _compare(record: Mapping[str, Any], line: Mapping[str, Any], path: Path,
             number: int) -> None:
    """Refuse a replay that did not follow the logged episode."""
    def plain(events: Sequence[Mapping]) -> list[dict]:
        return [{k: v for k, v in e.items() if not (e.get("source") == "doctor" and (
            k == "flags" or (k in ("routed_as", "payload") and _PLACEHOLDER_FLAGS & set(
                e.get("flags") or ()))))} for e in events]

    ours, theirs = plain(record["events"]), plain(line["events"])
    for i, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        if a != b:
            field = next(k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))
            raise ExportError(f"field 'events[{i}].{field}': the replay through a fresh "
                              f"environment gave {a.get(field)!r:.80} where the log has "
                              f"{b.get(field)!r:.80} (another dataset file or clinenv "
                              "version?); the messages cannot be rebuilt", path=path,
                              line=number)
    if len(ours) != len(theirs):
        raise ExportError(f"field 'events': the replay gave {len(ours)} events, the log "
                          f"{len(theirs)}; the messages cannot be rebuilt", path=path,
                          line=number)
    if record["evidence"] != line["evidence"]:
        raise ExportError("field 'evidence': the replay's evidence interface differs from "
                          "the logged one; the messages cannot be rebuilt", path=path,
                          line=number)


def doctor_system_prompt(line: Mapping[str, Any]) -> str:
    """The doctor's acquisition system prompt for a rebuilt episode: the LLM doctor's
    own (``doctor.config.prompt``, ``max_questions``), else the one ``clinenv run
    --doctor llm`` uses on the line's environment (``agentclinic`` with a budget of T
    under a native protocol, else ``egip``), the doctor's bias text last
    (``doctor.config.bias``, :func:`clinenv.protocol.biases.bias_text`)."""
    config = line["doctor"].get("config") or {}
    return _base_system_prompt(line, config) + bias_text("doctor", config.get("bias"))


def _base_system_prompt(line: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    if config.get("agent") == "llm_doctor":
        prompt, budget = config.get("prompt"), config.get("max_questions")
    else:
        prompt, budget = ("agentclinic", _rounds(line)) if _native(line) else ("egip", None)
    if prompt != "agentclinic":
        return EGIP_DOCTOR_SYSTEM
    text = (AGENTCLINIC_BUDGET_UNKNOWN if budget is None
            else AGENTCLINIC_BUDGET_KNOWN.format(n=budget))
    return AGENTCLINIC_DOCTOR_SYSTEM.format(budget=text)


def _native(line: Mapping[str, Any]) -> bool:
    return bool(line.get("protocol")) and line.get("protocol") != "egip"


def _rounds(line: Mapping[str, Any]) -> int:
    """T of the line's environment (the CLI's default question budget)."""
    kwargs = dict((line.get("env_spec") or {}).get("kwargs") or {})
    for name in ("patient_model", "judge_model", "examiner_model"):
        kwargs.pop(name, None)
    for name, keep in (("patient", _DETERMINISTIC_PATIENTS), ("judge", (None,)),
                       ("examiner", _DETERMINISTIC_EXAMINERS)):
        if kwargs.get(name) not in keep:
            kwargs.pop(name)
    env = gym.make(line["env_id"], disable_env_checker=True, **kwargs)
    try:
        return int(env.unwrapped.config.acquisition_rounds)
    finally:
        env.close()


def _with_instructions(system: str, text: str) -> str:
    """A user turn opened by the instructions of a call whose system prompt differs from
    the episode's first (the decision call's :data:`DIRECT_SYSTEM`)."""
    return f"{system}\n\n{text}"


def _rebuilt_messages(replay: _Replay, line: Mapping[str, Any], *,
                      delta: bool = False) -> list[dict]:
    config = line["doctor"].get("config") or {}
    if isinstance(config, Mapping) and config.get("framing") == "tool-view":
        return _text_view_messages(replay)
    messages = [{"role": "system", "content": doctor_system_prompt(line)}]
    for text, phase, action in replay.steps:
        if phase == "decide" and not _native(line):
            text = _with_instructions(DIRECT_SYSTEM + bias_text("doctor", config.get("bias")),
                                      text if delta else evidence_part(text))
        messages.append({"role": "user", "content": text})
        messages.append({"role": "assistant", "content": str(action["text"])})
    return messages


def _text_view_messages(replay: _Replay) -> list[dict]:
    """The episode in the tool view's text framing (docs/export.md): the messages a
    text-protocol trainer's rollout holds (the SkyRL adapter: system
    :data:`~clinenv.integrations.tools.TEXT_SYSTEM_PROMPT`, user
    :data:`~clinenv.integrations.tools.TASK_INTRO` plus the opening text, then each
    reply and the delta observation that answered it)."""
    from clinenv.integrations.tools import TASK_INTRO, TEXT_SYSTEM_PROMPT

    messages = [{"role": "system", "content": TEXT_SYSTEM_PROMPT}]
    for n, (text, _, action) in enumerate(replay.steps):
        messages.append({"role": "user", "content": TASK_INTRO + text if n == 0 else text})
        messages.append({"role": "assistant", "content": str(action["text"])})
    return messages


# ---------------------------------------------------------------- the tool view
def _phases(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """The phase of each doctor action: ``"decide"`` after the interface's
    ``decision_phase`` event, else ``"acquire"``."""
    phase, phases = "acquire", []
    for event in events:
        if event.get("source") == "interface" and event.get("kind") == "decision_phase":
            phase = "decide"
        elif event.get("source") == "doctor":
            phases.append(phase)
    return phases


def _tool_calls(events: Sequence[Mapping[str, Any]], *,
                arguments: str = "json") -> list[dict[str, Any] | None]:
    """Each doctor action as an OpenAI tool call of the tool view
    (:func:`clinenv.integrations.tools.action_to_tool`), ``None`` for an empty one;
    ``arguments``: ``"json"`` (a JSON string, OpenAI's wire format) or ``"dict"``."""
    # Imported here: the core never imports clinenv.integrations (its adapters sit behind
    # extras; DESIGN "Training and scale-out"); the tool view is needed only at export.
    from clinenv.integrations.tools import action_to_tool

    actions = [e for e in events if e.get("source") == "doctor"]
    calls = []
    for index, (action, phase) in enumerate(zip(actions, _phases(events), strict=True)):
        call = action_to_tool(str(action.get("text", "")), phase=phase)
        if call is None:
            calls.append(None)
            continue
        entry = call.to_openai(f"call_{index}")
        if arguments == "dict":
            entry["function"]["arguments"] = dict(call.arguments)
        calls.append(entry)
    return calls


def _tool_messages(replay: _Replay, events: Sequence[Mapping[str, Any]], *,
                   arguments: str = "dict") -> list[dict]:
    """The episode as tool calls and tool results (docs/export.md): the tool view's
    system prompt, the task row's user message with the opening text appended, then
    per action its call and the delta observation the environment answered (the tool
    view's final result once scored). Each message has only the keys of its kind (Llama
    3.x templates read any ``tool_calls`` key as a call)."""
    from clinenv.integrations.tools import FINAL_RESULT, TASK_INTRO, TOOL_SYSTEM_PROMPT

    def message(role: str, content: str) -> dict[str, Any]:
        return {"role": role, "content": content}

    # The first two messages are the GRPO prompt TRL shows for the same episode: the task
    # row [system TOOL_SYSTEM_PROMPT, user TASK_INTRO] (clinenv.integrations.trl.
    # task_dataset) with reset's text appended to the last message's content by plain
    # string concatenation (trl 1.16, trl/trainer/grpo_trainer.py,
    # GRPOTrainer._generate_and_score_completions).
    messages = [message("system", TOOL_SYSTEM_PROMPT),
                message("user", TASK_INTRO + replay.steps[0][0])]
    results = [text for text, _, _ in replay.steps[1:]] + [
        FINAL_RESULT if replay.ended else replay.final]
    for (_, _, action), call, result in zip(replay.steps,
                                            _tool_calls(events, arguments=arguments),
                                            results, strict=True):
        if call is None:  # no tool call: the next observation is a user turn
            messages.append(message("assistant", str(action.get("text", ""))))
            messages.append(message("user", result))
            continue
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "tool", "content": result, "tool_call_id": call["id"],
                         "name": call["function"]["name"]})
    return messages
