"""``--plot`` figures of ``clinenv compare`` / ``clinenv eval``: what they draw, how big
they are, and ``--plot`` without matplotlib.

The comparison logs are written by real ``clinenv run`` invocations (the scripted doctor
on the demo set: plain, exploring, and under the AgentClinic protocol); the many-strata
accuracy logs are hand-made (clinenv/testing/eval_logs.py). The CLI runs in-process
(:func:`clinenv.cli.main`), with the figures it saves recorded on the way out, so each
one is compared with the table the same call printed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import clinenv.evaluation.plots as plots
from clinenv.cli import main
from clinenv.testing.cli_calls import read_csv, run_cli
from clinenv.testing.eval_logs import log_lines, write_log

pytest.importorskip("matplotlib")
import matplotlib.image  # noqa: E402

MAX_PX = 1600


@pytest.fixture(scope="module")
def demo_logs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scripted")
    for name, args in {"base": ["--env", "EGIP-Demo-v0"],
                       "explore": ["--env", "EGIP-Demo-v0", "--exploration", "0.3"],
                       "native": ["--env", "AgentClinic-Demo-v0"]}.items():
        run_cli(folder, "run", *args, "--repetitions", "3", "--quiet", "--out",
                f"{name}.jsonl")
    return folder


@pytest.fixture
def saved(monkeypatch):
    """``{png path: figure}`` of every figure the plots module saves."""
    figures = {}
    real = plots._save

    def record(fig, path):
        figures[Path(path).name] = fig
        return real(fig, path)

    monkeypatch.setattr(plots, "_save", record)
    return figures


def text_table(stdout: str, title: str) -> list[dict[str, str]]:
    """The rows of the printed table whose title starts with ``title``, as dicts of the
    header's names, cut at the column spans of its ``----`` line."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    header, dashes = lines[start + 1], lines[start + 2]
    spans = [m.span() for m in re.finditer(r"-+", dashes)]
    names = [header[a:b].strip() for a, b in spans]
    rows = []
    for line in lines[start + 3:]:
        if not line or line.startswith("  "):
            break
        cells = [line[a:b].strip() for a, b in spans[:-1]] + [line[spans[-1][0]:].strip()]
        rows.append(dict(zip(names, cells, strict=True)))
    return rows


def png_size(path: Path) -> tuple[int, int]:
    """``(width, height)`` in pixels, read back from the file."""
    height, width = matplotlib.image.imread(path).shape[:2]
    return width, height


def axes_named(fig, label):
    (ax,) = [a for a in fig.axes if a.get_label() == label]
    return ax


def drawn_rows(fig):
    """Per forest row ``i``: ``(Δ, (low, high) or None, stats text)`` read back from
    the figure's artists."""
    ax = axes_named(fig, "delta")
    (points,) = [line for line in ax.get_lines() if line.get_gid() == "delta"]
    (ci,) = [c for c in ax.collections if c.get_gid() == "ci"]
    assert list(points.get_ydata()) == list(range(len(points.get_xdata())))
    spans = {}
    for (x0, y0), (x1, y1) in ci.get_segments():
        assert y0 == y1
        spans[int(y0)] = (x0, x1)
    stats = [t.get_text() for t in axes_named(fig, "delta stats").get_yticklabels()]
    return [(x, spans.get(i), stats[i]) for i, x in enumerate(points.get_xdata())]


def check_against_table(fig, rows, csv_rows):
    drawn = drawn_rows(fig)
    assert len(drawn) == len(rows) == len(csv_rows)
    for (delta, span, stats), row, exact in zip(drawn, rows, csv_rows, strict=True):
        assert f"{delta:+.2f}" == row["Delta (pp)"]
        assert delta == pytest.approx(float(exact["difference_pp"]), abs=1e-6)
        if row["Paired 95% CI"] == "-":
            assert span is None and "no CI" in stats
        else:
            assert f"[{span[0]:.2f}, {span[1]:.2f}]" == row["Paired 95% CI"]
            assert span == pytest.approx((float(exact["ci_low"]), float(exact["ci_high"])),
                                         abs=1e-6)
        assert stats.replace("\n", " ") == (
            f"{row['Delta (pp)']} {row['Paired 95% CI'] if span else 'no CI'} "
            f"Holm p {row['Holm p']}")
    bars = axes_named(fig, "correction/regression").patches
    for gid, column in (("correction", "Correction (%)"), ("regression", "Regression (%)")):
        widths = [b.get_width() for b in bars if b.get_gid() == gid]
        for width, row in zip(widths, rows, strict=True):
            rate = row[column].split()[0]
            assert (f"{width:.2f}" == rate) or (rate == "-" and width == 0.0)


def test_compare_plot_draws_the_printed_delta_ci_and_holm_p(demo_logs, saved, capsys,
                                                            monkeypatch):
    monkeypatch.chdir(demo_logs)
    assert main(["compare", "base.jsonl", "explore.jsonl", "native.jsonl", "--plot",
                 "--resamples", "2000", "--flips", "2000", "--out-dir", "out"]) == 0
    out = capsys.readouterr().out
    rows = text_table(out, "Paired comparisons")
    assert [(r["Method"], r["Baseline"]) for r in rows] == [
        ("scripted-explore0.3", "scripted"), ("scripted@agentclinic", "scripted")]
    check_against_table(saved["comparison.png"], rows,
                        read_csv(demo_logs / "out" / "comparison.csv"))
    assert "out/comparison.png" in out
    width, height = png_size(demo_logs / "out" / "comparison.png")
    assert 1000 <= width <= MAX_PX and height >= 300
    assert not (demo_logs / "out" / "correction_regression.png").exists()


def test_compare_by_plot_is_readable_and_matches_its_table(demo_logs, saved, capsys,
                                                           monkeypatch):
    monkeypatch.chdir(demo_logs)
    assert main(["compare", "base.jsonl", "explore.jsonl", "native.jsonl", "--by",
                 "specialty", "--plot", "--resamples", "1000", "--flips", "1000",
                 "--out-dir", "by"]) == 0
    out = capsys.readouterr().out
    rows = text_table(out, "Paired comparisons against the baseline by stratum")
    assert len(rows) >= 20  # 12 specialties x 2 pairs, less strata a run lacks
    fig = saved["comparison_by_specialty.png"]
    check_against_table(fig, rows, read_csv(demo_logs / "by" / "comparison_by_specialty.csv"))
    assert any(span is None for _, span, _ in drawn_rows(fig))  # single-case strata
    width, height = png_size(demo_logs / "by" / "comparison_by_specialty.png")
    assert width <= MAX_PX and height >= 40 * len(rows)
    # legible: row labels at 7 pt or more that do not overlap one another
    renderer = fig.canvas.get_renderer()
    for name in ("delta", "delta stats"):
        labels = axes_named(fig, name).get_yticklabels()
        assert min(t.get_fontsize() for t in labels) >= 7
        boxes = sorted((t.get_window_extent(renderer) for t in labels), key=lambda b: b.y0)
        assert all(a.y1 <= b.y0 + 0.5 for a, b in zip(boxes, boxes[1:], strict=False))
    assert all(len(line) <= 32 for t in axes_named(fig, "delta").get_yticklabels()
               for line in t.get_text().splitlines())


# ------------------------------------------------------ eval --by with many strata
STRATA = ["cardiology", "infectious disease", "gastroenterology and hepatology",
          "neurology", "pulmonology and critical care", "nephrology", "hematology",
          "endocrinology and metabolism", "dermatology", "rheumatology", "pediatrics",
          "obstetrics and gynecology", "psychiatry", "general surgery"]
METHODS = ["scripted", "llm-direct[Qwen2.5-7B-Instruct]", "llm-vote[Qwen2.5-7B-Instruct]",
           "llm-full[Llama-3.1-8B-Instruct]", "cdeg-wrapped-llm-direct-with-a-long-name",
           "native@agentclinic"]


@pytest.fixture
def strata_logs(tmp_path):
    """Six methods x 14 one-case strata x 3 repetitions: method ``m`` is correct on case
    ``c`` in repetition ``r`` when ``(7 m + 3 c + (m + 1) r) % 5 < 3``."""
    paths = []
    for m, method in enumerate(METHODS):
        grid = {f"c{c:02d}": "".join("C" if (7 * m + 3 * c + (m + 1) * r) % 5 < 3 else "W"
                                     for r in range(3)) for c in range(len(STRATA))}
        strata = {f"c{c:02d}": [s] for c, s in enumerate(STRATA)}
        paths.append(write_log(tmp_path / f"m{m}.jsonl",
                               log_lines("alpha", method, grid, strata=strata)))
    return paths


def test_eval_by_plot_with_many_strata_wraps_onto_rows(strata_logs, tmp_path, saved,
                                                       capsys):
    out_dir = tmp_path / "rep"
    args = [f"{name}={path}" for name, path in zip(METHODS, strata_logs, strict=True)]
    assert main(["eval", *args, "--by", "question_type", "--plot", "--resamples", "200",
                 "--out-dir", str(out_dir)]) == 0
    capsys.readouterr()
    width, height = png_size(out_dir / "accuracy_by_question_type.png")
    assert width <= MAX_PX
    fig = saved["accuracy_by_question_type.png"]
    panels = [ax for ax in fig.axes if ax.get_xticklabels()]
    assert len(panels) >= 3  # 14 groups of 6 bars do not fit one row
    assert height >= 300 * len(panels) and len(panels) <= 5
    # every bar is the table's accuracy of its method and stratum, none left out
    expected = {(r["method"], r["stratum"]): float(r["accuracy_mean"])
                for r in read_csv(out_dir / "accuracy_by_question_type.csv")}
    assert len(expected) == len(METHODS) * len(STRATA)
    # by hand (fixture rule): m 0, c 0: r % 5 = 0, 1, 2, all < 3 -> 100; m 1, c 2:
    # (13 + 2 r) % 5 = 3, 0, 2 -> 2 of 3; m 5, c 1: (38 + 6 r) % 5 = 3, 4, 0 -> 1 of 3
    assert expected[(METHODS[0], STRATA[0])] == pytest.approx(100.0)
    assert expected[(METHODS[1], STRATA[2])] == pytest.approx(200 / 3)
    assert expected[(METHODS[5], STRATA[1])] == pytest.approx(100 / 3)
    drawn = {}
    renderer = fig.canvas.get_renderer()
    for ax in panels:
        ticks = [" ".join(t.get_text().split()) for t in ax.get_xticklabels()]
        for container in ax.containers:
            if not hasattr(container, "patches"):
                continue
            for bar in container.patches:
                group = ticks[round(bar.get_x() + bar.get_width() / 2)]
                dataset, stratum = group.split(" ", 1)
                assert dataset == "alpha"
                drawn[(container.get_label(), stratum)] = bar.get_height()
        labels = ax.get_xticklabels()
        assert min(t.get_fontsize() for t in labels) >= 7
        boxes = sorted((t.get_window_extent(renderer) for t in labels), key=lambda b: b.x0)
        assert all(a.x1 <= b.x0 + 0.5 for a, b in zip(boxes, boxes[1:], strict=False))
    assert drawn.keys() == expected.keys()
    for key, value in expected.items():
        assert drawn[key] == pytest.approx(value, abs=1e-6), key  # CSV: 6 decimals
    legend = [t.get_text().replace("\n", "") for t in fig.legends[0].get_texts()]
    assert legend == METHODS


TWELVE = ["allergy and immunology", "cardiology", "endocrinology",
          "gastroenterology and hepatology", "hematology", "infectious disease", "nephrology",
          "neurology", "obstetrics and gynecology", "ophthalmology",
          "pulmonology and critical care", "rheumatology"]


def test_eval_by_plot_wraps_words_whole_balances_rows_and_shows_n(tmp_path, saved, capsys):
    """One method over 12 strata (sizes 1..12 cases): the rows hold 6 + 6 groups (not
    10 + 2), no tick label cuts a word ("endocrinolog" / "y"), and every bar is
    annotated with its n, the table's case count."""
    grid, strata = {}, {}
    for s, name in enumerate(TWELVE):
        for k in range(s + 1):
            case = f"s{s:02d}c{k:02d}"
            grid[case] = "CCW"[k % 3] + "CW"[k % 2]
            strata[case] = [name]
    log = write_log(tmp_path / "one.jsonl", log_lines("medqa", "scripted", grid,
                                                      strata=strata))
    out_dir = tmp_path / "rep"
    assert main(["eval", str(log), "--by", "question_type", "--plot", "--resamples", "200",
                 "--out-dir", str(out_dir)]) == 0
    capsys.readouterr()
    fig = saved["accuracy_by_question_type.png"]
    panels = [ax for ax in fig.axes if ax.get_xticklabels()]
    assert [len(ax.get_xticklabels()) for ax in panels] == [6, 6]
    words = {w for name in ["medqa", *TWELVE] for w in name.split()}
    renderer = fig.canvas.get_renderer()
    shown = []
    for ax in panels:
        labels = ax.get_xticklabels()
        for label in labels:
            dataset, *lines = label.get_text().split("\n")
            assert dataset == "medqa"
            # every line is whole words of the label: none cut inside a word
            assert all(w in words for line in lines for w in line.split()), lines
            shown.append(" ".join(lines))
        boxes = sorted((t.get_window_extent(renderer) for t in labels), key=lambda b: b.x0)
        assert all(a.x1 <= b.x0 + 0.5 for a, b in zip(boxes, boxes[1:], strict=False))
    assert shown == TWELVE  # sorted strata, in order, none left out
    rows = {r["stratum"]: r for r in read_csv(out_dir / "accuracy_by_question_type.csv")}
    notes = {}
    for ax in panels:
        ticks = [" ".join(t.get_text().split("\n")[1:]) for t in ax.get_xticklabels()]
        (bars,) = [c for c in ax.containers if hasattr(c, "patches")]
        texts = [t for t in ax.texts if (t.get_gid() or "").startswith("n=")]
        assert len(texts) == len(bars.patches)
        for bar, text in zip(bars.patches, texts, strict=True):
            stratum = ticks[round(bar.get_x() + bar.get_width() / 2)]
            value, n = text.get_text().split("\n")
            assert float(value) == pytest.approx(bar.get_height(), abs=0.05)
            notes[stratum] = n
    assert notes == {name: f"n={rows[name]['n_cases']}" for name in TWELVE}
    assert notes["rheumatology"] == "n=12"


# ------------------------------------------------------------ without matplotlib
@pytest.fixture
def no_matplotlib(monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError


@pytest.mark.parametrize("command", ["compare", "eval"])
def test_plot_without_matplotlib_writes_the_tables_first(demo_logs, tmp_path, capsys,
                                                         no_matplotlib, command):
    out_dir = tmp_path / "out"
    flips = ["--flips", "200"] if command == "compare" else []
    code = main([command, str(demo_logs / "base.jsonl"), str(demo_logs / "explore.jsonl"),
                 "--plot", "--by", "specialty", "--resamples", "200", *flips,
                 "--out-dir", str(out_dir)])
    captured = capsys.readouterr()
    assert code == 2
    stem = "comparison" if command == "compare" else "accuracy"
    written = [out_dir / f"{stem}.md", out_dir / f"{stem}.csv",
               out_dir / f"{stem}_by_specialty.md", out_dir / f"{stem}_by_specialty.csv"]
    assert all(p.is_file() for p in written)
    assert not list(out_dir.glob("*.png"))
    assert "scripted-explore0.3" in captured.out  # the tables were printed
    assert captured.err == (
        "clinenv: error: --plot: plots need matplotlib, which is not installed: pip "
        "install -e '.[plot]' in a clinenv clone; the tables were written ("
        + ", ".join(str(p) for p in written) + "), the figures were not\n")
