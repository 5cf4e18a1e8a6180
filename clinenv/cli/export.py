"""``clinenv export LOGS... --out FILE.jsonl|FILE.parquet``: run-log episodes as training
data, one row per episode (columns, formats and where the messages come from:
:mod:`clinenv.export`).

The options: ``clinenv export --help`` and docs/export.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

from clinenv.cli.errors import CLIError
from clinenv.cli.outputs import check_out_file, replaced_line


def add_export_parser(sub: Any) -> None:
    """Add the ``export`` sub-command to ``sub`` (the top-level parser's sub-parsers)."""
    export = sub.add_parser(
        "export", help="write run-log episodes as training data (JSON Lines or parquet)",
        description="One row per finished episode of the run logs: the doctor's messages, "
                    "reward, reward components, outcome, case, seed, group and "
                    "provenance (clinenv.export).")
    export.add_argument("logs", nargs="+", type=Path, metavar="LOG",
                        help="run logs written by clinenv run")
    export.add_argument("--out", type=Path, required=True, metavar="FILE",
                        help="output file: .jsonl, or .parquet (extra export)")
    export.add_argument("--format", dest="fmt", default="messages",
                        choices=("messages", "tools", "tokens"),
                        help="messages: the doctor's chat (default); tools: the tool "
                             "view's calls and results, for tool-calling models; tokens: "
                             "input_ids, assistant_mask and logprobs of a run written with "
                             "clinenv run --log-tokens")
    export.add_argument("--per-turn", action="store_true",
                        help="one row per assistant turn instead of one per episode: "
                             "prompt (the messages before it), completion (that turn) and "
                             "tools, for prompt-completion SFT (any --format)")
    export.add_argument("--delta", action="store_true",
                        help="--format messages: each user turn is only what is new since "
                             "the last action, not the whole view again (shorter rows)")
    export.add_argument("--tool-results", choices=("full", "compact"), default=None,
                        help="render the tool results (or --delta turns) with this "
                             "setting: compact gives a result and 'Round k of T.' only "
                             "(default: the run's own)")
    export.add_argument("--tool-arguments", choices=("dict", "json"), default="dict",
                        help="--format tools: a call's arguments as a dict (default; what "
                             "Hugging Face chat templates expect) or a JSON string "
                             "(OpenAI's fine-tuning format)")
    export.add_argument("--chat-template", type=Path, default=None, metavar="FILE",
                        help="warn if this chat template (a .jinja file, or a "
                             "tokenizer_config.json with chat_template) cannot render the "
                             "rows: raises, or drops tool calls as SmolLM2's ChatML does")
    export.add_argument("--allow-credentialed", action="store_true",
                        help="also export MIMIC-IV episodes (bound by its data-use "
                             "agreement: never publish the file)")
    export.add_argument("--data-dir", default=None, metavar="DIR",
                        help="folder of the datasets, for logs whose messages are rebuilt "
                             "or whose reward components are computed (logs written "
                             "before reward_components)")
    export.add_argument("--force", action="store_true",
                        help="replace an existing --out: the default now (an earlier "
                             "export is always replaced); kept so that older scripts "
                             "still run")
    export.set_defaults(func=cmd_export)


def read_chat_template(path: Path) -> str:
    """The chat template of ``path``: a template file's text, or the ``chat_template``
    string of a ``tokenizer_config.json``.

    Raises:
        CLIError: no such file, not UTF-8, or a JSON file without a ``chat_template``
            string.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise CLIError(f"--chat-template {path}: cannot read it ({err})") from None
    if path.suffix.lower() != ".json":
        return text
    try:
        template = json.loads(text).get("chat_template")
    except (ValueError, AttributeError):
        template = None
    if not isinstance(template, str):
        raise CLIError(f"--chat-template {path}: field 'chat_template' is missing or not "
                       "a string (give the tokenizer_config.json of a chat model, or a "
                       ".jinja file)")
    return template


def cmd_export(args: argparse.Namespace) -> int:
    """``clinenv export``; prints ``exported N episode(s) to FILE`` and returns 0.

    Raises:
        CLIError: a bad suffix, an ``--out`` that cannot be written or is a run log,
            parquet without ``datasets``, or a log that cannot be exported (file, line,
            field).
    """
    from clinenv.export import EXTRA_HINT, episode_rows

    out: Path = args.out
    if out.suffix.lower() not in (".jsonl", ".parquet"):
        raise CLIError(f"--out {out}: must end in .jsonl or .parquet")
    if out.is_dir():
        raise CLIError(f"--out {out} is a folder; give a file path")
    if any(out.resolve() == Path(log).resolve() for log in args.logs):
        raise CLIError(f"--out {out} is one of the run logs given; run logs are never "
                       "overwritten: give another file")
    check_out_file(out)
    if out.suffix.lower() == ".parquet":
        try:
            import datasets  # noqa: F401
        except ImportError:
            raise CLIError(f"--out {out}: parquet needs the datasets package: "
                           f"{EXTRA_HINT}; or write .jsonl") from None
    if args.fmt == "tokens":
        given = [flag for flag, on in (
            ("--delta", args.delta), ("--tool-results", args.tool_results is not None),
            ("--tool-arguments", args.tool_arguments != "dict"),
            ("--chat-template", args.chat_template is not None)) if on]
        if given:
            raise CLIError(f"{given[0]}: not with --format tokens (its rows are the logged "
                           "token ids)")
        return _export_tokens(args, out)
    template = None if args.chat_template is None else read_chat_template(args.chat_template)
    if args.delta and args.fmt == "tools":
        raise CLIError("--delta: only with --format messages (tool results are what is "
                       "new already)")
    if args.tool_results is not None and not (args.fmt == "tools" or args.delta):
        raise CLIError(f"--tool-results {args.tool_results}: only with --format tools or "
                       "--delta (a complete view shows the whole menu)")
    existed = out.is_file()
    n = _write(lambda: episode_rows(args.logs, fmt=args.fmt,
                                    allow_credentialed=args.allow_credentialed,
                                    data_dir=args.data_dir, per_turn=args.per_turn,
                                    delta=args.delta, tool_results=args.tool_results,
                                    tool_arguments=args.tool_arguments,
                                    chat_template=template), out)
    print(f"exported {n} {'turn' if args.per_turn else 'episode'}(s) to {out}")
    if existed:
        print(replaced_line(1, out.parent))
    return 0


def _export_tokens(args: argparse.Namespace, out: Path) -> int:
    """``clinenv export --format tokens``: prints ``exported N episode(s)|turn(s) to
    FILE``, then ``refused K episode(s): ...`` for each kind of refusal."""
    from clinenv.export_tokens import TokenSummary, token_rows

    existed = out.is_file()
    summary = TokenSummary()
    n = _write(lambda: token_rows(args.logs, per_turn=args.per_turn,
                                  allow_credentialed=args.allow_credentialed,
                                  data_dir=args.data_dir, summary=summary), out)
    print(f"exported {n} {'turn' if args.per_turn else 'episode'}(s) to {out}")
    if summary.not_prefix:
        print(f"refused {summary.not_prefix} episode(s): a doctor call's prompt ids do not "
              "start with the previous call's prompt and completion ids (use --per-turn)")
    if summary.no_tokens:
        print(f"refused {summary.no_tokens} episode(s): a doctor call without token ids")
    if existed:
        print(replaced_line(1, out.parent))
    return 0


def _write(rows: Any, out: Path) -> int:
    """Write the rows ``rows()`` yields to ``out`` (:func:`clinenv.export.write_rows`),
    printing each warning raised meanwhile as one ``clinenv: warning:`` line; returns
    the row count.

    Raises:
        CLIError: a run log that cannot be read (:class:`~clinenv.runlog.RunLogError`).
    """
    from clinenv.export import write_rows
    from clinenv.runlog import RunLogError

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return write_rows(rows(), out)
        except RunLogError as err:
            raise CLIError(str(err)) from None
        finally:
            for warning in caught:
                print(f"clinenv: warning: {warning.message}", file=sys.stderr)
