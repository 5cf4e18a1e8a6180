"""The report page: one self-contained HTML file (CSS, script, figures and data inline).

:func:`build_report` computes the tables, figures and episode views of run logs;
:func:`write_report` writes the page atomically (docs/report.md).
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clinenv.evaluation.runs import LogSpec, Run, RunsError
from clinenv.report.access import DUA_WARNING, is_credentialed
from clinenv.report.assets import REPORT_CSS, REPORT_JS
from clinenv.report.divergence import doctor_actions, first_divergence
from clinenv.report.episodes import AVAILABILITY_TEXT, episode_view
from clinenv.report.island import ISLAND_ID, StringTable, island_json
from clinenv.report.summary import figures, report_pairs, table_data

__all__ = ["Report", "ReportError", "build_report", "write_report"]

#: Format tag of the data island (``meta.format``).
FORMAT = "clinenv.report/1"


class ReportError(RunsError):
    """Run logs that cannot go into a report as asked; the message names file and line."""


@dataclass(frozen=True)
class Report:
    """A built report.

    Attributes:
        html: the page (UTF-8 text).
        n_episodes: episodes in the page.
        n_runs: runs (method × dataset).
        n_pairs: compared run pairs.
        warnings: what the caller should print (the data-use warning...).
    """

    html: str
    n_episodes: int
    n_runs: int
    n_pairs: int
    warnings: tuple[str, ...] = field(default=())


def _check_access(runs: Sequence[Run], allow: bool) -> bool:
    """Whether credentialed lines are present; raises :class:`ReportError` (file, line,
    field) for the first one unless ``allow``."""
    found = False
    for run in runs:
        for record, (path, line) in zip(run.records, run.sources, strict=True):
            if is_credentialed(record):
                if not allow:
                    raise ReportError(
                        f"field 'dataset' is {record.get('dataset')!r}: credentialed data "
                        "(MIMIC-IV, PhysioNet data-use agreement) is not written into a "
                        "report unless --allow-credentialed (allow_credentialed=True)",
                        path=path, line=line)
                found = True
                break
    return found


def _run_meta(run: Run) -> dict[str, Any]:
    config = run.doctor.get("config") if isinstance(run.doctor, dict) else None
    model = config.get("model") if isinstance(config, dict) else None
    return {"label": run.label, "dataset": run.dataset, "env_id": run.env_id,
            "doctor": str(run.doctor.get("name", run.label)),
            "model": model if isinstance(model, str) else None,
            "paths": list(run.paths), "n_episodes": len(run.records),
            "n_scheduled": run.n_scheduled}


def _pair_rows(base: Run, method: Run, index: dict[tuple[int, str, int], int],
               base_i: int, method_i: int) -> list[list[Any]]:
    """``[[episode of base, episode of method, first differing turn or None], ...]`` over
    the ``(case_id, repetition)`` keys both runs hold, in the baseline's order."""
    theirs = {(r["case_id"], r["repetition"]): r for r in method.records}
    rows = []
    for record in base.records:
        key = (record["case_id"], record["repetition"])
        other = theirs.get(key)
        if other is None:
            continue
        turn = first_divergence(doctor_actions(record), doctor_actions(other))
        rows.append([index[(base_i, *key)], index[(method_i, *key)], turn])
    return rows


def build_report(logs: Iterable[LogSpec | str | Path], *,
                 pairs: Sequence[tuple[str, str]] | None = None, intersect: bool = False,
                 n_resamples: int = 10_000, n_flips: int = 20_000, seed: int = 0,
                 mixed_scoring: bool = False, allow_credentialed: bool = False,
                 with_figures: bool = True, allow_privileged: bool = False) -> Report:
    """Build the report page of run logs (the tables of ``clinenv eval`` and ``compare``).

    Args:
        logs: run logs (paths, ``"LABEL=path"`` or :class:`LogSpec`).
        pairs: ``(method label, base label)`` comparisons; default: every run against the
            first log's label on its dataset.
        intersect: compare the cases both runs of a pair hold instead of refusing.
        n_resamples: case-cluster bootstrap resamples.
        n_flips: sign-flip randomizations per comparison.
        seed: seed of the bootstrap and randomization streams.
        mixed_scoring: pool and pair logs of different scoring versions.
        allow_credentialed: write MIMIC-IV episodes (the data-use warning is returned).
        with_figures: draw the figures (needs matplotlib).
        allow_privileged: report logs of a privileged doctor too.

    Returns:
        The :class:`Report`.

    Raises:
        ReportError: credentialed lines without ``allow_credentialed``.
        RunsError: a log that cannot be read or evaluated, or ``pairs`` that match no runs.
        CaseMismatchError: a pair over different case sets without ``intersect``.
        PlotDependencyError: ``with_figures`` without matplotlib.
    """
    from clinenv.evaluation.comparison import comparison_table
    from clinenv.evaluation.components import components_table, run_components
    from clinenv.evaluation.reports import accuracy_table
    from clinenv.evaluation.runs import load_runs
    from clinenv.reward_components import COMPONENTS

    runs = load_runs(logs, mixed_scoring=mixed_scoring, allow_privileged=allow_privileged)
    credentialed = _check_access(runs, allow_credentialed)
    accuracy = accuracy_table(runs)
    components = run_components(runs, strict=False)
    components_summary = components_table(runs, components, n_resamples=n_resamples,
                                          seed=seed)
    run_pairs, pair_notes = report_pairs(runs, pairs)
    comparison = (comparison_table(run_pairs, n_resamples=n_resamples, seed=seed,
                                   n_flips=n_flips, intersect=intersect,
                                   mixed_scoring=mixed_scoring)
                  if run_pairs else None)
    figs = (figures(accuracy, comparison, n_resamples=n_resamples, seed=seed)
            if with_figures else [])

    strings = StringTable()
    episodes: list[dict[str, Any]] = []
    index: dict[tuple[int, str, int], int] = {}
    for run_i, run in enumerate(runs):
        for record, source, values in zip(run.records, run.sources,
                                          components.per_run[run_i], strict=True):
            index[(run_i, record["case_id"], record["repetition"])] = len(episodes)
            episodes.append(episode_view(record, run_i, strings, source=source,
                                         components=values))
    position = {id(run): i for i, run in enumerate(runs)}
    pair_data = []
    for base, method in run_pairs:
        b, m = position[id(base)], position[id(method)]
        pair_data.append({"base": b, "method": m,
                          "rows": _pair_rows(base, method, index, b, m)})

    warnings = (DUA_WARNING,) if credentialed else ()
    data = {
        "meta": {"format": FORMAT, "credentialed": credentialed, "warnings": list(warnings),
                 "availability": AVAILABILITY_TEXT, "n_resamples": n_resamples,
                 "n_flips": n_flips, "seed": seed, "components": list(COMPONENTS)},
        "runs": [_run_meta(r) for r in runs],
        "tables": [table_data(accuracy)]
        + ([table_data(comparison, pair_notes)] if comparison is not None else [])
        + [table_data(components_summary)],
        "figures": figs,
        "pairs": pair_data,
        "strings": strings.strings,
        "episodes": episodes,
    }
    return Report(html=render_page(data), n_episodes=len(episodes), n_runs=len(runs),
                  n_pairs=len(pair_data), warnings=warnings)


def render_page(data: Any, *, title: str = "clinenv run report") -> str:
    """The HTML page around ``data`` (the data island), with the inline CSS and script."""
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # nothing may be fetched: no network at view time, whatever the data holds
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'\">",
        f"<title>{html.escape(title)}</title>",
        f"<style>{REPORT_CSS}</style>",
        "</head>",
        "<body>",
        f"<header><h1>{html.escape(title)}</h1><div id=\"warnings\"></div>"
        '<div id="runs"></div></header>',
        '<main><section id="summary"><h2>Tables</h2><div id="tables"></div>'
        '<h2>Figures</h2><div id="figures"></div></section>',
        '<section id="episodes"><h2>Episodes</h2><div id="filters"></div>'
        '<div id="episode-list"></div><div id="episode-detail"></div></section>',
        '<section id="side-by-side"><h2>Side by side</h2><div id="pair-controls"></div>'
        '<div id="pair-view"></div></section></main>',
        f'<script type="application/json" id="{ISLAND_ID}">{island_json(data)}</script>',
        f"<script>{REPORT_JS}</script>",
        "</body>",
        "</html>",
        "",
    ])


def write_report(report: Report, path: str | Path) -> Path:
    """Write ``report.html`` to ``path`` (UTF-8; folders created) whole or not at all: a
    temporary file beside it is renamed over it.

    Raises:
        OSError: the folder cannot be created or written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", errors="backslashreplace",
                  newline="\n") as out:
            out.write(report.html)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
