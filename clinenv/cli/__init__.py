"""The ``clinenv`` command line.

Usage::

    clinenv run [--env ID|auto] [--doctor scripted|llm|teacher] [--exploration X]
                [--teacher-questions K] [--episodes N]
                [--cases FILE] [--repetitions R]
                [--paper-settings [--framework agentclinic|medagentsim]]
                [--seed S] [--out FILE] [--resume [--no-retry-errors]] [--data-dir DIR]
                [--allow-download] [--no-verify]
                [--concurrency N] [--max-consecutive-errors N] [--quiet]
                [--ray local|auto|ray://HOST:PORT [--ray-runners N]
                 [--base-url-map FILE | --ray-serve MODEL]]
                [--backend openai|vllm|transformers] [--base-url URL] [--model M]
                [--strategy direct|vote|full|discussion|medagentsim] [--prompt egip|agentclinic]
                [--max-questions N] [--vote-temperature T]
                [--temperature T] [--max-tokens N] [--api-key-env NAME] [--timeout S]
                [--max-retries N] [--patient retrieval|llm] [--patient-model M]
                [--examiner lookup|llm] [--examiner-model M]
                [--judge deterministic|llm] [--judge-model M] [--preset NAME]
                [--premature-diagnosis clarify|decide] [--dataset FILE] [--icd-map FILE]
                [--knowledge-source FILE] [--reward-spec PRESET|FILE]
                [--cdeg graph.json [--cdeg-similarity S] [--cdeg-mode M] ...]
                [--baseline self-reflection|trajectory-rag|flat-experience
                 --experience RUN.jsonl ...]
    clinenv replay RUN.jsonl --ablation full|no-observations|no-candidates [--out FILE]
                [--doctor llm|scripted] [--resume [--no-retry-errors]] [--concurrency N]
                [the LLM options of run but --patient: --model M --base-url URL ...]
                [--judge deterministic|llm] [--data-dir DIR] [--quiet] [--allow-privileged]
    clinenv data list [--data-dir DIR]
    clinenv data verify [NAME ...] [--data-dir DIR]
    clinenv data download NAME
    clinenv data split DATASET --construction FRAC [--seed S] --out DIR [--force]
    clinenv data dedupe LOG [--dry-run]
    clinenv eval RUN.jsonl [LABEL=RUN.jsonl ...] [--out-dir DIR] [--plot] [--by STRATUM]
                [--resamples N] [--seed S] [--allow-privileged]
    clinenv compare BASE.jsonl METHOD.jsonl [METHOD2.jsonl ...] [--pair METHOD=BASE ...]
                [--by STRATUM] [--resamples N] [--flips N] [--seed S] [--intersect]
                [--out-dir DIR] [--plot] [--allow-privileged]
    clinenv cdeg build RUN.jsonl [RUN2.jsonl ...] [--out graph.json] [--force]
                [--similarity lexical|sapbert|minilm|MODEL] [--verifier lexical|llm]
                [--extractor deterministic|llm] [--pair-threshold X]
                [--diagnosis-threshold X] [--no-validation] [--no-missing] [--no-ignored]
                [--no-blocking] [--max-candidates N] [--seed S] [--icd-map FILE] [--quiet]
                [--allow-privileged] [--backend B] [--base-url URL] [--model M]
                [--temperature T] ...
    clinenv cdeg inspect graph.json [--top N]
    clinenv cdeg scale RUN.jsonl [RUN2.jsonl ...] --eval-cases FILE [--fractions F,F,...]
                [--seed S] [--out-dir DIR] [--force] [--plot] [--resamples N]
                [--run-args="RUN OPTIONS"] [--build-args="BUILD OPTIONS"]
    clinenv export RUN.jsonl [RUN2.jsonl ...] --out FILE.jsonl|FILE.parquet
                [--format messages|tools] [--per-turn] [--allow-credentialed]
                [--data-dir DIR] [--force]
    clinenv report RUN.jsonl [LABEL=RUN.jsonl ...] [--out FILE.html] [--pair METHOD=BASE ...]
                [--intersect] [--resamples N] [--flips N] [--seed S] [--no-figures]
                [--allow-credentialed] [--allow-privileged]
    clinenv audit ENV_ID [--patient retrieval|llm] [--examiner default|lookup|reader|llm]
                [--preset NAME] [--cases FILE] [--limit N] [--json FILE|-] [--data-dir DIR]

``python -m clinenv`` is the same program. ``clinenv run`` prints a note on the chosen
environment (``env: ID (why)``), a progress bar on a terminal, and the summary;
``--quiet`` keeps only the summary. Nothing is created (not even the ``runs/`` folder of
the default ``--out``) until every argument has been checked.

``--env`` also takes the native protocols' ids (``AgentClinic-<Dataset>-v0``,
``MedAgentSim-<Dataset>-v0``; docs/protocols.md): there the LLM doctor's ``--prompt``
defaults to ``agentclinic`` and, on the MedAgentSim ids, its ``--strategy`` to
``medagentsim`` (MedAgentSim's published final turn; ``--strategy direct`` still
works), ``--examiner llm`` makes the measurement agent an LLM (the
published setting; offline a record reader stands in), and ``--preset NAME`` selects an
EGIP ablation (``egip-no-menu``, ``egip-native-measurement``;
:mod:`clinenv.protocol.presets`). ``--cdeg graph.json`` wraps the doctor in the CDEG
policy wrapper (:mod:`clinenv.wrappers.cdeg.policy`) and ``--baseline`` in one of the
CDEG paper's baselines (:mod:`clinenv.wrappers.baselines`); ``clinenv cdeg build`` makes
the graph from run logs, ``clinenv replay`` recomputes terminal decisions on fixed
histories (EGIP Table 3B).

``--doctor scripted --exploration X`` (0..1) makes the scripted doctor a seeded sampling
policy, whose K repetitions per case feed ``clinenv cdeg build`` offline.
``--doctor teacher`` is the PRIVILEGED teacher (it reads each case's target Y and
records M; :mod:`clinenv.cli.doctors`): demonstrations for ``clinenv export``, its log
lines marked ``privileged: true``, which ``eval``, ``compare``, ``report``, ``cdeg build``
and ``replay`` refuse unless ``--allow-privileged``.
``--doctor llm`` runs :class:`~clinenv.agents.llm_doctor.LLMDoctor` with the terminal
``--strategy`` (default ``direct``; ``medagentsim`` on the MedAgentSim ids) over a chat
model of ``--backend`` (default ``openai``: an OpenAI-compatible server at
``--base-url``, e.g. ``vllm serve``; ``--model`` is the name the server knows).
``--patient llm`` and ``--judge llm`` replace the retrieval patient and the
deterministic scorer with LLM agents of the same backend and model, unless
``--patient-model`` / ``--judge-model`` name another (one model object per distinct
name). The API key is read from the environment variable ``--api-key-env`` (default
``OPENAI_API_KEY``; ``EMPTY`` when unset) and never written anywhere. ``--concurrency
N`` (> 1) runs N episodes at once (:class:`clinenv.runs.concurrent.Concurrent`, also with
the scripted doctor); the log is the same as a sequential run's. The summary then also
gives model calls, tokens and mean latency, and the number of episodes stopped by a
backend error (kept in the log as unscored error lines). ``--resume`` runs the missing
episodes and, unless ``--no-retry-errors``, runs those error lines' episodes again
(after a server outage, say): the new line is appended and supersedes the error line, so
``clinenv eval`` counts the episode once, with its new verdict. The LLM doctor works in
the environment's observation format, and ``--prompt agentclinic`` states its question
budget: ``--max-questions N``, by default the environment's acquisition rounds T.
``--ray ADDRESS`` spreads the episodes over Ray runner actors on many machines, each using
its own node's server (``--base-url``, ``--base-url-map FILE`` or ``--ray-serve MODEL``;
:mod:`clinenv.distributed`, docs/cluster.md); the log, summary and ``--resume`` are those
of a run on one machine.

A run stops early (fail fast, :mod:`clinenv.runs.fail_fast`) when the server refuses a
request (HTTP 400, 401, 403, 404 or 422: a wrong ``--base-url``, ``--model`` or API key;
the line names them and the server's message) or when ``--max-consecutive-errors N``
(default 5; 0: never) episodes in a row stop with a backend error (the server is down):
the log keeps every line written before, whole; fix the cause and continue with
``--resume``.

``clinenv eval`` prints the accuracy table (methods × datasets, mean ± SD over
repetitions, coverage; EGIP Table 1) of run logs and writes ``accuracy.md`` /
``accuracy.csv`` (``--by``: also ``accuracy_by_<STRATUM>.md/.csv``; ``--plot``:
``accuracy.png``, and ``accuracy_by_<STRATUM>.png`` with ``--by``; ``--components``:
``components.md`` / ``.csv``, the mean of each reward component with a case-cluster
bootstrap CI, and ``components_by_<STRATUM>.md/.csv`` with ``--by``) in ``--out-dir``
(default ``reports/``). ``clinenv compare`` pairs every method log with the baseline log
of the same dataset (the baseline is the first log's method label) or, with repeatable
``--pair METHOD=BASE`` (labels), each method with its own baseline; p values are
Holm-adjusted over every comparison of the call. It prints and writes ``comparison.md`` /
``comparison.csv`` (``--by``: also ``comparison_by_<STRATUM>.md/.csv``, one row per
stratum and pair; ``--plot``: ``comparison.png``, each pair's Δ with its CI and Holm p
beside correction and regression, and ``comparison_by_<STRATUM>.png`` with ``--by``).
Without matplotlib, ``--plot`` still prints and writes the tables, then says what to
install (exit 2). ``--out-dir`` is checked before any work (a file, or a folder that
cannot be created or written, is refused before a table is computed or printed).

Outputs derived from run logs can be made again, so ``eval``, ``compare``, ``report``
and ``export`` replace their own earlier outputs and print ``replaced N earlier files
in DIR`` (``export --force`` is still accepted; it is the default now). In
``--out-dir``, ``eval`` owns ``accuracy.*``, ``accuracy_by_*.*``, ``components.*`` and
``components_by_*.*`` and ``compare``
``comparison*``, ``sensitivity*``, ``review.*`` and ``agreement.*`` (``.md``, ``.csv``,
``.png``): after a call the command's files there are exactly those it wrote, and an
earlier call's file it did not write (``accuracy.png`` after an ``eval`` without
``--plot``) is removed, in one line naming it (:mod:`clinenv.cli.outputs`). ``report``
and ``export`` own their ``--out`` file. Run logs are never overwritten: an ``--out``
holding one is refused. A log is named ``LABEL=path`` to override (or supply) its method
label, which is otherwise ``doctor.name`` plus ``@<protocol or preset>`` off plain EGIP
(``scripted@agentclinic``), plus ``[<model>]`` when logs of that label hold different
models (``llm-direct[Qwen2.5-7B-Instruct]``; :mod:`clinenv.evaluation.labels`).
Scheduled episodes missing from a log count as not correct, and the tables say how many.

Exit codes: 0 success; 1 ``data verify`` found a present file with a wrong checksum or
record count; 2 bad arguments (including an ``--env`` id that is not an EGIP
environment), a missing or corrupt dataset, a run log that cannot be continued, an
``--out`` file that would be overwritten, or a run stopped early by a refused model
request or too many backend errors in a row (fail fast, above); 3 (:data:`EXIT_RUN_ERRORS`)
``run`` finished, but some episodes stopped with a backend error (the summary counts
them; ``--resume`` runs them again); 130 interrupted (Ctrl-C; the log keeps every
finished episode, continue with ``--resume``); 141 stdout closed early (e.g. piped into
``head``), quietly. Errors are one message on stderr, never a traceback; an argument
error is that line and where help is (``clinenv run: error: ...`` / ``Run 'clinenv run
--help' for usage.``), not the usage block. Options are never abbreviated (``--out`` is
not ``--out-dir``; :class:`~clinenv.cli.parser.CLIParser`).

``clinenv replay`` recomputes only the terminal decisions of a run log's episodes on
their fixed histories, with the full evidence interface (the rerun control) or without
observations or candidate labels (EGIP Table 3 Panel B); see :mod:`clinenv.cli.replay`.

Each command turns its flags into settings objects once (one function per flag group:
:func:`~clinenv.cli.llm_setup.llm_config`, :func:`~clinenv.cli.ray_run.ray_config`,
:func:`~clinenv.cli.doctors.wrapper_config`, :func:`~clinenv.cli.env_choice.
env_config`...) and passes those on: the parsed flags go no further than the
command's own module.

Modules: :mod:`clinenv.cli.run` (``run``), :mod:`clinenv.cli.replay` (``replay``),
:mod:`clinenv.cli.env_choice` (``--env``),
:mod:`clinenv.cli.llm_setup` (the LLM options and models), :mod:`clinenv.cli.doctors`
(``--doctor``), :mod:`clinenv.cli.run_summary` (the summary text), :mod:`clinenv.cli.data`
(``data``), :mod:`clinenv.cli.evaluate` (``eval``, ``compare``), :mod:`clinenv.cli.cdeg`
(``cdeg build``, ``cdeg inspect``), :mod:`clinenv.cli.export` (``export``: episodes as
training data, :mod:`clinenv.export`), :mod:`clinenv.cli.argtypes`
and :mod:`clinenv.cli.errors` (:class:`CLIError`, exit codes); this module holds the
top-level parser and :func:`main`, and re-exports their public names.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from clinenv.cli.audit import add_audit_parser
from clinenv.cli.cdeg import add_cdeg_parser
from clinenv.cli.data import add_data_parser, cmd_data_download, cmd_data_list, cmd_data_verify
from clinenv.cli.doctors import DOCTOR_CHOICES, DOCTORS
from clinenv.cli.env_choice import AUTO_FALLBACK, AUTO_PREFERRED, choose_env
from clinenv.cli.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_RUN_ERRORS,
    EXIT_USAGE,
    EXIT_VERIFY_FAILED,
    CLIError,
)
from clinenv.cli.evaluate import SIMILARITY_ENCODERS, add_eval_parsers, cmd_compare, cmd_eval
from clinenv.cli.export import add_export_parser
from clinenv.cli.llm_setup import BACKENDS, LLMConfig, LLMSeats, check_llm_config, llm_config
from clinenv.cli.parser import CLIParser
from clinenv.cli.replay import add_replay_parser
from clinenv.cli.report import add_report_parser
from clinenv.cli.run import MESSAGE_CHARS, aborted_message, add_run_parser, cmd_run
from clinenv.cli.run_summary import format_llm_totals, format_summary
from clinenv.cli.serve import add_serve_parser

__all__ = [
    "AUTO_FALLBACK", "AUTO_PREFERRED", "BACKENDS", "DOCTORS", "DOCTOR_CHOICES",
    "EXIT_BROKEN_PIPE", "EXIT_INTERRUPTED", "EXIT_RUN_ERRORS", "EXIT_USAGE",
    "EXIT_VERIFY_FAILED", "MESSAGE_CHARS", "SIMILARITY_ENCODERS", "CLIError", "LLMConfig",
    "LLMSeats", "aborted_message", "build_parser", "check_llm_config", "choose_env", "cmd_compare",
    "cmd_data_download", "cmd_data_list", "cmd_data_verify", "cmd_eval", "cmd_run",
    "format_llm_totals", "format_summary", "llm_config", "main",
]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``clinenv`` (sub-commands ``run``, ``replay``, ``data``,
    ``eval``, ``compare``, ``cdeg``, ``export``, ``report``, ``audit``); each parsed
    namespace carries the command's handler as ``func``. It and every sub-parser are
    :class:`~clinenv.cli.parser.CLIParser`: no option abbreviations, and an argument
    error is one line plus where help is (exit 2)."""
    parser = CLIParser(
        prog="clinenv",
        description="Clinical diagnosis cases as EGIP environments: run doctor policies, "
                    "manage datasets and report on run logs.")
    from clinenv import __version__

    parser.add_argument("--version", action="version", version=f"clinenv {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=CLIParser,
                                metavar="{run,replay,data,eval,compare,cdeg,export,report,audit,serve}")
    sub.required = True
    add_run_parser(sub)
    add_replay_parser(sub)
    add_data_parser(sub)
    add_eval_parsers(sub)
    add_cdeg_parser(sub)
    add_export_parser(sub)
    add_report_parser(sub)
    add_audit_parser(sub)
    add_serve_parser(sub)
    return parser


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
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print("clinenv: interrupted; finished episodes are in the log, continue with "
              "--resume", file=sys.stderr)
        return EXIT_INTERRUPTED
