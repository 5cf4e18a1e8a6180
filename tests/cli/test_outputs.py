"""What the report commands write, and how the command line refuses what it cannot do.

- one rule (clinenv.cli.outputs): ``eval``, ``compare``, ``report`` and ``export``
  replace their own earlier outputs with one ``replaced N earlier files in DIR`` line,
  and after ``eval`` / ``compare`` their files in ``--out-dir`` are exactly the ones the
  call wrote (a stale ``accuracy.png`` or ``comparison.png`` is removed, never left
  beside newer tables); run logs are never an output;
- output paths are checked before any work: nothing is computed or printed first;
- no option is abbreviated (``--out`` is not ``--out-dir``), on any (sub-)parser;
- an argument error is its line and where help is, not the usage block;
- ``--by`` a stratum the logs lack lists the strata and case flags they do have.

The logs are hand-made (clinenv/testing/eval_logs.py) or written by a real ``clinenv run``;
every command runs through :func:`clinenv.cli.main` in a temporary working folder.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from clinenv.cli import build_parser, main
from clinenv.testing.data import NEJM_FILE, SHARED_DATA, needs_shared_data
from clinenv.testing.eval_logs import (
    ALPHA_STRATA,
    NATIVE_ALPHA,
    log_lines,
    write_fixture_logs,
    write_log,
)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path


@pytest.fixture
def logs(workdir):
    return {name: path.relative_to(workdir)
            for name, path in write_fixture_logs(workdir / "logs").items()}


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """``(exit code, stdout, stderr)`` of ``clinenv ARGS`` (an argparse exit included)."""
    try:
        code = main([str(a) for a in args])
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def names(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


FAST = ("--resamples", "200")
FLIPS = ("--flips", "200")


# --------------------------------------------------------------- stale figures (4)
def test_each_command_keeps_exactly_its_own_latest_files(workdir, logs, capsys):
    """A figure or table of an earlier call that this call did not write is removed (one
    line names them); another command's files and foreign files are left alone."""
    pytest.importorskip("matplotlib")
    rep = workdir / "rep"
    rep.mkdir()
    (rep / "notes.txt").write_text("mine\n", encoding="utf-8")
    pair = (logs["native_alpha"], logs["egip_alpha"])
    code, out, _ = cli(capsys, "eval", *pair, "--by", "question_type", "--plot", *FAST,
                       "--out-dir", "rep")
    assert code == 0 and "replaced" not in out and "removed" not in out
    by = {f"accuracy_by_question_type.{e}" for e in ("md", "csv", "png")}
    assert names(rep) == {"notes.txt", "accuracy.md", "accuracy.csv", "accuracy.png", *by}
    code, out, _ = cli(capsys, "compare", *pair, "--plot", *FAST, *FLIPS, "--out-dir", "rep")
    assert code == 0 and "replaced" not in out and "removed" not in out
    compared = {"comparison.md", "comparison.csv", "comparison.png"}
    assert compared <= names(rep)

    # eval without --plot and --by: its old figures and by-tables go, compare's stay
    code, out, _ = cli(capsys, "eval", *pair, "--out-dir", "rep")
    assert code == 0
    assert out.splitlines()[-3:] == [
        "wrote rep/accuracy.md, rep/accuracy.csv",
        "replaced 2 earlier files in rep",
        "removed 4 earlier files of clinenv eval in rep that this call did not write: "
        "accuracy.png, accuracy_by_question_type.csv, accuracy_by_question_type.md, "
        "accuracy_by_question_type.png"]
    assert names(rep) == {"notes.txt", "accuracy.md", "accuracy.csv", *compared}

    # compare without --plot: comparison.png goes; eval's files are not compare's
    eval_files = {n: (rep / n).read_bytes() for n in ("accuracy.md", "accuracy.csv")}
    code, out, _ = cli(capsys, "compare", *pair, *FAST, *FLIPS, "--out-dir", "rep")
    assert code == 0
    assert out.splitlines()[-2:] == [
        "replaced 2 earlier files in rep",
        "removed 1 earlier file of clinenv compare in rep that this call did not write: "
        "comparison.png"]
    assert names(rep) == {"notes.txt", "accuracy.md", "accuracy.csv", "comparison.md",
                          "comparison.csv"}
    assert {n: (rep / n).read_bytes() for n in eval_files} == eval_files
    assert (rep / "notes.txt").read_text(encoding="utf-8") == "mine\n"


def test_a_stale_figure_goes_even_when_the_new_one_cannot_be_drawn(workdir, logs, capsys,
                                                                    monkeypatch):
    """--plot without matplotlib writes the tables, then fails: the earlier call's
    accuracy.png must not stay beside them."""
    rep = workdir / "reports"
    rep.mkdir()
    (rep / "accuracy.png").write_bytes(b"\x89PNG old figure of older logs")
    (rep / "accuracy.md").write_text("old table\n", encoding="utf-8")
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, out, err = cli(capsys, "eval", logs["native_alpha"], "--plot", *FAST)
    assert code == 2 and "pip install -e '.[plot]' in a clinenv clone" in err
    assert names(rep) == {"accuracy.md", "accuracy.csv"}
    assert (rep / "accuracy.md").read_text(encoding="utf-8") != "old table\n"
    assert out.splitlines()[-2:] == [
        "replaced 1 earlier file in reports",
        "removed 1 earlier file of clinenv eval in reports that this call did not write: "
        "accuracy.png"]


def test_the_owned_names_cover_every_file_the_commands_write():
    """The names eval and compare may write are all in OWNED (else a stale one stays)."""
    import fnmatch

    from clinenv.cli.evaluate import _compare_stems, _file_names, _stem
    from clinenv.cli.outputs import OWNED

    args = argparse.Namespace(sensitivity=True, reviewer_labels=Path("r.csv"),
                              by="question type")
    written = _file_names(_compare_stems(args), plot=True)
    assert "sensitivity_by_question_type.md" in written and "agreement.csv" in written
    assert all(any(fnmatch.fnmatchcase(n, p) for p in OWNED["compare"]) for n in written)
    ev = _file_names(["accuracy", _stem("accuracy_by_", "question type")], plot=True)
    ev += _file_names(["components", _stem("components_by_", "question type")], plot=False)
    assert "components_by_question_type.csv" in ev
    assert all(any(fnmatch.fnmatchcase(n, p) for p in OWNED["eval"]) for n in ev)
    assert not any(fnmatch.fnmatchcase(n, p) for n in written for p in OWNED["eval"])
    assert not any(fnmatch.fnmatchcase(n, p) for n in ev for p in OWNED["compare"])


# ------------------------------------------------------------- one overwrite rule
def test_eval_compare_report_and_export_replace_their_outputs(workdir, logs, capsys):
    pair = (logs["native_alpha"], logs["egip_alpha"])
    assert main(["run", "--env", "EGIP-Demo-v0", "--episodes", "2", "--quiet", "--out",
                 "run.jsonl"]) == 0
    calls = {
        "eval": (["eval", *pair, "--out-dir", "out"], "replaced 2 earlier files in out"),
        "compare": (["compare", *pair, *FAST, *FLIPS, "--out-dir", "out"],
                    "replaced 2 earlier files in out"),
        "report": (["report", *pair, *FAST, *FLIPS, "--no-figures", "--out",
                    "out/report.html"], "replaced 1 earlier file in out"),
        "export": (["export", "run.jsonl", "--out", "out/rows.jsonl"],
                   "replaced 1 earlier file in out"),
    }
    capsys.readouterr()
    for command, (args, line) in calls.items():
        code, first, err = cli(capsys, *args)
        assert code == 0, (command, err)
        assert "replaced" not in first, command
        code, again, err = cli(capsys, *args)
        assert code == 0, (command, err)
        assert again.splitlines()[-1] == line, command
        assert again.count("replaced") == 1, command
    assert names(workdir / "out") == {"accuracy.md", "accuracy.csv", "comparison.md",
                                      "comparison.csv", "report.html", "rows.jsonl"}
    # export --force is still accepted (it is the default now) and says so in its help
    code, out, _ = cli(capsys, "export", "run.jsonl", "--out", "out/rows.jsonl", "--force")
    assert code == 0 and out.splitlines()[-1] == "replaced 1 earlier file in out"
    code, out, _ = cli(capsys, "export", "--help")
    assert code == 0 and "the default now" in " ".join(out.split())


def test_no_command_overwrites_a_run_log(workdir, capsys):
    assert main(["run", "--env", "EGIP-Demo-v0", "--episodes", "1", "--quiet", "--out",
                 "run.jsonl"]) == 0
    assert main(["run", "--env", "EGIP-Demo-v0", "--episodes", "1", "--seed", "3", "--quiet",
                 "--out", "other.html"]) == 0  # any name: the content says it is a log
    before = {n: (workdir / n).read_bytes() for n in ("run.jsonl", "other.html")}
    capsys.readouterr()
    for args in (["export", "run.jsonl", "--out", "run.jsonl"],
                 ["report", "run.jsonl", "--no-figures", "--out", "other.html"]):
        code, out, err = cli(capsys, *args)
        assert code == 2 and out == "" and "run logs are never overwritten" in err, args
    assert {n: (workdir / n).read_bytes() for n in before} == before


# -------------------------------------------------- output paths checked first (6)
def test_out_is_not_read_as_out_dir_and_nothing_is_printed(workdir, logs, capsys):
    (workdir / "x.md").write_text("a file\n", encoding="utf-8")
    code, out, err = cli(capsys, "eval", logs["native_alpha"], "--out", "x.md")
    assert code == 2 and out == ""
    assert err == ("clinenv eval: error: unrecognized arguments: --out x.md\n"
                   "Run 'clinenv eval --help' for usage.\n")
    assert "--out-dir" not in err and not (workdir / "reports").exists()


@pytest.mark.parametrize("command", ["eval", "compare"])
def test_an_out_dir_that_cannot_be_written_is_refused_before_any_table(workdir, logs,
                                                                       capsys, command):
    (workdir / "afile").write_text("x\n", encoding="utf-8")
    (workdir / "rep" / "accuracy.md").mkdir(parents=True)
    (workdir / "rep" / "comparison.md").mkdir(parents=True)
    stem = "accuracy" if command == "eval" else "comparison"
    cases = {
        "afile": "--out-dir afile is a file, not a folder",
        "afile/sub": "--out-dir afile/sub: afile is a file, not a folder",
        "rep": f"--out-dir rep: rep/{stem}.md is a folder, where the file {stem}.md goes",
    }
    for out_dir, message in cases.items():
        code, out, err = cli(capsys, command, logs["native_alpha"], logs["egip_alpha"],
                             *FAST, "--out-dir", out_dir)
        assert code == 2 and out == "", out  # no table computed or printed
        assert err == f"clinenv: error: {message}\n"
    # refused before the logs are even read
    code, out, err = cli(capsys, command, "absent.jsonl", "x.jsonl", "--out-dir", "afile")
    assert code == 2 and "--out-dir afile is a file" in err


def test_report_and_export_check_out_before_any_work(workdir, logs, capsys):
    (workdir / "afile").write_text("x\n", encoding="utf-8")
    code, out, err = cli(capsys, "report", logs["native_alpha"], "--out", "afile/r.html")
    assert (code, out) == (2, "") and err == (
        "clinenv: error: --out afile/r.html: afile is a file, not a folder\n")
    code, out, err = cli(capsys, "export", "absent.jsonl", "--out", "afile/x.jsonl")
    assert (code, out) == (2, "") and err == (
        "clinenv: error: --out afile/x.jsonl: afile is a file, not a folder\n")


# ------------------------------------------------------------ no abbreviations (6)
def _parsers(parser: argparse.ArgumentParser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_no_parser_accepts_abbreviations():
    from clinenv.cli.cdeg_scale import _run_parser
    from clinenv.cli.parser import CLIParser

    for root, at_least in ((build_parser(), 14), (_run_parser(), 2)):
        found = list(_parsers(root))
        assert len(found) >= at_least
        for parser in found:
            assert isinstance(parser, CLIParser) and parser.allow_abbrev is False, parser.prog


@pytest.mark.parametrize("args, prog, message", [
    (["run", "--epi", "3"], "clinenv run", "unrecognized arguments: --epi 3"),
    (["compare", "a", "b", "--flip", "9"], "clinenv compare",
     "unrecognized arguments: --flip 9"),
    (["cdeg", "build", "x.jsonl", "--forc"], "clinenv cdeg build",
     "unrecognized arguments: --forc"),
    (["data", "verify", "--data-d", "x"], "clinenv data verify",
     "unrecognized arguments: --data-d"),
    (["report", "x.jsonl", "--no-fig"], "clinenv report", "unrecognized arguments: --no-fig"),
])
def test_abbreviated_options_are_refused(workdir, capsys, args, prog, message):
    code, out, err = cli(capsys, *args)
    assert (code, out) == (2, "")
    assert err == f"{prog}: error: {message}\nRun '{prog} --help' for usage.\n"


# ---------------------------------------------------------------- short errors
@pytest.mark.parametrize("args, prog, message", [
    (["run", "--episodes", "0"], "clinenv run", "argument --episodes: must be >= 1, got 0"),
    (["eval"], "clinenv eval", "the following arguments are required: RUN.jsonl"),
    (["cdeg", "build"], "clinenv cdeg build",
     "the following arguments are required: RUN.jsonl"),
    (["export", "x.jsonl", "--format", "csv"], "clinenv export",
     "argument --format: invalid choice: 'csv' (choose from 'messages', 'tools', 'tokens')"),
    (["evl"], "clinenv", "argument {run,replay,data,eval,compare,cdeg,export,report,audit,serve}: "
                         "invalid choice: 'evl'"),
])
def test_argument_errors_are_a_line_and_where_help_is(workdir, capsys, args, prog, message):
    code, out, err = cli(capsys, *args)
    assert (code, out) == (2, "")
    first, hint = err.splitlines()
    assert first.startswith(f"{prog}: error: {message}")
    assert hint == f"Run '{prog} --help' for usage."


def test_argument_error_of_the_installed_command(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "clinenv", "run", "--episodes", "0"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == ("clinenv run: error: argument --episodes: must be >= 1, got 0\n"
                           "Run 'clinenv run --help' for usage.\n")


# ------------------------------------------------------------ --by what exists (9)
def test_by_a_missing_stratum_lists_the_strata_and_flags_that_exist(workdir, capsys):
    lines = log_lines("alpha", "native", NATIVE_ALPHA, strata=ALPHA_STRATA)
    for line in lines:
        line["case_flags"] = {"target_in_menu": line["case_id"] == "a1",
                              "caregiver_voice": False, "near_duplicate_of": None}
    log = write_log(workdir / "a.jsonl", lines)
    write_log(workdir / "b.jsonl", lines)
    for command, logs in ((["eval", "a.jsonl"], "a.jsonl"),
                          (["compare", "a.jsonl", "b=b.jsonl"], "a.jsonl, b.jsonl")):
        code, out, err = cli(capsys, *command, "--by", "specialty", "--out-dir", "rep")
        assert (code, out) == (2, "")
        assert err == (f"clinenv: error: --by specialty: no case has stratum 'specialty' "
                       f"in {logs}; strata in these logs: question_type; case flags in "
                       "these logs (--by takes them too): caregiver_voice, target_in_menu\n")
    assert not (workdir / "rep").exists()
    # the library says the same (for a caller without the CLI)
    from clinenv.evaluation.reports import accuracy_table
    from clinenv.evaluation.runs import RunsError, load_runs

    with pytest.raises(RunsError, match="strata in these logs: question_type; case flags in "
                                        "these logs .*: caregiver_voice, target_in_menu"):
        accuracy_table(load_runs([log]), by="specialty")


@needs_shared_data(NEJM_FILE)
def test_by_question_type_on_nejm_names_what_nejm_logs_hold(workdir, capsys, monkeypatch):
    monkeypatch.setenv("CLINENV_DATA_DIR", str(SHARED_DATA))
    assert main(["run", "--env", "EGIP-NEJM-v0", "--episodes", "2", "--quiet", "--out",
                 "nejm.jsonl"]) == 0
    flags = sorted(k for k, v in json.loads(
        (workdir / "nejm.jsonl").read_text(encoding="utf-8").splitlines()[0]
    )["case_flags"].items() if isinstance(v, bool))
    assert "target_in_menu" in flags
    capsys.readouterr()
    code, out, err = cli(capsys, "eval", "nejm.jsonl", "--by", "question_type")
    assert (code, out) == (2, "")
    assert err == ("clinenv: error: --by question_type: no case has stratum "
                   "'question_type' in nejm.jsonl; strata in these logs: none; case flags "
                   f"in these logs (--by takes them too): {', '.join(flags)}\n")
    code, out, _ = cli(capsys, "eval", "nejm.jsonl", "--by", "target_in_menu")
    assert code == 0 and "Accuracy (%) by stratum 'target_in_menu'" in out
