"""Where ``clinenv cdeg build`` writes its graph: ``runs/<first log's name>.cdeg.json``
by default (git-ignored), a missing ``--out`` folder created and reported, and an
``--out`` that cannot be a file refused before anything is built.

The construction log is the README's offline one, written by a real ``clinenv run``
(the sampling scripted doctor on the demo set, 6 repetitions); the builds run through
:func:`clinenv.cli.main` in a temporary working folder.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from clinenv.cli import main
from clinenv.cli.cdeg import default_graph_path
from clinenv.testing.cli_calls import run_cli
from clinenv.wrappers.cdeg.graph import CDEGraph

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def construct_log(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("construct")
    run_cli(folder, "run", "--env", "EGIP-Demo-v0", "--exploration", "0.5", "--exam-budget",
            "3", "--repetitions", "6", "--premature-diagnosis", "decide", "--quiet",
            "--out", "construct.jsonl")
    return folder / "construct.jsonl"


@pytest.fixture
def workdir(tmp_path, monkeypatch, construct_log) -> Path:
    shutil.copy(construct_log, tmp_path / "construct.jsonl")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def summary_lines(out: str) -> dict[str, str]:
    """``{first word: rest}`` of the build summary's indented lines."""
    return {line.split()[0]: line.split(None, 1)[1] for line in out.splitlines()
            if line.startswith("  ")}


def test_default_out_is_under_runs_and_says_it_created_the_folder(workdir, capsys):
    assert not (workdir / "runs").exists()
    assert main(["cdeg", "build", "construct.jsonl", "--quiet"]) == 0
    lines = summary_lines(capsys.readouterr().out)
    graph = workdir / "runs" / "construct.cdeg.json"
    assert lines["wrote"].startswith("runs/construct.cdeg.json in ")
    assert lines["created"] == "folder runs (it did not exist)"
    # the README's demo graph: 2 diagnoses, 19 evidence atoms, 1 revision
    assert CDEGraph.load(graph).counts()["revisions"] == 1
    assert sorted(p.name for p in workdir.iterdir()) == ["construct.jsonl", "runs"]

    # the folder exists now: no "created" line; the graph is never overwritten silently
    # no --out was typed: the message names the default file and both ways out
    assert main(["cdeg", "build", "construct.jsonl", "--quiet"]) == 2
    assert capsys.readouterr().err == (
        "clinenv: error: runs/construct.cdeg.json exists (the default graph file for "
        "construct.jsonl); choose another file with --out FILE, or pass --force to "
        "overwrite it\n")
    # the same file given as --out: named as the user's --out
    assert main(["cdeg", "build", "construct.jsonl", "--quiet", "--out",
                 "runs/construct.cdeg.json"]) == 2
    assert capsys.readouterr().err == (
        "clinenv: error: --out runs/construct.cdeg.json exists; use --force to "
        "overwrite it\n")
    assert main(["cdeg", "build", "construct.jsonl", "--quiet", "--force"]) == 0
    assert "created" not in summary_lines(capsys.readouterr().out)


def test_out_into_missing_nested_folders(workdir, capsys):
    assert main(["cdeg", "build", "construct.jsonl", "--quiet", "--out",
                 "graphs/demo/g.json"]) == 0
    lines = summary_lines(capsys.readouterr().out)
    assert lines["created"] == "folder graphs/demo (it did not exist)"
    assert lines["wrote"].startswith("graphs/demo/g.json in ")
    assert (workdir / "graphs" / "demo" / "g.json").is_file()
    assert not (workdir / "runs").exists()  # --out given: nothing under runs/


def test_out_that_cannot_be_a_file_is_refused_before_the_build(workdir, capsys):
    (workdir / "afile").write_text("not a folder\n", encoding="utf-8")
    (workdir / "graphs").mkdir()
    cases = {
        "afile/g.json": "--out afile/g.json: afile is a file, not a folder",
        "afile/sub/g.json": "--out afile/sub/g.json: afile is a file, not a folder, so "
                            "afile/sub cannot be created",
        "graphs": "--out graphs is a folder; give a file path (e.g. graphs/graph.json)",
    }
    for out, message in cases.items():
        assert main(["cdeg", "build", "construct.jsonl", "--quiet", "--out", out]) == 2
        captured = capsys.readouterr()
        assert captured.err == f"clinenv: error: {message}\n"
        assert captured.out == ""  # refused before building: no summary
    assert sorted(p.name for p in workdir.iterdir()) == ["afile", "construct.jsonl",
                                                         "graphs"]
    assert not any((workdir / "graphs").iterdir())


def test_default_graph_path_and_that_the_repository_ignores_it():
    assert default_graph_path(Path("runs/construct.jsonl")) == Path(
        "runs/construct.cdeg.json")
    assert default_graph_path(Path("/data/logs/medqa.llm.jsonl")) == Path(
        "runs/medqa.llm.cdeg.json")
    assert default_graph_path(Path("a/b.log")) == Path("runs/b.cdeg.json")
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    ignored = subprocess.run(["git", "check-ignore", "-q", "runs/construct.cdeg.json"],
                             cwd=ROOT, capture_output=True)
    assert ignored.returncode == 0  # runs/ is in .gitignore


def test_run_with_a_graph_of_no_revisions_warns_in_one_line(workdir, capsys):
    """``clinenv run --cdeg`` with an empty graph runs the unwrapped doctor: one warning
    line on stderr says so; a graph with revisions gets none."""
    from clinenv.cli.cdeg_run import empty_graph_warning

    assert main(["run", "--env", "EGIP-Demo-v0", "--quiet", "--out", "one.jsonl"]) == 0
    assert main(["cdeg", "build", "one.jsonl", "--quiet", "--out", "empty.json"]) == 1
    assert main(["cdeg", "build", "construct.jsonl", "--quiet", "--out", "full.json"]) == 0
    capsys.readouterr()
    expected = ("warning: --cdeg empty.json has 0 revisions: the CDEG wrapper never "
                "intervenes, so this run is the unwrapped doctor's; `clinenv cdeg build` "
                "says which stage left the graph empty")
    assert empty_graph_warning(CDEGraph.load(workdir / "empty.json"), "empty.json") == expected
    assert empty_graph_warning(CDEGraph.load(workdir / "full.json"), "full.json") is None
    for graph, warned in (("empty.json", True), ("full.json", False)):
        assert main(["run", "--env", "EGIP-Demo-v0", "--cdeg", graph, "--episodes", "1",
                     "--quiet", "--out", f"{graph}.run.jsonl"]) == 0
        err = capsys.readouterr().err.splitlines()
        assert [line for line in err if "0 revisions" in line] == (
            [expected] if warned else [])


def test_a_default_graph_path_in_the_way_is_named_as_the_default(workdir, capsys):
    """No --out typed: the messages name the default file, never "--out"."""
    (workdir / "runs" / "construct.cdeg.json").mkdir(parents=True)
    assert main(["cdeg", "build", "construct.jsonl", "--quiet"]) == 2
    assert capsys.readouterr().err == (
        "clinenv: error: the default graph file runs/construct.cdeg.json is a folder; give "
        "the graph file with --out FILE\n")


def test_checking_build_flags_leaves_the_parsed_flags_as_they_are(tmp_path, construct_log,
                                                                   monkeypatch):
    """The default graph file and the folder to create are returned, not written into the
    parsed namespace (a second use of the same flags sees them as the user gave them)."""
    from clinenv.cli import build_parser
    from clinenv.cli.cdeg import _check_build_args

    monkeypatch.chdir(tmp_path)
    log = tmp_path / "fresh" / "construct.jsonl"
    log.parent.mkdir()
    shutil.copy(construct_log, log)
    args = build_parser().parse_args(["cdeg", "build", str(log)])
    before = vars(args).copy()
    assert _check_build_args(args) == (default_graph_path(log), Path("runs"))
    assert vars(args) == before and args.out is None
    args = build_parser().parse_args(["cdeg", "build", str(log), "--out",
                                      str(tmp_path / "new" / "g.json")])
    assert _check_build_args(args) == (tmp_path / "new" / "g.json", tmp_path / "new")
    assert not (tmp_path / "new").exists()  # created only when the graph is written
