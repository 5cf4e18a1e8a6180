"""The fail-fast message counts what the log really holds.

Runs go through :func:`clinenv.cli.main` against a port where nothing listens
(connection refused), so every LLM episode ends as an error line. The counts in the
message are checked against the log read back independently (plain ``json``), after a
resume that already had error lines, with and without retrying them, and with
concurrent workers whose lines land after the stop was decided.
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from clinenv.cli import main
from clinenv.runlog import RunLogWriter
from clinenv.runs.fail_fast import FailFast, RunAborted

ERROR = {"type": "BackendError", "message": "connection refused", "backend": "openai",
         "detail": "connection"}


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("CLINENV_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def down_url():
    """The URL of a port on 127.0.0.1 that the test holds bound and never listens on
    (connections are refused; no other process can take the port meanwhile)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def run(capsys, url, *args):
    code = main(["run", "--env", "EGIP-Demo-v0", "--doctor", "llm", "--base-url", url,
                 "--model", "m", "--max-retries", "0", "--episodes", "8", "--quiet",
                 "--out", "down.jsonl", *args])
    return code, capsys.readouterr().err


def log_counts(path: Path) -> tuple[int, int]:
    """(lines, episodes whose latest line is an error line), read with plain json."""
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x]
    latest = {}
    for line in lines:
        latest[(line["case_id"], line["repetition"])] = line
    return len(lines), sum("error" in x for x in latest.values())


def tail(err: str) -> tuple[int, int, int]:
    """(written by this run, error episodes in the log, of them from this run)."""
    found = re.search(r"(\d+) episode\(s\) of this run are in down\.jsonl, which now holds "
                      r"(\d+) episode\(s\) stopped by a backend error \((\d+) from this "
                      r"run\); continue later with --resume", err)
    assert found, err
    return tuple(int(g) for g in found.groups())


def test_resume_without_retry_counts_the_earlier_error_lines(workdir, capsys, down_url):
    url = down_url
    code, err = run(capsys, url, "--max-consecutive-errors", "2")
    assert code == 2 and tail(err) == (2, 2, 2)
    code, err = run(capsys, url, "--max-consecutive-errors", "3", "--resume",
                    "--no-retry-errors")
    assert code == 2, err
    assert err.startswith("clinenv: error: 3 episode(s) in a row stopped by a backend error")
    assert log_counts(workdir / "down.jsonl") == (5, 5)
    assert tail(err) == (3, 5, 3)


def test_resume_with_retry_counts_superseded_error_lines_once(workdir, capsys, down_url):
    """The retried episodes' new error lines supersede their old ones: the log holds 5
    error lines but 3 error episodes, all of them this run's."""
    url = down_url
    assert run(capsys, url, "--max-consecutive-errors", "2")[0] == 2
    code, err = run(capsys, url, "--max-consecutive-errors", "3", "--resume")
    assert code == 2
    assert log_counts(workdir / "down.jsonl") == (5, 3)
    assert tail(err) == (3, 3, 3)


def test_concurrent_workers_lines_are_counted(workdir, capsys, down_url):
    code, err = run(capsys, down_url, "--max-consecutive-errors", "2", "--concurrency",
                    "4")
    assert code == 2
    n_lines, n_errors = log_counts(workdir / "down.jsonl")
    assert n_lines >= 2
    assert tail(err) == (n_lines, n_errors, n_errors)


def test_configuration_stop_after_earlier_errors_names_them(workdir, capsys, down_url):
    """A resume whose first request is refused (HTTP 404 from a real server on a wrong
    path) writes nothing; the message still says the log holds the earlier errors."""
    from clinenv.testing.fake_server import FakeChatServer

    assert run(capsys, down_url, "--max-consecutive-errors", "2")[0] == 2
    with FakeChatServer("clinician") as server:
        wrong = server.base_url[:-len("/v1")] + "/v2"
        code, err = run(capsys, wrong, "--resume")
    assert code == 2
    assert err.rstrip().endswith(
        "0 episode(s) of this run are in down.jsonl, which now holds 2 episode(s) stopped "
        "by a backend error (0 from this run); fix it and continue with --resume")


def test_recount_reads_the_file_not_the_counters(tmp_path):
    """A line whose write finished after the stop (a concurrent worker) is counted, a
    blank line and a partial last line are not, and earlier runs' lines are kept apart."""
    out = tmp_path / "log.jsonl"
    old = [{"case_id": "a", "repetition": 0, "error": ERROR},
           {"case_id": "b", "repetition": 0, "verdict": "correct"}]
    out.write_text("".join(json.dumps(x) + "\n" for x in old) + "\n", encoding="utf-8")
    guard = FailFast(out, 2)
    with pytest.raises(RunAborted) as info, guard, RunLogWriter(out) as writer:
        for case in ("c", "a"):
            line = {"case_id": case, "repetition": 0, "error": ERROR}
            writer.write(line)
            guard.after_write(line)
    writer_late = {"case_id": "d", "repetition": 0, "verdict": "wrong"}
    assert guard.n_written == 2
    with out.open("a", encoding="utf-8") as fh:  # what a late worker's write adds
        fh.write(json.dumps(writer_late) + "\n" + '{"case_id": "e", "rep')
    err = guard.recount(info.value)
    assert (err.n_written, err.n_error_episodes, err.n_error_episodes_this_run) == (3, 2, 2)
    assert "keeps the 3 episode(s) it wrote" in str(err)
    assert "holds 2 episode(s) stopped by a backend error (2 of them from this run)" in str(err)
