"""``clinenv run``: a doctor policy over the first N cases of an EGIP environment.

``clinenv run --help`` lists the options; what it prints, how it resumes and when it
stops early: docs/cli.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from clinenv.cli.argtypes import count
from clinenv.cli.doctors import (
    DOCTOR_CHOICES,
    WrapperConfig,
    add_doctor_arguments,
    add_wrapper_arguments,
    check_doctor,
    doctor_wrapper,
    wrapper_config,
)
from clinenv.cli.env_choice import (
    AUTO_FALLBACK,
    AUTO_PREFERRED,
    add_dataset_arguments,
    add_variation_arguments,
    add_verify_argument,
    choose_env,
    env_config,
    make_env,
)
from clinenv.cli.errors import CLIError
from clinenv.cli.llm_setup import (
    LLMConfig,
    LLMSeats,
    add_examiner_arguments,
    add_llm_arguments,
    check_llm_config,
    doctor_strategy,
    env_protocol,
    llm_config,
)
from clinenv.cli.paper_settings import (
    PaperSettingsConfig,
    add_paper_arguments,
    paper_settings_config,
)
from clinenv.cli.ray_run import RayParts, add_ray_arguments, ray_config
from clinenv.cli.run_summary import format_summary, print_run_end
from clinenv.protocol.presets import PRESETS
from clinenv.runs.fail_fast import DEFAULT_MAX_CONSECUTIVE_ERRORS

#: Characters of a server's error message kept in the one-line fail-fast error.
MESSAGE_CHARS = 400


def add_run_parser(sub: Any) -> None:
    """Add the ``run`` sub-command to ``sub`` (the top-level parser's sub-parsers)."""
    run = sub.add_parser("run", help="run a doctor policy over a dataset, writing a run log",
                         description="Run a doctor policy over the first N cases of an EGIP "
                                     "environment, R times each; one JSON line per episode.")
    run.add_argument("--env", default="auto", metavar="ID|auto",
                     help=f"environment id, or 'auto' (default): {AUTO_PREFERRED} when the "
                          f"medqa file resolves, else {AUTO_FALLBACK}")
    run.add_argument("--preset", default=None, choices=sorted(PRESETS), metavar="NAME",
                     help="environment preset (clinenv.protocol.presets): "
                          f"{', '.join(PRESETS)}; e.g. egip-no-menu, the 'w/o menu' "
                          "ablation (EGIP Table 3A). Default: the id's own")
    run.add_argument("--reward-spec", default=None, metavar="PRESET|FILE",
                     help="terminal reward: a preset (accuracy, the default; diagagent; "
                          "cost-aware) or a JSON spec file (docs/rewards.md)")
    run.add_argument("--premature-diagnosis", default=None, choices=("clarify", "decide"),
                     help="EGIP ids: what a diagnosis marker during acquisition does: "
                          "'clarify' (EGIP default) replaces it by a clarification question, "
                          "'decide' lets the doctor stop early (the CDEG setting, where the "
                          "doctor decides when it has enough evidence)")
    run.add_argument("--icd-map", type=Path, default=None, metavar="FILE",
                     help="EGIP ids: score the answer through a user-supplied ICD mapping "
                          "(clinenv.icd_map/1, docs/cdeg.md): answer and target that map "
                          "to codes are the same diagnosis iff the codes agree")
    run.add_argument("--dataset", type=Path, default=None, metavar="FILE",
                     help="run the cases of this file instead of the id's dataset (any "
                          "schema clinenv reads: OSCE, NEJM, MIMIC-IDx-style, canonical; "
                          "docs/cdeg.md)")
    run.add_argument("--knowledge-source", type=Path, default=None, metavar="FILE",
                     help="EGIP ids: enable RETRIEVE KNOWLEDGE: <query>, answered from this "
                          "user-supplied file (clinenv.knowledge/1, docs/cdeg.md)")
    run.add_argument("--doctor", default="scripted", choices=sorted(DOCTOR_CHOICES),
                     help="doctor policy (default: scripted); llm needs --model and, with "
                          "the openai backend, --base-url")
    add_doctor_arguments(run)
    run.add_argument("--episodes", type=count(1), default=None, metavar="N",
                     help="use the first N cases in dataset order (default: all)")
    run.add_argument("--cases", type=Path, default=None, metavar="FILE",
                     help="run only the cases listed in FILE (one case id per line, e.g. "
                          "from `clinenv data split`); recorded in the log and checked "
                          "by --resume; not with --episodes")
    run.add_argument("--repetitions", type=count(1), default=None, metavar="R",
                     help="repetitions per case (default: 1; 3 with --paper-settings)")
    add_paper_arguments(run)
    run.add_argument("--seed", type=count(0), default=0, metavar="S",
                     help="run seed; episode seeds derive from it (default: 0)")
    run.add_argument("--out", type=Path, default=None, metavar="FILE",
                     help="run log (JSON Lines); must be new or empty unless --resume "
                          "(default: runs/<env id>_<doctor>_seed<S>.jsonl)")
    run.add_argument("--resume", action="store_true",
                     help="continue an existing run log: run the missing episodes and "
                          "run again those stopped by a backend error (their new line "
                          "supersedes the error line)")
    run.add_argument("--no-retry-errors", dest="retry_errors", action="store_false",
                     help="with --resume: keep the episodes stopped by a backend error as "
                          "they are instead of running them again")
    add_dataset_arguments(run)
    add_verify_argument(run)
    add_variation_arguments(run)
    run.add_argument("--concurrency", type=count(1), default=1, metavar="N",
                     help="episodes run at once under asyncio (default: 1, sequential)")
    run.add_argument("--max-consecutive-errors", type=count(0),
                     default=DEFAULT_MAX_CONSECUTIVE_ERRORS, metavar="N",
                     help="stop the run after N episodes in a row stopped by a backend "
                          f"error, e.g. the server is down (default: "
                          f"{DEFAULT_MAX_CONSECUTIVE_ERRORS}; 0: never stop)")
    run.add_argument("--quiet", action="store_true",
                     help="print only the summary: no environment note, progress bar or notes")
    llm = add_llm_arguments(
        run, title="LLM agents (--doctor llm, --patient llm, --judge llm, --examiner llm)")
    add_examiner_arguments(llm)
    llm.add_argument("--log-messages", action="store_true",
                     help="write every model call's messages and raw reply (before any "
                          "cut) into the run log's call records (llm.calls[*].messages, "
                          ".raw_reply); off by default: logs get large and hold the case")
    llm.add_argument("--log-tokens", action="store_true",
                     help="write every model call's token ids and logprobs into its run-log "
                          "record (completion_ids, logprobs; prompt ids as the suffix new "
                          "since the agent's previous call: prompt_ids_shared, "
                          "prompt_ids_new), for clinenv export --format tokens; needs "
                          "--backend vllm or transformers, or a vLLM server")
    add_wrapper_arguments(run)
    run.add_argument("--allow-privileged", action="store_true",
                     help="with --experience: accept run logs of a privileged doctor "
                          "(privileged: true, e.g. --doctor teacher, which saw the "
                          "target) in the baselines' memory; refused by default, since a "
                          "memory of trajectories driven by the target is poisoned")
    add_ray_arguments(run)
    run.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    """``clinenv run`` (``clinenv run --help``); the flags become settings objects here.

    Returns:
        0, or :data:`~clinenv.cli.errors.EXIT_RUN_ERRORS` when some episodes stopped with
        a backend error.

    Raises:
        CLIError: bad arguments (``--examiner lookup`` on a native id, ``--prompt egip``
            on an AgentClinic id...), a missing dataset, a log that cannot be continued,
            an ``--out`` that would be overwritten, or a run stopped early (fail fast).
    """
    from clinenv.runs import RunSpec

    protocol = env_protocol(args.env, args.preset)
    # --ray: fills the model / base URL for --ray-serve or a map
    ray, llm = ray_config(args, llm_config(args))
    check_llm_config(llm, protocol)
    # the repetitions and, with --paper-settings, the doctor's temperature / max tokens
    paper = paper_settings_config(args, llm.doctor, protocol)
    llm = llm.replace(doctor=paper.apply(llm.doctor))
    cases = case_list_option(args.cases, args.episodes)
    wrapper = wrapper_config(args)
    check_doctor(llm.doctor, wrapper, env_id=args.env, preset=args.preset,
                 premature_diagnosis=args.premature_diagnosis)
    wrap = doctor_wrapper(wrapper)  # loads a CDEG graph / run logs now: errors come first
    config = env_config(args)  # reads --reward-spec, checks the input files
    env_id, reason = choose_env(args.env, config.data_dir, config.allow_download,
                                config.verify)
    out: Path = args.out or default_out(env_id, args.preset, config.reward_spec,
                                        doctor_label(llm, wrapper, protocol), args.seed)
    if out.is_dir():
        raise CLIError(f"--out {out} is a folder; give a file path")
    spec = RunSpec(out=out, seed=args.seed, episodes=args.episodes,
                   repetitions=paper.repetitions, resume=args.resume,
                   retry_errors=args.retry_errors, env_id=env_id,
                   max_consecutive_errors=args.max_consecutive_errors or None,
                   paper_settings=paper.record, cases=cases)
    print_start(f"env: {env_id} ({reason})", paper, llm, quiet=args.quiet)
    seats = LLMSeats(llm)
    try:
        seats.build()
        kwargs = seats.env_kwargs()
        env = make_env(env_id, config, **kwargs)
        try:
            check_env(env, env_id, spec, llm)
            seats.match_env(env.unwrapped)
            spare = [env]  # the checked environment first, then fresh ones

            def fresh_env() -> Any:
                return spare.pop() if spare else make_env(env_id, config, **kwargs)

            def make_doctor() -> Any:
                return seats.make_doctor() if wrap is None else wrap(seats.make_doctor())

            parts = RayParts(llm, env_id, config, wrap)
            result = run_logged(spec, (fresh_env, make_doctor), ray, parts,
                                args.concurrency, quiet=args.quiet, where=llm)
        finally:
            env.close()
    finally:
        seats.close()
    return print_result(result, spec, args.preset, llm.doctor.name, quiet=args.quiet)


def doctor_label(llm: LLMConfig, wrapper: WrapperConfig, protocol: str = "egip") -> str:
    """The doctor part of the default ``--out`` name (file-name safe): the ``--doctor``
    name (``scripted-explore<X>`` with ``--exploration X``), or
    ``llm-<strategy>-<model>`` with every character of the model name other than
    letters, digits, ``-``, ``_`` and ``.`` replaced by ``-`` (the strategy defaults by
    ``protocol``, :func:`~clinenv.cli.llm_setup.doctor_strategy`); plus ``-cdeg`` or
    ``-<baseline>`` for a wrapped doctor; ``privileged-teacher`` for ``--doctor teacher``."""
    doctor = llm.doctor
    wrapped = "-cdeg" if wrapper.cdeg else (f"-{wrapper.baseline}" if wrapper.baseline
                                            else "")
    if doctor.name == "teacher":
        return "privileged-teacher"
    if doctor.name != "llm":
        explore = doctor.exploration
        return doctor.name + (f"-explore{explore:g}" if explore else "") + wrapped
    model = "".join(c if c.isalnum() or c in "-_." else "-" for c in str(llm.model))
    return f"llm-{doctor_strategy(doctor, protocol)}-{model}{wrapped}"


def default_out(env_id: str, preset: str | None, reward_spec: Any, doctor: str,
                seed: int) -> Path:
    """The default ``--out``: ``runs/<env id>[_<preset>][_reward-<name>]_<doctor>
    _seed<S>.jsonl`` (``reward_spec``: a :class:`~clinenv.reward_spec.RewardSpec`, its
    canonical JSON or ``None``, :func:`reward_spec_label`; ``doctor``:
    :func:`doctor_label`)."""
    env_part = env_id if preset is None else f"{env_id}_{preset}"
    if reward_spec is not None:
        env_part += reward_spec_label(reward_spec)
    return Path("runs") / f"{env_part}_{doctor}_seed{seed}.jsonl"


def case_list_option(path: Path | None, episodes: int | None) -> Any:
    """The :class:`~clinenv.case_list.CaseList` of ``--cases FILE`` (``path``), or
    ``None``.

    Raises:
        CLIError: ``--cases`` with ``--episodes``, or a file that is missing, a folder,
            not UTF-8, empty or lists an id twice (file and line named).
    """
    from clinenv.case_list import CaseListError, read_case_list

    if path is None:
        return None
    if episodes is not None:
        raise CLIError("--cases and --episodes both choose the cases; give one")
    try:
        return read_case_list(path)
    except FileNotFoundError:
        raise CLIError(f"--cases {path}: no such file") from None
    except IsADirectoryError:
        raise CLIError(f"--cases {path}: is a folder; give a case-list file (e.g. "
                       "construction.txt from `clinenv data split`)") from None
    except (OSError, CaseListError) as err:
        raise CLIError(f"--cases: {err}") from None


def reward_spec_label(spec: Any) -> str:
    """The default ``--out`` name's part for a reward spec (a
    :class:`~clinenv.reward_spec.RewardSpec` or its canonical JSON,
    :meth:`~clinenv.reward_spec.RewardSpec.to_dict`): ``""`` for the default
    ``accuracy``, else ``"_reward-<name>"`` and, for a file without a ``"name"`` (named
    ``custom``: a spec is its content, never its path), the first 8 hex digits of its
    sha256 (``"_reward-custom-1a2b3c4d"``), so different files write different logs and
    identical ones the same."""
    from clinenv.reward_spec import DEFAULT_SPEC

    if not isinstance(spec, dict):
        spec = spec.to_dict()
    if spec == DEFAULT_SPEC.to_dict():
        return ""
    name, sha256 = str(spec.get("name")), spec.get("sha256")
    label = name if name != "custom" or not sha256 else f"custom-{sha256[:8]}"
    return "_reward-" + "".join(c if c.isalnum() or c in "-_." else "-" for c in label)


def print_start(env_line: str, paper: PaperSettingsConfig, llm: LLMConfig, *,
                quiet: bool) -> None:
    """What ``clinenv run`` prints before it starts: the chosen environment, the paper
    settings' summary and notes (not with ``--quiet``), and the privileged teacher's
    note (always: its log is no doctor's result)."""
    if not quiet:
        print(env_line, flush=True)
        if paper.summary:
            print(paper.summary, flush=True)
        for note in paper.notes:
            print(f"note: {note}", file=sys.stderr, flush=True)
    if llm.doctor.name == "teacher":
        from clinenv.cli.doctors import TEACHER_NOTE

        print(f"note: {TEACHER_NOTE}", file=sys.stderr, flush=True)


def check_env(env: Any, env_id: str, spec: Any, llm: LLMConfig) -> None:
    """Refuse, before the run starts, a schedule the environment's cases cannot fill
    (``--episodes``, ``--cases``) and the egip doctor prompt on an AgentClinic-protocol
    environment (it never gives the marker such an episode ends on).

    Raises:
        CLIError: either (the environment is not closed here).
    """
    from clinenv.runs.logged import plan_episodes

    pool = env.unwrapped.pool
    try:
        ids = [c.case_id for c in pool.cases]
        plan_episodes(len(ids), spec.episodes, spec.repetitions, spec.seed,
                      None if spec.cases is None else spec.cases.indices(
                          ids, dataset=f"dataset {pool.name}"))
    except ValueError as err:
        raise CLIError(f"{env_id}: {err}") from None
    if llm.doctor.name == "llm" and llm.doctor.prompt == "egip" and \
            getattr(env.unwrapped, "protocol", "egip") == "agentclinic":
        raise CLIError(f"{env_id} ends only on DIAGNOSIS READY, which the egip doctor "
                       "prompt forbids during acquisition: add --prompt agentclinic")


def run_logged(spec: Any, factories: tuple[Any, Any], ray: Any, parts: RayParts,
               concurrency: int, *, quiet: bool, where: LLMConfig) -> Any:
    """Run ``spec`` on the executor the options pick (Ray with ``ray``, the
    :class:`RayParts` building environments and doctors on the driver and each node;
    else asyncio with ``concurrency`` > 1, else one episode at a time with
    ``factories``), with a progress bar on a terminal unless ``quiet``; returns the
    :class:`~clinenv.runs.RunResult`. The executors check ``--out`` (a non-empty file
    needs ``--resume``) before they write, and create its folder only when they start
    writing.

    Raises:
        CLIError: the run stopped early (:func:`aborted_message`, ``where`` names the
            server and models), a log that cannot be continued, Ray failed, or
            ``--out`` cannot be written.
    """
    from tqdm import tqdm

    from clinenv.runs import Concurrent, Serial, run
    from clinenv.runs.logged import RunAborted, RunLogError

    ray_errors: tuple[type[Exception], ...] = ()
    if ray is not None:
        from clinenv.distributed import Ray, RayRunError

        executor: Any = Ray(ray, parts=parts)
        factories = (None, None)  # the parts build them, on the driver and each node
        ray_errors = (RayRunError,)
    else:
        executor = Concurrent(concurrency) if concurrency > 1 else Serial()
    bar: Any = None

    def start(n_todo: int) -> None:
        nonlocal bar
        bar = tqdm(total=n_todo, desc=spec.env_id, unit="ep", file=sys.stderr,
                   disable=quiet or not sys.stderr.isatty())

    try:
        try:
            return run(*factories, spec, executor, progress=lambda _line: bar.update(1),
                       on_start=start)
        except ray_errors as err:
            raise CLIError(f"--ray {ray.address}: {err}") from None
    except RunAborted as err:
        raise CLIError(aborted_message(err, where)) from None
    except RunLogError as err:
        raise CLIError(str(err)) from None
    except OSError as err:  # errno None: the runners' FileExistsError (non-empty --out)
        raise CLIError(str(err) if err.errno is None else f"--out {spec.out}: {err}") from None
    finally:
        if bar is not None:
            bar.close()


def print_result(result: Any, spec: Any, preset: str | None, doctor: str, *,
                 quiet: bool) -> int:
    """Print a finished run's notes (a cut-off partial line, episodes outside the
    schedule; not with ``quiet``), its summary table and its end (:func:`~clinenv.cli.
    run_summary.print_run_end`); returns the exit code."""
    from clinenv.evaluation.summary import summarize

    out = spec.out
    if result.partial_bytes and not quiet:
        print(f"note: {out}: cut off a partial last line ({result.partial_bytes} bytes) "
              "left by an interrupted run", file=sys.stderr)
    if result.n_extra and not quiet:
        print(f"note: {out} also holds {result.n_extra} episode(s) outside this schedule; "
              "they are not in the summary", file=sys.stderr)
    summary = summarize(result.lines, plan=result.plan)
    n_cases = len({i for i, _, _ in result.plan})
    doctor_name = result.lines[0]["doctor"]["name"] if result.lines else doctor
    retried = (f" ({result.n_retried} after a backend error)" if result.n_retried
               else "")
    shown = spec.env_id if preset is None else f"{spec.env_id} (preset {preset})"
    title = (f"{shown} | doctor {doctor_name} | seed {spec.seed} | {n_cases} cases x "
             f"{spec.repetitions} repetition(s) | {result.n_new} run now{retried}, "
             f"{result.n_resumed} resumed")
    print(format_summary(summary, title=title))
    return print_run_end(summary, result.lines, out, what="episode(s)", rerun="runs them again")


def aborted_message(err: Any, llm: LLMConfig) -> str:
    """The one-line error of a run stopped by :class:`clinenv.runs.fail_fast.RunAborted`:
    what happened, the server and model(s) of ``llm``'s seats, the server's message
    (whitespace collapsed, at most :data:`MESSAGE_CHARS` characters), the lines this run
    wrote and the episodes of the log whose latest line is an error line (counted from
    the file, so earlier runs' error lines and lines of workers that finished are
    included), and how to continue."""
    message = " ".join(str(err.error.get("message", "")).split())
    if len(message) > MESSAGE_CHARS:
        message = message[:MESSAGE_CHARS - 3] + "..."
    models = [name for name in dict.fromkeys(llm.seat_models().values()) if name]
    where = (f"--base-url {llm.base_url}" if llm.backend == "openai"
             else f"--backend {llm.backend}")
    where += ", model " + ", ".join(models) if models else ""
    detail = err.error.get("detail") or err.error.get("type")
    kept = f"{err.n_written} episode(s) of this run are in {err.out}"
    if getattr(err, "n_error_episodes", None):  # counted from the log (clinenv.runs.fail_fast)
        kept += (f", which now holds {err.n_error_episodes} episode(s) stopped by a backend "
                 f"error ({err.n_error_episodes_this_run} from this run)")
    if err.reason == "configuration":
        return (f"the model server refused a request ({detail}: a configuration problem, "
                f"not an outage; check {where} and the API key): {message}; run stopped, "
                f"{kept}; fix it and continue with --resume")
    return (f"{err.n_errors_in_a_row} episode(s) in a row stopped by a backend error "
            f"({detail}; {where}): {message}; the server seems down or overloaded, so the "
            f"run stopped; {kept}; continue later with --resume (it runs the error "
            "episodes again)")
