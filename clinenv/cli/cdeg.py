"""``clinenv cdeg build`` and ``clinenv cdeg inspect``: the CDEG graph file from run logs,
and a look inside it (CDEG paper, "Counterfactual Diagnostic Evidence Graph
Construction").

Exit codes of ``build``: 0 a graph with revision edges, 1 a graph without one, 2 bad
input or every verifier call failed (docs/cdeg.md).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

from clinenv.cli.argtypes import count, number
from clinenv.cli.cdeg_run import add_cdeg_run_arguments, cdeg_wrapper
from clinenv.cli.cdeg_scale import add_scale_parser
from clinenv.cli.errors import CLIError
from clinenv.cli.llm_setup import (
    BACKENDS,
    LLM_HELP,
    LLMSeats,
    add_connection_arguments,
    llm_config,
)
from clinenv.wrappers.cdeg.thresholds import (
    DIAGNOSIS_THRESHOLD,
    PAIR_THRESHOLD,
)

__all__ = ["add_cdeg_parser", "add_cdeg_run_arguments", "cdeg_wrapper", "cmd_cdeg_build",
           "cmd_cdeg_inspect", "default_graph_path", "format_build_summary",
           "format_inspect"]


def add_cdeg_parser(sub: Any) -> None:
    """Add the ``cdeg`` sub-command (``build``, ``inspect``, ``scale``) to ``sub``."""
    cdeg = sub.add_parser("cdeg", help="build or inspect a CDEG graph file",
                          description="Build a CDEG graph from run logs, or inspect one.")
    inner = cdeg.add_subparsers(dest="cdeg_command", metavar="{build,inspect,scale}")
    inner.required = True
    build = inner.add_parser("build", help="build a graph from run logs")
    build.add_argument("logs", nargs="+", type=Path, metavar="RUN.jsonl",
                       help="run logs of clinenv run (K repetitions per case)")
    build.add_argument("--out", type=Path, default=None, metavar="FILE",
                       help="graph file to write (JSON; default: runs/<first log's "
                            "name>.cdeg.json; a missing folder is created)")
    build.add_argument("--force", action="store_true", help="overwrite an existing --out")
    build.add_argument("--similarity", default="lexical", metavar="SPEC",
                       help="diagnosis merging: lexical (default, no model), sapbert, "
                            "minilm, a hub id or a local model folder (optionally :cls / "
                            ":mean)")
    build.add_argument("--pair-similarity", default=None, metavar="SPEC",
                       help="Eq. 4 trajectory pairing (default: the --similarity spec; "
                            "encoders read up to 512 tokens of each history)")
    build.add_argument("--verifier", choices=("lexical", "llm"), default="lexical",
                       help="counterfactual verifier (default: lexical, deterministic)")
    build.add_argument("--extractor", choices=("deterministic", "llm"),
                       default="deterministic",
                       help="evidence-atom extractor (default: deterministic)")
    build.add_argument("--pair-threshold", type=number(-1.0), default=PAIR_THRESHOLD,
                       metavar="X", help=f"Eq. 4 pairing threshold (default: {PAIR_THRESHOLD})")
    build.add_argument("--diagnosis-threshold", type=number(-1.0), default=None, metavar="X",
                       help=f"diagnosis merge threshold (default: {DIAGNOSIS_THRESHOLD}; "
                            "0.9 with lexical)")
    build.add_argument("--min-overlap", type=number(0.0, above=True), default=None,
                       metavar="X", help="--verifier lexical: smallest share of a "
                                         "diagnosis's words that counts (default: 0.2)")
    build.add_argument("--verifier-max-tokens", type=count(1), default=None, metavar="N",
                       help="--verifier llm: reply budget (default: 64; reasoning models "
                            "need several hundred)")
    build.add_argument("--no-validation", action="store_true",
                       help="keep every candidate (Table 3: w/o counterfactual validation)")
    for role in ("missing", "ignored", "blocking"):
        build.add_argument(f"--no-{role}", action="store_true",
                           help=f"leave out {role}-evidence candidates (Table 3)")
    build.add_argument("--max-candidates", type=count(1), default=None, metavar="N",
                       help="test at most N candidates of each set per pair")
    build.add_argument("--seed", type=count(0), default=0, metavar="S",
                       help="seed of the LLM verifier and extractor calls (default: 0)")
    build.add_argument("--icd-map", type=Path, default=None, metavar="FILE",
                       help="ICD mapping (docs/cdeg.md): a trajectory whose diagnosis and "
                            "target both map to a code is a success iff the codes agree "
                            "(CDEG Eq. 3)")
    build.add_argument("--quiet", action="store_true", help="no progress bar")
    build.add_argument("--allow-privileged", action="store_true",
                       help="build from logs of a privileged doctor (privileged: true, e.g. "
                            "--doctor teacher; refused by default: a graph learned from "
                            "trajectories driven by the target is poisoned)")
    llm = build.add_argument_group("LLM (--verifier llm, --extractor llm)")
    helps = LLM_HELP
    llm.add_argument("--backend", choices=BACKENDS, default="openai", help=helps["backend"])
    llm.add_argument("--base-url", default=None, metavar="URL", help=helps["base_url"])
    llm.add_argument("--model", default=None, metavar="M", help=helps["model"])
    llm.add_argument("--temperature", type=number(0.0), default=0.0, metavar="T",
                     help="verifier and extractor sampling temperature (default: 0)")
    add_connection_arguments(llm)
    build.set_defaults(func=cmd_cdeg_build)
    inspect = inner.add_parser("inspect", help="counts and top revisions of a graph file")
    inspect.add_argument("graph", type=Path, metavar="graph.json")
    inspect.add_argument("--top", type=count(1), default=5, metavar="N",
                         help="revisions to show (default: 5)")
    inspect.set_defaults(func=cmd_cdeg_inspect)
    add_scale_parser(inner, build)


#: A graph file written by ``cdeg build`` starts with its format tag.
_GRAPH_HEAD = re.compile(r'\A\ufeff?\s*\{\s*"format"\s*:\s*"(clinenv\.cdeg/[^"]*)"')


def graph_format(path: Path) -> str | None:
    """The format tag (``clinenv.cdeg/1``) when ``path`` starts like a CDEG graph file,
    else ``None`` (read: the first 256 bytes)."""
    with path.open("rb") as fh:
        head = fh.read(256).decode("utf-8", errors="replace")
    found = _GRAPH_HEAD.match(head)
    return found[1] if found else None


def read_icd_map(path: Path | None) -> Any:
    """The :class:`~clinenv.icd_map.IcdMap` of ``--icd-map FILE``, or ``None``.

    Raises:
        CLIError: the file is missing, a folder, or malformed (file, line, column named).
    """
    if path is None:
        return None
    from clinenv.icd_map import IcdMapError, load_icd_map

    try:
        return load_icd_map(path)
    except FileNotFoundError:
        raise CLIError(f"--icd-map {path}: no such file") from None
    except (OSError, IcdMapError) as err:
        raise CLIError(f"--icd-map: {err}") from None


def default_graph_path(log: Path) -> Path:
    """The default ``--out`` of ``cdeg build``: ``runs/<log name without .jsonl>.cdeg.json``
    (``runs/construct.jsonl`` -> ``runs/construct.cdeg.json``), relative to the working
    folder."""
    name = log.name[:-len(".jsonl")] if log.name.endswith(".jsonl") else log.stem
    return Path("runs", f"{name or 'graph'}.cdeg.json")


def _missing_folder(out: Path, what: str | None = None) -> Path | None:
    """The folder of ``out`` when it does not exist yet (it is created on save), else
    ``None``. ``what`` names ``out`` in messages (default ``--out OUT``; the default
    graph file is named as such, since no ``--out`` was typed).

    Raises:
        CLIError: ``out`` is a folder, or the nearest existing ancestor of its folder is
            not a folder (the folder cannot be created).
    """
    what = what or f"--out {out}"
    if out.is_dir():
        raise CLIError(f"{what} is a folder; give a file path (e.g. {out / 'graph.json'})"
                       if what.startswith("--out ") else
                       f"{what} is a folder; give the graph file with --out FILE")
    if out.parent.is_dir():
        return None
    for above in (out.parent, *out.parent.parents):
        if above.exists():
            if not above.is_dir():
                raise CLIError(f"{what}: {above} is a file, not a folder" + (
                    "" if above == out.parent else f", so {out.parent} cannot be created"))
            break
    return out.parent


def exists_message(out: Path, *, default_of: Path | None = None) -> str:
    """The refusal of a ``cdeg build`` whose graph file exists (without ``--force``).

    With ``default_of`` (the first log: no ``--out`` was given, ``out`` is its default
    path) the message names the default and how to choose another, without claiming
    that ``--out`` was typed."""
    if default_of is None:
        return f"--out {out} exists; use --force to overwrite it"
    return (f"{out} exists (the default graph file for {default_of}); choose another "
            "file with --out FILE, or pass --force to overwrite it")


def _check_build_args(args: argparse.Namespace) -> tuple[Path, Path | None]:
    """Check ``cdeg build``'s flags; ``(graph file, folder it creates or None)``: ``--out``
    or the default beside the first log. The flags are left as parsed.

    Raises:
        CLIError: the graph file exists without ``--force``, a log is missing or is a
            graph, or the LLM and verifier flags do not go together.
    """
    default_of = None
    out = args.out
    if out is None:
        out = default_graph_path(args.logs[0])
        default_of = args.logs[0]
    created_folder = _missing_folder(out, None if default_of is None else
                                     f"the default graph file {out}")
    if out.exists() and not args.force:
        raise CLIError(exists_message(out, default_of=default_of))
    for path in args.logs:
        if not path.is_file():
            raise CLIError(f"{path}: no such run log")
        tag = graph_format(path)
        if tag is not None:
            raise CLIError(f"{path}: this is a CDEG graph ({tag}), not a run log; give the "
                           "clinenv run logs it is built from")
    uses_llm = "llm" in (args.verifier, args.extractor)
    if uses_llm and not args.model:
        raise CLIError("--verifier llm / --extractor llm need --model M")
    if uses_llm and args.backend == "openai" and not args.base_url:
        raise CLIError("--verifier llm / --extractor llm with --backend openai need "
                       "--base-url URL (e.g. http://127.0.0.1:8000/v1)")
    if not uses_llm and (args.model or args.base_url):
        raise CLIError("--model / --base-url are used only with --verifier llm or "
                       "--extractor llm")
    if args.min_overlap is not None and (args.verifier != "lexical" or args.min_overlap > 1):
        raise CLIError("--min-overlap is a share in (0, 1] of --verifier lexical")
    if args.verifier_max_tokens is not None and args.verifier != "llm":
        raise CLIError("--verifier-max-tokens is used only with --verifier llm")
    return out, created_folder


def cmd_cdeg_build(args: argparse.Namespace) -> int:
    """``clinenv cdeg build``: exit 0, 1 (a graph without revisions) or 2
    (docs/cdeg.md)."""
    from clinenv.embeddings.factory import PAIR_MAX_LENGTH, make_similarity
    from clinenv.embeddings.lexical import LEXICAL_THRESHOLDS
    from clinenv.runlog import RunLogError
    from clinenv.wrappers.cdeg.build import BuildConfig, build_graph
    from clinenv.wrappers.cdeg.extractors import DeterministicExtractor, LLMExtractor
    from clinenv.wrappers.cdeg.verifier import LexicalVerifier, LLMVerifier

    out, created_folder = _check_build_args(args)
    icd_map = read_icd_map(args.icd_map)
    pair_spec = args.pair_similarity or args.similarity
    try:
        similarity = make_similarity(args.similarity)
        pair_similarity = make_similarity(pair_spec, max_length=PAIR_MAX_LENGTH)
    except (ValueError, ImportError, OSError) as err:
        raise CLIError(f"--similarity / --pair-similarity: {err}") from None
    threshold = args.diagnosis_threshold
    if threshold is None:
        threshold = (LEXICAL_THRESHOLDS["diagnosis"] if args.similarity.startswith("lexical")
                     else DIAGNOSIS_THRESHOLD)
    setup = LLMSeats(llm_config(args))
    model = setup.model(args.model) if args.model else None
    if args.verifier == "llm":
        verifier: Any = LLMVerifier(model, seed=args.seed, temperature=args.temperature,
                                    max_tokens=args.verifier_max_tokens)
    else:
        verifier = LexicalVerifier(**({} if args.min_overlap is None
                                      else {"min_overlap": args.min_overlap}))
    extractor: Any = (LLMExtractor(model, seed=args.seed) if args.extractor == "llm"
                      else DeterministicExtractor())
    start = time.perf_counter()
    try:
        config = BuildConfig(
            pair_threshold=args.pair_threshold, diagnosis_threshold=threshold,
            validate=not args.no_validation, use_missing=not args.no_missing,
            use_ignored=not args.no_ignored, use_blocking=not args.no_blocking,
            max_candidates_per_pair=args.max_candidates)
        result = build_graph(args.logs, extractor=extractor, verifier=verifier,
                             similarity=similarity, pair_similarity=pair_similarity,
                             config=config, progress=not args.quiet and sys.stderr.isatty(),
                             icd_map=icd_map, allow_privileged=args.allow_privileged)
    except (RunLogError, FileNotFoundError, ValueError) as err:
        raise CLIError(str(err)) from None
    finally:
        setup.close()
    try:
        result.graph.save(out)
    except OSError as err:
        raise CLIError(f"--out {out}: {err.strerror or err}") from None
    print(format_build_summary(result.report, out, time.perf_counter() - start))
    if created_folder is not None:
        print(f"  created       folder {created_folder} (it did not exist)")
    if icd_map is not None:
        print(f"  icd map       {args.icd_map}: {result.report['icd_outcomes']} trajectory "
              "outcomes decided by ICD code")
    if getattr(extractor, "n_fallbacks", 0):
        print(f"  extractor fallbacks {extractor.n_fallbacks} (LLM replies unusable)")
    return _build_status(result.report, out)


#: :func:`~clinenv.wrappers.cdeg.build.empty_stage` of logs without a case that both
#: failed and succeeded.
NO_BOTH = "no case with both a success and a failure"
#: Added to that warning when every case was run once.
SINGLE_RUN_HINT = ("every case has 1 repetition; CDEG needs K > 1 sampled runs per case "
                   "(e.g. clinenv run --repetitions 4 --temperature 0.7, or --exploration "
                   "with the scripted doctor)")


def _build_status(report: dict[str, Any], out: Path) -> int:
    """Warnings and the exit status after a build (docs/cdeg.md)."""
    from clinenv.wrappers.cdeg.build import empty_stage, failed_verifier_calls

    truncated = report["pairing"]["truncated"]
    if truncated:
        print(f"warning: the pairing encoder truncated {truncated} trajectory texts; pairs "
              "compare only their beginnings (use a longer --pair-similarity model)",
              file=sys.stderr)
    failed, total = failed_verifier_calls(report)
    if total and failed == total:
        counters = report.get("verifier") or {}
        raise CLIError(f"every one of {total} verifier calls failed (backend errors "
                       f"{counters.get('n_backend_errors', '?')}, unreadable replies "
                       f"{counters.get('n_unparsed', '?')}, cut by max_tokens "
                       f"{counters.get('n_truncated', '?')}); {out} was written but holds "
                       "no validated evidence")
    stage = empty_stage(report)
    if stage is not None:
        if stage == NO_BOTH and report.get("max_trajectories_per_case") == 1:
            stage += f"; {SINGLE_RUN_HINT}"
        print(f"warning: {out} has 0 revisions: {stage}", file=sys.stderr)
        return 1
    return 0


def format_build_summary(report: dict[str, Any], out: Path, seconds: float) -> str:
    """The summary lines of ``cdeg build``."""
    t, p, g = report["trajectories"], report["pairing"], report["graph"]
    calls = sum(sum(v.values()) for v in report["verifier_calls"].values())
    none = sum(v.get("none", 0) for v in report["verifier_calls"].values())
    scores = p["scores"]
    spread = ("" if scores["min"] is None else
              f"; scores min {scores['min']}, median {scores['median']}, max {scores['max']}")
    counters = report.get("verifier") or {}
    verifier = ", ".join(f"{k[2:].replace('_', ' ')} {v}" for k, v in counters.items())
    lines = [
        f"  trajectories  {t['success']} success, {t['failure']} failure, "
        f"{t['abstained']} abstained, {t['unscored']} unscored "
        f"({report['errors_skipped']} error lines skipped)",
        f"  pairs         {p['pairs']} kept of {p['failed']} failed "
        f"({p['no_success']} without a success, {p['below_threshold']} below threshold, "
        f"{p['same_diagnosis']} same diagnosis{spread})",
        "  candidates    " + ", ".join(f"{k} {v}" for k, v in report["candidates"].items())
        + f" ({report['skipped_by_before']} skipped by the before preference)",
        "  validated     " + ", ".join(f"{k} {v}" for k, v in report["validated"].items())
        + f" ({report['st_order_only']} shifted with D_s first only)",
        f"  verifier      {calls} calls, {none} without a preference"
        + (f" ({verifier})" if verifier else ""),
        f"  cases         {report.get('construction_cases', '?')} construction cases "
        "(recorded in the graph)",
        f"  graph         {g['diagnoses']} diagnoses, {g['evidence']} evidence, "
        f"{g['actions']} actions, {g['revisions']} revisions",
        f"  wrote         {out} in {seconds:.2f} s",
    ]
    return "\n".join(lines)


def cmd_cdeg_inspect(args: argparse.Namespace) -> int:
    """``clinenv cdeg inspect``: exit 0, or :class:`CLIError` (exit 2)."""
    from clinenv.wrappers.cdeg.graph import CDEGraph, GraphFileError

    try:
        graph = CDEGraph.load(args.graph)
    except FileNotFoundError:
        raise CLIError(f"{args.graph}: no such graph file") from None
    except (GraphFileError, IsADirectoryError) as err:
        raise CLIError(str(err)) from None
    print(format_inspect(graph, args.top))
    return 0


#: Evidence atoms listed per role and revision by ``cdeg inspect``.
EVIDENCE_SHOWN = 8


def format_inspect(graph: Any, top: int) -> str:
    """Counts and the ``top`` revisions by support (ties: edge order) of ``graph``, each
    with up to :data:`EVIDENCE_SHOWN` evidence texts per role and their actions."""
    counts = graph.counts()
    lines = [f"{name}: {n}" for name, n in counts.items()]
    built = graph.metadata.get("construction_cases")
    if isinstance(built, dict):
        lines.append("construction cases: " + ", ".join(
            f"{len(ids)} of {dataset}" for dataset, ids in built.items()))
    edges = sorted(graph.revisions, key=lambda e: -e.support)[:top]
    if edges:
        lines.append(f"top {len(edges)} revisions by support:")
    labels = {d.node_id: d.label for d in graph.diagnoses}
    for edge in edges:
        lines.append(f"{edge.edge_id}  {labels[edge.source]} -> {labels[edge.target]}  "
                     f"support {edge.support}, cases {', '.join(edge.cases)}")
        for role in ("missing", "ignored", "blocking"):
            ids = getattr(edge, role)
            if len(ids) > EVIDENCE_SHOWN:
                lines.append(f"    {role:<8} ({len(ids)} atoms; the first {EVIDENCE_SHOWN})")
            for e_id in ids[:EVIDENCE_SHOWN]:
                actions = [graph.action_by_id[a] for a in graph.actions_for_evidence.get(
                    e_id, ())]
                via = "; ".join(f"{a.kind} {a.name}" for a in actions[:2])
                text = graph.evidence_by_id[e_id].atom.text()
                lines.append(f"    {role:<8} {text}" + (f"  [via {via}]" if via else ""))
    return "\n".join(lines)

