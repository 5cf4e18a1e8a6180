"""``clinenv replay``: terminal-input ablations on the fixed histories of a run log.

EGIP Table 3 Panel B and appendix C (:mod:`clinenv.runs.replay`); exit codes as
``clinenv run``. What it checks and writes: docs/cli.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clinenv.cli.argtypes import count
from clinenv.cli.doctors import DOCTOR_CHOICES
from clinenv.cli.env_choice import add_dataset_arguments
from clinenv.cli.errors import CLIError
from clinenv.cli.llm_setup import LLMSeats, add_llm_arguments, check_llm_config, llm_config
from clinenv.cli.run_summary import format_summary, print_run_end
from clinenv.runs.fail_fast import DEFAULT_MAX_CONSECUTIVE_ERRORS

#: ``--ablation`` values (dashes) and their :data:`clinenv.runs.replay.ABLATIONS` names.
ABLATION_CHOICES = {"full": "full", "no-observations": "no_observations",
                    "no-candidates": "no_candidates"}


def _leaves(value: Any, prefix: str) -> dict[str, Any]:
    """``{"a.b.c": leaf}`` for a nested mapping (a non-mapping is its own leaf)."""
    if not isinstance(value, Mapping):
        return {prefix: value}
    out: dict[str, Any] = {}
    for key, item in value.items():
        out.update(_leaves(item, f"{prefix}.{key}" if prefix else str(key)))
    return out


def doctor_differences(source: Mapping[str, Any], replay: Mapping[str, Any]) -> list[str]:
    """One line per field in which the replaying doctor differs from the source run's.

    Args:
        source: a source line's ``doctor`` field (``{"name", "config"}``,
            :func:`clinenv.runlog.doctor_config`).
        replay: the replaying doctor's :func:`~clinenv.runlog.doctor_config` (its name
            before the ablation suffix).

    Returns:
        ``"<field>: <replay value> here, <source value> in the source run"`` lines, in
        field order (dotted paths such as ``config.generation.temperature``; a field
        missing on one side shows as ``(absent)``); ``[]`` when the two are the same.
    """
    mine, theirs = _leaves(replay, ""), _leaves(source, "")
    lines = []
    for field in [*mine, *(k for k in theirs if k not in mine)]:
        here, there = mine.get(field, "(absent)"), theirs.get(field, "(absent)")
        if here != there:
            lines.append(f"{field}: {here!r} here, {there!r} in the source run")
    return lines


def add_replay_parser(sub: Any) -> None:
    """Add the ``replay`` sub-command to ``sub`` (the top-level parser's sub-parsers)."""
    replay = sub.add_parser(
        "replay", help="recompute the terminal decisions of a run log under a terminal-input "
                       "ablation (EGIP Table 3B)",
        description="Replay the fixed histories of a run log and recompute only the "
                    "terminal decision, on the full evidence interface or without "
                    "observations or candidate labels; one JSON line per episode.")
    replay.add_argument("source", type=Path, metavar="RUN.jsonl",
                        help="the run log whose histories are replayed (not modified)")
    replay.add_argument("--ablation", required=True, choices=list(ABLATION_CHOICES),
                        help="full (the rerun control), no-observations or no-candidates")
    replay.add_argument("--out", type=Path, default=None, metavar="FILE",
                        help="output run log; must be new or empty unless --resume "
                             "(default: RUN_<ablation>.jsonl beside RUN.jsonl)")
    replay.add_argument("--doctor", default="llm",
                        choices=sorted(set(DOCTOR_CHOICES) - {"teacher"}),
                        help="doctor whose terminal strategy decides (default: llm)")
    replay.add_argument("--resume", action="store_true",
                        help="continue an output log of the same replay")
    replay.add_argument("--no-retry-errors", dest="retry_errors", action="store_false",
                        help="with --resume: keep error lines instead of replaying them")
    add_dataset_arguments(replay)
    replay.add_argument("--concurrency", type=count(1), default=1, metavar="N",
                        help="terminal decisions run at once under asyncio (default: 1)")
    replay.add_argument("--max-consecutive-errors", type=count(0),
                        default=DEFAULT_MAX_CONSECUTIVE_ERRORS, metavar="N",
                        help="stop after N error lines in a row (default: "
                             f"{DEFAULT_MAX_CONSECUTIVE_ERRORS}; 0: never stop)")
    replay.add_argument("--quiet", action="store_true",
                        help="print only the summary: no progress bar or notes")
    replay.add_argument("--allow-privileged", action="store_true",
                        help="replay a log of a privileged doctor (privileged: true, e.g. "
                             "--doctor teacher, which saw the target; refused by default)")
    add_llm_arguments(replay, patient=False,
                      title="LLM agents (--doctor llm, --judge llm)")
    replay.set_defaults(func=cmd_replay)


def wrapped_doctor(source: Any) -> str | None:
    """The name of the first wrapped doctor (CDEG or a baseline: its logged ``config``
    has a ``wrapper`` key, :meth:`clinenv.wrappers.reask.ReaskWrapper.config`) among the
    source log's episodes, or ``None``."""
    for episode in source.episodes:
        doctor = episode.line.get("doctor")
        config = doctor.get("config") if isinstance(doctor, Mapping) else None
        if isinstance(config, Mapping) and "wrapper" in config:
            return str(doctor.get("name"))
    return None


def _warn_doctor_changes(source: Any, doctor: Any) -> None:
    """Print the :func:`doctor_differences` of ``doctor`` against the distinct doctors
    of the source log as ONE ``warning:`` line on stderr (none when they agree)."""
    from clinenv.runlog import doctor_config

    mine, seen, fields = doctor_config(doctor), [], []
    for episode in source.episodes:
        theirs = episode.line.get("doctor")
        if theirs in seen:
            continue
        seen.append(theirs)
        for line in doctor_differences(theirs if isinstance(theirs, Mapping) else {}, mine):
            if line not in fields:
                fields.append(line)
    if fields:
        print(f"warning: the replaying doctor differs from the source run's doctor in "
              f"{len(fields)} field(s) (EGIP appendix C holds the doctor fixed): "
              + "; ".join(fields), file=sys.stderr)


def cmd_replay(args: argparse.Namespace) -> int:
    """``clinenv replay`` (``clinenv replay --help``).

    Returns:
        0, or :data:`~clinenv.cli.errors.EXIT_RUN_ERRORS` when some decisions stopped
        with a backend error.

    Raises:
        CLIError: bad arguments, a source log that cannot be replayed (file, line and
            field named), an ``--out`` that would be overwritten or belongs to another
            replay, or a replay stopped early (fail fast).
    """
    from tqdm import tqdm

    from clinenv.cli.run import aborted_message
    from clinenv.evaluation.summary import summarize
    from clinenv.runlog import RunLogError
    from clinenv.runs import Concurrent, RunSpec, Serial, replay_run
    from clinenv.runs.fail_fast import RunAborted
    from clinenv.runs.replay import load_source

    llm = llm_config(args)
    check_llm_config(llm)
    ablation = ABLATION_CHOICES[args.ablation]
    out: Path = args.out or args.source.with_name(f"{args.source.stem}_{args.ablation}.jsonl")
    if out.is_dir():
        raise CLIError(f"--out {out} is a folder; give a file path")
    if out.resolve() == args.source.resolve():
        raise CLIError(f"--out {out} is the source log; choose another file")
    try:
        source = load_source(args.source, ablation=ablation, data_dir=args.data_dir,
                             allow_download=args.allow_download,
                             allow_privileged=args.allow_privileged)
    except RunLogError as err:
        raise CLIError(str(err)) from None
    wrapped = wrapped_doctor(source)
    if wrapped is not None:
        raise CLIError(f"{args.source}: this log's doctor is wrapped ({wrapped}); replay "
                       "rebuilds plain doctors only")
    first = source.episodes[0]
    spec = first.line.get("env_spec") or {}
    setup = LLMSeats(llm)
    kwargs = spec.get("kwargs") or {}
    settings = kwargs.get("settings") if isinstance(kwargs.get("settings"), dict) else {}
    setup.observation_format = str(kwargs.get("observation_format",
                                              settings.get("observation_format", "view")))
    setup.acquisition_rounds = first.protocol.acquisition_rounds
    bar: Any = None

    def start(n_todo: int) -> None:
        nonlocal bar
        bar = tqdm(total=n_todo, desc=f"replay {args.ablation}", unit="ep", file=sys.stderr,
                   disable=args.quiet or not sys.stderr.isatty())

    try:
        setup.build()
        judge = setup.env_kwargs()
        _warn_doctor_changes(source, setup.make_doctor())
        spec = RunSpec(out=out, resume=args.resume, retry_errors=args.retry_errors,
                       max_consecutive_errors=args.max_consecutive_errors or None)
        executor = Concurrent(args.concurrency) if args.concurrency > 1 else Serial()
        result = replay_run(
            source, setup.make_doctor, spec, executor, ablation=ablation,
            judge=judge.get("judge"), judge_model=judge.get("judge_model"),
            progress=lambda _line: bar.update(1), on_start=start)
    except RunAborted as err:
        raise CLIError(aborted_message(err, llm)) from None
    except RunLogError as err:
        raise CLIError(str(err)) from None
    except OSError as err:  # errno None: the runner's FileExistsError (non-empty --out)
        raise CLIError(str(err) if err.errno is None else f"--out {out}: {err}") from None
    finally:
        if bar is not None:
            bar.close()
        setup.close()
    if not args.quiet:
        for n, what in ((source.partial_bytes, f"{args.source}: ignored a partial last line "
                         f"({source.partial_bytes} bytes)"),
                        (source.n_error_lines, f"{args.source}: skipped {source.n_error_lines} "
                         "error line(s) (no terminal decision to replay)"),
                        (result.partial_bytes, f"{out}: cut off a partial last line "
                         f"({result.partial_bytes} bytes)")):
            if n:
                print(f"note: {what}", file=sys.stderr)
    summary = summarize(result.lines)
    name = result.lines[0]["doctor"]["name"] if result.lines else args.doctor
    print(format_summary(summary, title=(
        f"replay {args.ablation} of {args.source} | doctor {name} | {len(result.lines)} "
        f"episode(s) | {result.n_new} replayed now, {result.n_resumed} resumed")))
    return print_run_end(summary, result.lines, out, what="decision(s)", rerun="replays them")
