"""The ``clinenv`` command line.

Usage::

    clinenv run [--env ID|auto] [--doctor scripted|llm] [--episodes N] [--repetitions R]
                [--seed S] [--out FILE] [--resume [--no-retry-errors]] [--data-dir DIR]
                [--allow-download]
                [--concurrency N] [--max-consecutive-errors N] [--quiet]
                [--backend openai|vllm|transformers] [--base-url URL] [--model M]
                [--strategy direct|vote|full] [--prompt egip|agentclinic]
                [--max-questions N]
                [--temperature T] [--max-tokens N] [--api-key-env NAME] [--timeout S]
                [--max-retries N] [--patient retrieval|llm] [--patient-model M]
                [--judge deterministic|llm] [--judge-model M]
    clinenv data list [--data-dir DIR]
    clinenv data verify [NAME ...] [--data-dir DIR]
    clinenv data download NAME
    clinenv eval RUN.jsonl [LABEL=RUN.jsonl ...] [--out-dir DIR] [--plot] [--by STRATUM]
                [--resamples N] [--seed S]
    clinenv compare BASE.jsonl METHOD.jsonl [METHOD2.jsonl ...] [--pair METHOD=BASE ...]
                [--by STRATUM] [--resamples N] [--flips N] [--seed S] [--intersect]
                [--out-dir DIR] [--plot]

``python -m clinenv`` is the same program. ``clinenv run`` prints a note on the chosen
environment (``env: ID (why)``), a progress bar on a terminal, and the summary;
``--quiet`` keeps only the summary. Nothing is created (not even the ``runs/`` folder of
the default ``--out``) until every argument has been checked.

``--doctor llm`` runs :class:`~clinenv.agents.llm_doctor.LLMDoctor` with the terminal
``--strategy`` over a chat model of ``--backend`` (default ``openai``: an
OpenAI-compatible server at ``--base-url``, e.g. ``vllm serve``; ``--model`` is the name
the server knows). ``--patient llm`` and ``--judge llm`` replace the retrieval patient and
the deterministic scorer with LLM agents of the same backend and model, unless
``--patient-model`` / ``--judge-model`` name another (one model object per distinct
name). The API key is read from the environment variable ``--api-key-env`` (default
``OPENAI_API_KEY``; ``EMPTY`` when unset) and never written anywhere. ``--concurrency N``
(> 1) runs N episodes at once (:func:`clinenv.concurrent.run_concurrent`, also with the
scripted doctor); the log is the same as a sequential run's. The summary then also
gives model calls, tokens and mean latency, and the number of episodes stopped by a
backend error (kept in the log as unscored error lines). ``--resume`` runs the missing
episodes and, unless ``--no-retry-errors``, runs those error lines' episodes again
(after a server outage, say): the new line is appended and supersedes the error line,
so ``clinenv eval`` counts the episode once, with its new verdict. The LLM doctor works
in the environment's observation format, and ``--prompt agentclinic`` states its
question budget: ``--max-questions N``, by default the environment's acquisition rounds
T.

A run stops early (fail fast, :mod:`clinenv.fail_fast`) when the server refuses a
request (HTTP 400, 401, 403, 404 or 422: a wrong ``--base-url``, ``--model`` or API key;
the line names them and the server's message) or when ``--max-consecutive-errors N``
(default 5; 0: never) episodes in a row stop with a backend error (the server is down):
the log keeps every line written before, whole; fix the cause and continue with
``--resume``.

``clinenv eval`` prints the accuracy table (methods × datasets, mean ± SD over
repetitions, coverage; EGIP Table 1) of run logs and writes ``accuracy.md`` /
``accuracy.csv`` (``--by``: also ``accuracy_by_<STRATUM>.md/.csv``; ``--plot``:
``accuracy.png``, and ``accuracy_by_<STRATUM>.png`` with ``--by``) in ``--out-dir``
(default ``reports/``). ``clinenv compare`` pairs every method log with the baseline log
of the same dataset (the baseline is the first log's method label) or, with repeatable
``--pair METHOD=BASE`` (labels), each method with its own baseline; p values are
Holm-adjusted over every comparison of the call. It prints and writes ``comparison.md`` /
``comparison.csv`` (``--by``: also ``comparison_by_<STRATUM>.md/.csv``, one row per
stratum and pair; ``--plot``: ``correction_regression.png``). A log is named
``LABEL=path`` to override (or supply) its ``doctor.name``; see :mod:`clinenv.evaluation`.
Scheduled episodes missing from a log count as not correct, and the tables say how many.

Exit codes: 0 success; 1 ``data verify`` found a present file with a wrong checksum or
record count; 2 bad arguments (including an ``--env`` id that is not an EGIP
environment), a missing or corrupt dataset, a run log that cannot be continued, an
``--out`` file that would be overwritten, or a run stopped early by a refused model
request or too many backend errors in a row (fail fast, above); 3 (:data:`EXIT_RUN_ERRORS`)
``run`` finished, but some episodes stopped with a backend error (the summary counts
them; ``--resume`` runs them again); 130 interrupted (Ctrl-C; the log keeps every
finished episode, continue with ``--resume``); 141 stdout closed early (e.g. piped into
``head``), quietly. Errors are one message on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from clinenv.fail_fast import DEFAULT_MAX_CONSECUTIVE_ERRORS

#: Environment chosen by ``--env auto`` when the MedQA file resolves, and the fallback.
AUTO_PREFERRED = "EGIP-MedQA-v0"
AUTO_FALLBACK = "EGIP-Demo-v0"
#: Exit code of a ``clinenv run`` that finished with error episodes (backend errors).
EXIT_RUN_ERRORS = 3
#: Characters of a server's error message kept in the one-line fail-fast error.
MESSAGE_CHARS = 400


class CLIError(Exception):
    """A user-facing error: printed as ``clinenv: error: <message>``, exit ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


# ------------------------------------------------------------------------- doctors
def _scripted() -> Any:
    from clinenv.agents.scripted_doctor import ScriptedDoctor

    return ScriptedDoctor()


#: ``--doctor`` choices: name -> factory of a fresh policy (``llm`` is built from the
#: LLM options by :func:`_llm_setup`).
DOCTORS: dict[str, Callable[[], Any]] = {"scripted": _scripted}
DOCTOR_CHOICES = ("llm", *DOCTORS)
BACKENDS = ("openai", "vllm", "transformers")


# ----------------------------------------------------------------------- arguments
def _number(minimum: float, *, above: bool = False) -> Callable[[str], float]:
    """argparse type: a float >= ``minimum`` (> with ``above``)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if value != value or (value <= minimum if above else value < minimum):
            raise argparse.ArgumentTypeError(
                f"must be {'>' if above else '>='} {minimum:g}, got {text}")
        return value

    return parse


def _count(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``clinenv`` (sub-commands ``run`` and ``data``)."""
    parser = argparse.ArgumentParser(
        prog="clinenv",
        description="Clinical diagnosis cases as EGIP environments: run doctor policies, "
                    "manage datasets and report on run logs.")
    sub = parser.add_subparsers(dest="command", metavar="{run,data,eval,compare}")
    sub.required = True

    run = sub.add_parser("run", help="run a doctor policy over a dataset, writing a run log",
                         description="Run a doctor policy over the first N cases of an EGIP "
                                     "environment, R times each; one JSON line per episode.")
    run.add_argument("--env", default="auto", metavar="ID|auto",
                     help=f"environment id, or 'auto' (default): {AUTO_PREFERRED} when the "
                          f"medqa file resolves, else {AUTO_FALLBACK}")
    run.add_argument("--doctor", default="scripted", choices=sorted(DOCTOR_CHOICES),
                     help="doctor policy (default: scripted); llm needs --model and, with "
                          "the openai backend, --base-url")
    run.add_argument("--episodes", type=_count(1), default=None, metavar="N",
                     help="use the first N cases in dataset order (default: all)")
    run.add_argument("--repetitions", type=_count(1), default=1, metavar="R",
                     help="repetitions per case (default: 1)")
    run.add_argument("--seed", type=_count(0), default=0, metavar="S",
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
    run.add_argument("--data-dir", type=Path, default=None, metavar="DIR",
                     help="folder holding the dataset files (before $CLINENV_DATA_DIR)")
    run.add_argument("--allow-download", action="store_true",
                     help="download a missing public dataset (pinned URL and sha256)")
    run.add_argument("--concurrency", type=_count(1), default=1, metavar="N",
                     help="episodes run at once under asyncio (default: 1, sequential)")
    run.add_argument("--max-consecutive-errors", type=_count(0),
                     default=DEFAULT_MAX_CONSECUTIVE_ERRORS, metavar="N",
                     help="stop the run after N episodes in a row stopped by a backend "
                          f"error, e.g. the server is down (default: "
                          f"{DEFAULT_MAX_CONSECUTIVE_ERRORS}; 0: never stop)")
    run.add_argument("--quiet", action="store_true",
                     help="print only the summary: no environment note, progress bar or notes")
    _add_llm_arguments(run)
    run.set_defaults(func=cmd_run)

    data = sub.add_parser("data", help="list, verify or download datasets")
    dsub = data.add_subparsers(dest="data_command", metavar="{list,verify,download}")
    dsub.required = True
    dlist = dsub.add_parser("list", help="known datasets and where their files are")
    dlist.add_argument("--data-dir", type=Path, default=None, metavar="DIR")
    dlist.set_defaults(func=cmd_data_list)
    dverify = dsub.add_parser("verify", help="check checksums and record counts "
                                             "(exit 1 on a mismatch)")
    dverify.add_argument("names", nargs="*", metavar="NAME",
                         help="datasets to check (default: all)")
    dverify.add_argument("--data-dir", type=Path, default=None, metavar="DIR")
    dverify.set_defaults(func=cmd_data_verify)
    ddown = dsub.add_parser("download", help="download a public dataset into the user cache")
    ddown.add_argument("name", metavar="NAME")
    ddown.add_argument("--data-dir", type=Path, default=None, metavar="DIR",
                       help="a folder checked first for an existing copy")
    ddown.set_defaults(func=cmd_data_download)
    _add_eval_parsers(sub)
    return parser


def _add_llm_arguments(run: argparse.ArgumentParser) -> None:
    """The LLM options of ``clinenv run`` (doctor, patient, judge, backend)."""
    llm = run.add_argument_group("LLM agents (--doctor llm, --patient llm, --judge llm)")
    llm.add_argument("--backend", choices=BACKENDS, default="openai",
                     help="chat-model backend (default: openai, any OpenAI-compatible server)")
    llm.add_argument("--base-url", default=None, metavar="URL",
                     help="server URL for the openai backend, e.g. http://127.0.0.1:8000/v1")
    llm.add_argument("--model", default=None, metavar="M",
                     help="model name (as the server knows it) or local path")
    llm.add_argument("--strategy", choices=("direct", "vote", "full"), default="direct",
                     help="terminal decision strategy F (EGIP eq. 5; default: direct)")
    llm.add_argument("--prompt", choices=("egip", "agentclinic"), default="egip",
                     help="doctor prompt (default: egip)")
    llm.add_argument("--max-questions", type=_count(1), default=None, metavar="N",
                     help="question budget stated by --prompt agentclinic (default: the "
                          "environment's acquisition rounds T)")
    llm.add_argument("--temperature", type=_number(0.0), default=None, metavar="T",
                     help="doctor sampling temperature (default: the backend config's, 0)")
    llm.add_argument("--max-tokens", type=_count(1), default=200, metavar="N",
                     help="new tokens per doctor call (default: 200, EGIP appendix A.1)")
    llm.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="NAME",
                     help="environment variable holding the API key (default: "
                          "OPENAI_API_KEY); the key is never logged")
    llm.add_argument("--timeout", type=_number(0.0, above=True), default=60.0, metavar="S",
                     help="seconds per HTTP request before a retry (default: 60)")
    llm.add_argument("--max-retries", type=_count(0), default=3, metavar="N",
                     help="retries per request on timeouts, 429 and 5xx (default: 3)")
    llm.add_argument("--patient", choices=("retrieval", "llm"), default="retrieval",
                     help="patient simulator (default: retrieval, deterministic)")
    llm.add_argument("--patient-model", default=None, metavar="M",
                     help="model of the LLM patient (default: --model)")
    llm.add_argument("--judge", choices=("deterministic", "llm"), default="deterministic",
                     help="answer scorer (default: deterministic)")
    llm.add_argument("--judge-model", default=None, metavar="M",
                     help="model of the LLM judge (default: --model)")


def _add_eval_parsers(sub: Any) -> None:
    """The ``eval`` and ``compare`` sub-commands."""
    logs_help = "run log (JSON Lines from clinenv run); LABEL=path names its method"
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out-dir", type=Path, default=Path("reports"), metavar="DIR",
                        help="folder for the Markdown, CSV and PNG files (default: reports)")
    common.add_argument("--plot", action="store_true",
                        help="also write PNG figures (needs matplotlib: "
                             "pip install 'clinenv[plot]')")
    common.add_argument("--resamples", type=_count(1), default=10_000, metavar="N",
                        help="case-cluster bootstrap resamples of the CIs (eval: of the "
                             "--plot error bars; default: 10000)")
    common.add_argument("--seed", type=_count(0), default=0, metavar="S",
                        help="seed of the bootstrap and randomization streams (default: 0)")

    ev = sub.add_parser("eval", parents=[common],
                        help="accuracy table (methods x datasets) of run logs",
                        description="Accuracy mean +/- SD over repetitions and answer "
                                    "coverage, methods x datasets (EGIP Table 1).")
    ev.add_argument("logs", nargs="+", metavar="RUN.jsonl", help=logs_help)
    ev.add_argument("--by", default=None, metavar="STRATUM",
                    help="also report per stratum of this case_strata key "
                         "(e.g. question_type; with --plot also plotted)")
    ev.add_argument("--similarity", choices=sorted(SIMILARITY_ENCODERS), default=None,
                    help="add answer-reference similarity columns (CDEG 'Sim.'); "
                         "'lexical' is a hashing bag-of-words stand-in, not a clinical "
                         "encoder (model encoders come with the embeddings layer)")
    ev.set_defaults(func=cmd_eval)

    cmp = sub.add_parser("compare", parents=[common],
                         help="paired comparisons of methods against a baseline",
                         description="Paired differences with case-cluster bootstrap CIs, "
                                     "Holm-adjusted sign-flip p values, unscored counts, "
                                     "correction and regression (EGIP Tables 5/8, CDEG "
                                     "Table 2). The first log's method is the baseline; "
                                     "each other log is compared with the baseline log of "
                                     "its dataset.")
    cmp.add_argument("base", metavar="BASE.jsonl",
                     help="the baseline's run log; LABEL=path names its method, and every "
                          "log with that label is the baseline of its dataset")
    cmp.add_argument("methods", nargs="*", metavar="METHOD.jsonl",
                     help=logs_help + "; compared with the baseline of its dataset")
    cmp.add_argument("--pair", action="append", default=None, metavar="METHOD=BASE",
                     help="compare the runs labelled METHOD with those labelled BASE "
                          "(repeatable, e.g. one pair per framework); without it every "
                          "log is compared with the first log's label")
    cmp.add_argument("--by", default=None, metavar="STRATUM",
                     help="also compare per stratum of this case_strata key "
                          "(e.g. question_type; EGIP Table 7)")
    cmp.add_argument("--flips", type=_count(1), default=20_000, metavar="N",
                     help="sign-flip randomizations per comparison (default: 20000)")
    cmp.add_argument("--intersect", action="store_true",
                     help="compare the cases both logs hold instead of refusing different "
                          "case sets")
    cmp.set_defaults(func=cmd_compare)


# ----------------------------------------------------------------------------- run
def choose_env(requested: str, data_dir: Path | None, allow_download: bool) -> tuple[str, str]:
    """The environment id to run and why it was chosen.

    Args:
        requested: an environment id or ``"auto"``.
        data_dir: ``--data-dir``.
        allow_download: ``--allow-download`` (``auto`` may then download MedQA).

    Returns:
        ``(env_id, reason)``.

    Raises:
        CLIError: an unknown id, an id registered by another package whose entry point is
            not an EGIP environment class, or (``auto``) a MedQA file with a wrong checksum.
    """
    import gymnasium as gym

    from clinenv.datasets import resolve_dataset
    from clinenv.errors import ChecksumError, DatasetNotFoundError
    from clinenv.registration import EGIP_IDS

    if requested != "auto":
        if requested not in gym.registry:
            raise CLIError(f"unknown environment id {requested!r}; {_ids_hint()}")
        _reject_foreign_entry_point(requested)
        return requested, "requested with --env"
    dataset = EGIP_IDS[AUTO_PREFERRED]
    try:
        path = resolve_dataset(dataset, data_dir, allow_download=allow_download)
    except DatasetNotFoundError:
        return AUTO_FALLBACK, (f"--env auto: dataset {dataset!r} not found (set "
                               "CLINENV_DATA_DIR or run `clinenv data download medqa`), "
                               "so the bundled demo set is used")
    except ChecksumError as err:
        raise CLIError(f"--env auto: {err}") from None
    return AUTO_PREFERRED, f"--env auto: dataset {dataset!r} found at {path}"


def _ids_hint() -> str:
    from clinenv.registration import EGIP_IDS

    return "clinenv ids: " + ", ".join(EGIP_IDS) + " (or 'auto')"


def _not_egip(env_id: str) -> CLIError:
    return CLIError(f"{env_id!r} is not an EGIP environment; {_ids_hint()}")


def _reject_foreign_entry_point(env_id: str) -> None:
    """Refuse, without making it, an id whose entry point is a class other than EGIPEnv.

    Making a foreign environment would pass it clinenv's keyword arguments and could fail
    in arbitrary ways; entry points that are factory functions are checked after
    ``gym.make`` instead (:func:`_make_env`).
    """
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    from clinenv.env import EGIPEnv

    entry_point = gym.spec(env_id).entry_point
    try:
        creator = (load_env_creator(entry_point) if isinstance(entry_point, str)
                   else entry_point)
    except Exception:  # a foreign module that does not import (missing extra...)
        creator = None
    if creator is None or (isinstance(creator, type) and not issubclass(creator, EGIPEnv)):
        raise _not_egip(env_id)


def _make_env(env_id: str, data_dir: Path | None, allow_download: bool,
              **kwargs: Any) -> Any:
    """``gym.make(env_id, **kwargs)`` with the data options; refuses a non-EGIP
    environment."""
    import gymnasium as gym

    from clinenv.env import EGIPEnv
    from clinenv.errors import ClinenvError

    if data_dir is not None:
        kwargs["data_dir"] = str(data_dir)
    if allow_download:
        kwargs["allow_download"] = True
    try:
        env = gym.make(env_id, **kwargs)
    except ClinenvError as err:
        raise CLIError(str(err)) from None
    except gym.error.Error as err:
        raise CLIError(f"cannot make {env_id!r}: {err}") from None
    if not isinstance(env.unwrapped, EGIPEnv):
        env.close()
        raise _not_egip(env_id)
    return env


def _fmt_pct(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.2f} %"


def _fmt_num(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.2f}"


def format_summary(summary: dict[str, Any], *, title: str) -> str:
    """Plain-ASCII text of a :func:`clinenv.rollouts.summarize` result."""
    lines = [
        title,
        f"  scheduled   {summary['n_scheduled']}",
        f"  accuracy    {_fmt_pct(summary['accuracy'])}  ({summary['n_correct']} correct, "
        f"{summary['n_wrong']} wrong, {summary['n_unscored']} unscored or missing)",
        f"  coverage    {_fmt_pct(summary['coverage'])}",
        f"  mean turns  {_fmt_num(summary['mean_turns'])}",
        f"  mean exams  {_fmt_num(summary['mean_exams'])}",
    ]
    reps = summary["repetitions"]
    if len(reps) >= 2:
        per = ", ".join(f"{v['accuracy']:.2f}" for v in reps.values())
        lines.append(f"  accuracy over {len(reps)} repetitions: "
                     f"{_fmt_num(summary['accuracy_mean'])} +/- "
                     f"{_fmt_num(summary['accuracy_sd'])} % "
                     f"(mean +/- sample SD; per repetition: {per})")
    return "\n".join(lines)


class _LLMSetup:
    """The chat models, doctor factory and environment kwargs of ``clinenv run``.

    One model object per distinct model name (shared by doctor, patient and judge, and
    by every concurrent worker); :meth:`close` closes them.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.models: dict[str, Any] = {}
        self.env_kwargs: dict[str, Any] = {}
        self.observation_format = "view"
        self.acquisition_rounds: int | None = None

    def match_env(self, env: Any) -> None:
        """Take the doctor's observation format and default question budget from the
        environment (an :class:`~clinenv.env.EGIPEnv`): its ``observation_format`` and
        its acquisition rounds T."""
        self.observation_format = env.observation_format
        self.acquisition_rounds = env.config.acquisition_rounds

    def model(self, name: str) -> Any:
        """The chat model named ``name`` on ``--backend`` (built once).

        Raises:
            CLIError: the backend's optional dependency is missing, or it refuses the
                arguments.
        """
        if name not in self.models:
            from clinenv.llm.base import LLMError
            from clinenv.llm.factory import make_chat_model

            args = self.args
            kwargs: dict[str, Any] = {}
            if args.backend == "openai":
                kwargs = {"base_url": args.base_url, "timeout_s": args.timeout,
                          "max_retries": args.max_retries,
                          "api_key": os.environ.get(args.api_key_env) or "EMPTY"}
            try:
                self.models[name] = make_chat_model(args.backend, name, **kwargs)
            except (LLMError, ImportError, ValueError, OSError) as err:
                raise CLIError(f"--backend {args.backend} --model {name}: {err}") from None
        return self.models[name]

    def build(self) -> None:
        """Build the models and environment kwargs the options ask for."""
        args = self.args
        if args.doctor == "llm":
            self.model(args.model)
        if args.patient == "llm":
            self.env_kwargs.update(patient="llm",
                                   patient_model=self.model(args.patient_model or args.model))
        if args.judge == "llm":
            self.env_kwargs.update(judge="llm",
                                   judge_model=self.model(args.judge_model or args.model))

    def make_doctor(self) -> Any:
        """A fresh doctor (``--doctor``). The LLM doctor uses the environment's
        observation format and, with ``--prompt agentclinic``, states the question budget
        ``--max-questions`` (default: the environment's T; see :meth:`match_env`)."""
        args = self.args
        if args.doctor != "llm":
            return DOCTORS[args.doctor]()
        from clinenv.agents.llm_doctor import LLMDoctor
        from clinenv.llm.base import GenerationConfig

        config = GenerationConfig().merged(temperature=args.temperature,
                                           max_tokens=args.max_tokens)
        budget = None
        if args.prompt == "agentclinic":
            budget = args.max_questions or self.acquisition_rounds
        return LLMDoctor(self.model(args.model), strategy=args.strategy, prompt=args.prompt,
                         config=config, observation_format=self.observation_format,
                         max_questions=budget)

    def close(self) -> None:
        """Close every model (clients, engines)."""
        for model in self.models.values():
            model.close()


def check_llm_args(args: argparse.Namespace) -> None:
    """Refuse, before anything is built, LLM options that cannot work.

    Raises:
        CLIError: an LLM doctor, patient or judge without a model name; the openai
            backend without ``--base-url``; LLM-only options without any LLM agent;
            ``--max-questions`` without ``--doctor llm --prompt agentclinic``.
    """
    wants = [name for name, on in (("--doctor llm", args.doctor == "llm"),
                                   ("--patient llm", args.patient == "llm"),
                                   ("--judge llm", args.judge == "llm")) if on]
    for flag, own in (("--doctor llm", None), ("--patient llm", args.patient_model),
                      ("--judge llm", args.judge_model)):
        if flag in wants and not (own or args.model):
            extra = "" if flag == "--doctor llm" else f" (or {flag.split()[0]}-model)"
            raise CLIError(f"{flag} needs --model M{extra}")
    if wants and args.backend == "openai" and not args.base_url:
        raise CLIError(f"{wants[0]} with --backend openai needs --base-url URL "
                       "(e.g. http://127.0.0.1:8000/v1 for `vllm serve`)")
    if args.max_questions is not None and (args.doctor != "llm" or args.prompt != "agentclinic"):
        raise CLIError("--max-questions is used only with --doctor llm --prompt agentclinic "
                       "(the egip prompt has no question budget)")
    if not wants:
        given = [flag for flag, value in (("--model", args.model), ("--base-url", args.base_url),
                                          ("--patient-model", args.patient_model),
                                          ("--judge-model", args.judge_model)) if value]
        if given:
            raise CLIError(f"{given[0]} is used only with --doctor llm, --patient llm or "
                           "--judge llm")


def _doctor_label(args: argparse.Namespace) -> str:
    """The doctor part of the default ``--out`` name (file-name safe)."""
    if args.doctor != "llm":
        return args.doctor
    model = "".join(c if c.isalnum() or c in "-_." else "-" for c in args.model)
    return f"llm-{args.strategy}-{model}"


def format_llm_totals(totals: dict[str, Any]) -> str:
    """One summary line of :func:`clinenv.rollouts.llm_totals`."""
    def tokens(key: str) -> str:
        return "n/a" if totals[key] is None else str(totals[key])

    return (f"  llm calls   {totals['n_calls']} (prompt tokens {tokens('prompt_tokens')}, "
            f"completion tokens {tokens('completion_tokens')}, mean latency "
            f"{_fmt_num(totals['mean_latency_s'])} s)")


def cmd_run(args: argparse.Namespace) -> int:
    """``clinenv run``: see the module docstring."""
    from tqdm import tqdm

    from clinenv.concurrent import run_concurrent
    from clinenv.rollouts import RunAborted, RunLogError, plan_episodes, run_logged
    from clinenv.summary import llm_totals, summarize

    check_llm_args(args)
    env_id, reason = choose_env(args.env, args.data_dir, args.allow_download)
    out: Path = args.out or Path("runs") / f"{env_id}_{_doctor_label(args)}_seed{args.seed}.jsonl"
    if out.is_dir():
        raise CLIError(f"--out {out} is a folder; give a file path")
    if not args.quiet:
        print(f"env: {env_id} ({reason})", flush=True)
    setup = _LLMSetup(args)
    try:
        setup.build()
        spare = [_make_env(env_id, args.data_dir, args.allow_download, **setup.env_kwargs)]
        env = spare[0]
        try:
            plan_episodes(len(env.unwrapped.pool.cases), args.episodes, args.repetitions,
                          args.seed)
        except ValueError as err:
            env.close()
            raise CLIError(f"{env_id}: {err}") from None
        setup.match_env(env.unwrapped)
        bar: Any = None

        def start(n_todo: int) -> None:
            nonlocal bar
            bar = tqdm(total=n_todo, desc=env_id, unit="ep", file=sys.stderr,
                       disable=args.quiet or not sys.stderr.isatty())

        def make_env() -> Any:  # the checked environment first, then fresh ones
            if spare:
                return spare.pop()
            return _make_env(env_id, args.data_dir, args.allow_download, **setup.env_kwargs)

        options = dict(out=out, seed=args.seed, episodes=args.episodes,
                       repetitions=args.repetitions, resume=args.resume,
                       retry_errors=args.retry_errors, env_id=env_id,
                       max_consecutive_errors=args.max_consecutive_errors or None,
                       progress=lambda _line: bar.update(1), on_start=start)
        # the runners check --out (a non-empty file needs --resume) before they write,
        # and create the folder of --out only when they start writing
        try:
            if args.concurrency > 1:
                result = run_concurrent(make_env, setup.make_doctor,
                                        concurrency=args.concurrency, **options)
            else:
                result = run_logged(make_env(), setup.make_doctor(), **options)
        except RunAborted as err:
            raise CLIError(aborted_message(err, args)) from None
        except RunLogError as err:
            raise CLIError(str(err)) from None
        except OSError as err:  # errno None: the runners' FileExistsError (non-empty --out)
            raise CLIError(str(err) if err.errno is None else f"--out {out}: {err}") from None
        finally:
            if bar is not None:
                bar.close()
            env.close()
    finally:
        setup.close()
    if result.partial_bytes and not args.quiet:
        print(f"note: {out}: cut off a partial last line ({result.partial_bytes} bytes) "
              "left by an interrupted run", file=sys.stderr)
    if result.n_extra and not args.quiet:
        print(f"note: {out} also holds {result.n_extra} episode(s) outside this schedule; "
              "they are not in the summary", file=sys.stderr)
    summary = summarize(result.lines, plan=result.plan)
    n_cases = len({i for i, _, _ in result.plan})
    doctor_name = result.lines[0]["doctor"]["name"] if result.lines else args.doctor
    retried = (f" ({result.n_retried} after a backend error)" if result.n_retried
               else "")
    title = (f"{env_id} | doctor {doctor_name} | seed {args.seed} | {n_cases} cases x "
             f"{args.repetitions} repetition(s) | {result.n_new} run now{retried}, "
             f"{result.n_resumed} resumed")
    print(format_summary(summary, title=title))
    if summary["n_errors"]:
        print(f"  errors      {summary['n_errors']} episode(s) stopped by a backend error "
              "(counted as unscored; see 'error' in the log); --resume runs them again")
    totals = llm_totals(result.lines)
    if totals is not None:
        print(format_llm_totals(totals))
    print(f"  log         {out}")
    return EXIT_RUN_ERRORS if summary["n_errors"] else 0


def aborted_message(err: Any, args: argparse.Namespace) -> str:
    """The one-line error of a run stopped by :class:`clinenv.fail_fast.RunAborted`:
    what happened, the server and model(s), the server's message (whitespace collapsed,
    at most :data:`MESSAGE_CHARS` characters), and how to continue."""
    message = " ".join(str(err.error.get("message", "")).split())
    if len(message) > MESSAGE_CHARS:
        message = message[:MESSAGE_CHARS - 3] + "..."
    models = [name for name in dict.fromkeys(
        [args.model if args.doctor == "llm" else None,
         (args.patient_model or args.model) if args.patient == "llm" else None,
         (args.judge_model or args.model) if args.judge == "llm" else None]) if name]
    where = (f"--base-url {args.base_url}" if args.backend == "openai"
             else f"--backend {args.backend}")
    where += ", model " + ", ".join(models) if models else ""
    detail = err.error.get("detail") or err.error.get("type")
    kept = f"{err.n_written} episode(s) of this run are in {err.out}"
    if err.reason == "configuration":
        return (f"the model server refused a request ({detail}: a configuration problem, "
                f"not an outage; check {where} and the API key): {message}; run stopped, "
                f"{kept}; fix it and continue with --resume")
    return (f"{err.n_errors_in_a_row} episode(s) in a row stopped by a backend error "
            f"({detail}; {where}): {message}; the server seems down or overloaded, so the "
            f"run stopped; {kept}; continue later with --resume (it runs the error "
            "episodes again)")


# ---------------------------------------------------------------------------- data
def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)


def cmd_data_list(args: argparse.Namespace) -> int:
    """``clinenv data list``: name, file, expected records, where found, checksum."""
    from clinenv.datasets import DATASETS, resolve_dataset, sha256_file
    from clinenv.errors import ClinenvError

    rows = [("name", "file", "records", "found", "sha256")]
    for name, spec in DATASETS.items():
        try:
            path = resolve_dataset(name, args.data_dir, verify=False)
        except ClinenvError:
            where, sha = "absent", "-"
        else:
            where = str(path)
            if spec.sha256 is None:
                sha = "not pinned"
            else:
                sha = "ok" if sha256_file(path) == spec.sha256 else "MISMATCH"
        expected = "-" if spec.n_records is None else str(spec.n_records)
        rows.append((name, spec.file_name, expected, where, sha))
    print(_table(rows))
    return 0


def cmd_data_verify(args: argparse.Namespace) -> int:
    """``clinenv data verify``: exit 1 when a present file fails its checks."""
    from clinenv.datasets import DATASETS, verify_dataset
    from clinenv.datasets.registry import get_spec
    from clinenv.errors import DatasetNotFoundError

    try:
        names = [get_spec(n).name for n in args.names] if args.names else list(DATASETS)
    except DatasetNotFoundError as err:
        raise CLIError(str(err)) from None
    failed = False
    rows = [("name", "status", "records", "sha256", "path")]
    for name in names:
        try:
            result = verify_dataset(name, args.data_dir)
        except DatasetNotFoundError:
            rows.append((name, "absent", "-", "-", "-"))
            continue
        expected_sha = result.get("expected")
        if expected_sha is None:
            sha = "not pinned"
        else:
            sha = "ok" if result["sha256"] == expected_sha else "MISMATCH"
        n, want = result.get("n_records"), result.get("expected_records")
        records = "unparsable" if n is None else (f"{n}" if want is None else f"{n}/{want}")
        status = "ok" if result["ok"] else "FAILED"
        failed |= not result["ok"]
        rows.append((name, status, records, sha, result["path"]))
        if not result["ok"]:
            problems = []
            if sha == "MISMATCH":
                problems.append(f"sha256 {result['sha256']}, expected {expected_sha}")
            if result.get("error"):
                problems.append(str(result["error"]))
            elif n is not None and want is not None and n != want:
                problems.append(f"{n} records, expected {want}")
            print(f"{name}: {result['path']}: " + "; ".join(problems or ["check failed"]),
                  file=sys.stderr)
    print(_table(rows))
    return 1 if failed else 0


def cmd_data_download(args: argparse.Namespace) -> int:
    """``clinenv data download NAME``: fetch a public dataset into the user cache."""
    from clinenv.datasets import resolve_dataset
    from clinenv.datasets.registry import get_spec
    from clinenv.errors import ClinenvError, DatasetNotFoundError

    try:
        spec = get_spec(args.name)
    except DatasetNotFoundError as err:
        raise CLIError(str(err)) from None
    if spec.bundled:
        path = resolve_dataset(spec.name)
        print(f"{spec.name}: bundled with clinenv at {path}; nothing to download")
        return 0
    if spec.url is None:
        raise CLIError(f"dataset {spec.name!r} cannot be downloaded. {spec.access_note}")
    try:
        try:
            path = resolve_dataset(spec.name, args.data_dir)
            print(f"{spec.name}: already available at {path} (sha256 verified)")
        except DatasetNotFoundError:
            path = resolve_dataset(spec.name, args.data_dir, allow_download=True)
            print(f"{spec.name}: downloaded to {path} (sha256 verified)")
    except ClinenvError as err:
        raise CLIError(str(err)) from None
    return 0


# ------------------------------------------------------------------ eval, compare
def _load_runs(logs: Sequence[str], plot: bool) -> list[Any]:
    """Runs of the logs (notes on stderr for partial last lines); checks --plot first."""
    from clinenv.errors import ClinenvError
    from clinenv.evaluation.runs import load_runs

    if plot:
        from clinenv.evaluation.plots import require_matplotlib

        try:
            require_matplotlib()
        except ClinenvError as err:
            raise CLIError(f"--plot: {err}") from None
    try:
        runs = load_runs(logs)
    except ClinenvError as err:
        raise CLIError(str(err)) from None
    for run in runs:
        if run.partial_bytes:
            print(f"note: {', '.join(run.paths)}: skipped a partial last line "
                  f"({run.partial_bytes} bytes) left by an interrupted run", file=sys.stderr)
    return runs


def _check_by(by: str | None) -> None:
    if by is not None and not by.strip():
        raise CLIError("--by needs a case_strata key, e.g. --by question_type")


def _stem(prefix: str, by: str) -> str:
    return prefix + "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in by)


def _written(paths: Sequence[Path]) -> None:
    print("wrote " + ", ".join(str(p) for p in paths))


def _lexical_encoder() -> tuple[Any, str]:
    from clinenv.evaluation.metrics import HashingEncoder

    return HashingEncoder(), "lexical similarity"


#: ``--similarity`` choices: name -> factory of ``(encoder, column name)``.
SIMILARITY_ENCODERS: dict[str, Callable[[], tuple[Any, str]]] = {"lexical": _lexical_encoder}


def _show_and_write(tables: Sequence[tuple[str, Any]], out_dir: Path) -> list[Path]:
    """Print each ``(stem, Table)`` and write its Markdown and CSV; the written paths."""
    written: list[Path] = []
    for stem, table in tables:
        print(table.to_text())
        print()
        written += _write(table, out_dir, stem)
    return written


def cmd_eval(args: argparse.Namespace) -> int:
    """``clinenv eval``: see the module docstring."""
    from clinenv.errors import ClinenvError
    from clinenv.evaluation.reports import accuracy_table

    _check_by(args.by)
    runs = _load_runs(args.logs, args.plot)
    try:
        encoder, sim_name = None, "similarity"
        if args.similarity:
            encoder, sim_name = SIMILARITY_ENCODERS[args.similarity]()
        tables = [("accuracy", accuracy_table(runs, encoder=encoder,
                                              similarity_name=sim_name))]
        if args.by is not None:
            tables.append((_stem("accuracy_by_", args.by), accuracy_table(runs, by=args.by)))
    except (ClinenvError, ValueError) as err:
        raise CLIError(str(err)) from None
    written = _show_and_write(tables, args.out_dir)
    if args.plot:
        from clinenv.evaluation.plots import plot_accuracy

        for stem, table in tables:
            written.append(_plot(plot_accuracy, table, args.out_dir / f"{stem}.png",
                                 n_resamples=args.resamples, seed=args.seed))
    _written(written)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """``clinenv compare``: see the module docstring."""
    from clinenv.errors import ClinenvError
    from clinenv.evaluation.comparison import comparison_table, pair_runs

    _check_by(args.by)
    pair_labels = [_parse_pair(text) for text in args.pair or ()]
    if not args.methods and not pair_labels:
        raise CLIError("compare needs a baseline log and at least one method log")
    runs = _load_runs([args.base, *args.methods], args.plot)
    try:
        if pair_labels:
            pairs = pair_runs(runs, pairs=pair_labels)
        else:
            pairs = pair_runs(runs, base_label=runs[0].label)
        options = dict(n_resamples=args.resamples, seed=args.seed, n_flips=args.flips,
                       intersect=args.intersect)
        tables = [("comparison", comparison_table(pairs, **options))]
        if args.by is not None:
            tables.append((_stem("comparison_by_", args.by),
                           comparison_table(pairs, by=args.by, **options)))
    except (ClinenvError, ValueError) as err:
        raise CLIError(str(err)) from None
    written = _show_and_write(tables, args.out_dir)
    if args.plot:
        from clinenv.evaluation.plots import plot_correction_regression

        written.append(_plot(plot_correction_regression, tables[0][1],
                             args.out_dir / "correction_regression.png"))
    _written(written)
    return 0


def _parse_pair(text: str) -> tuple[str, str]:
    method, sep, base = text.partition("=")
    if not sep or not method.strip() or not base.strip():
        raise CLIError(f"--pair {text!r}: expected METHOD=BASE (two method labels)")
    return method.strip(), base.strip()


def _write(table: Any, out_dir: Path, stem: str) -> list[Path]:
    try:
        return list(table.write(out_dir, stem))
    except OSError as err:
        raise CLIError(f"--out-dir {out_dir}: {err}") from None


def _plot(func: Callable[..., Any], table: Any, path: Path, **kwargs: Any) -> Path:
    try:
        func(table, path, **kwargs)
    except OSError as err:
        raise CLIError(f"--out-dir {path.parent}: {err}") from None
    return path


# ---------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``clinenv`` command line.

    Args:
        argv: arguments without the program name (default: ``sys.argv[1:]``).

    Returns:
        The exit code (see the module docstring). argparse errors exit 2 via
        ``SystemExit``.
    """
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except CLIError as err:
        print(f"clinenv: error: {err}", file=sys.stderr)
        return err.code
    except BrokenPipeError:
        # the reader (e.g. ``head``) closed stdout: stop quietly, and keep Python's exit
        # flush from raising again
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141
    except KeyboardInterrupt:
        print("clinenv: interrupted; finished episodes are in the log, continue with "
              "--resume", file=sys.stderr)
        return 130
