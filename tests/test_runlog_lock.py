"""One writer per run log (:mod:`clinenv.runlog_lock`): two real processes, the CLI's
one-line refusal, and the lock's life in process (released on every way out)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.runlog import RunLogError
from clinenv.runlog_lock import RunLogLock, RunLogLocked, lock_path
from clinenv.runs import Concurrent, RunSpec, replay_run, run
from clinenv.runs.logged import prepare_run

N_DEMO = 17

#: A real logged run in its own process that stops after its first line until the test
#: creates the file ``go`` (so the test can start a second run while it holds the log).
HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import gymnasium as gym
    import clinenv
    from clinenv.agents.scripted_doctor import ScriptedDoctor
    from clinenv.runs import RunSpec, run

    out, go = Path(sys.argv[1]), Path(sys.argv[2])

    def progress(line):
        if not go.exists():
            print("writing", flush=True)
            while not go.exists():
                time.sleep(0.02)

    with gym.make("EGIP-Demo-v0") as env:
        result = run(lambda: env, ScriptedDoctor, RunSpec(out=out, repetitions=2, resume=True),
                     progress=progress)
    print("done", result.n_new, flush=True)
""")


def _cli_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("CLINENV_DATA_DIR", None)
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return env


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x]


def test_a_second_run_on_a_log_in_use_is_refused_naming_the_pid(tmp_path):
    """The issue's two terminals: a run holds runs/dup.jsonl; `clinenv run --resume` on
    the same log fails at once with one line naming the log and the holder's pid, writes
    nothing, and the first run ends with one line per episode."""
    out, go = tmp_path / "runs" / "dup.jsonl", tmp_path / "go"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out), str(go)],
                              cwd=tmp_path, env=_cli_env(tmp_path), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "writing"
        before = out.read_bytes()
        assert len(before.splitlines()) == 1
        second = subprocess.run(
            [sys.executable, "-m", "clinenv", "run", "--env", "EGIP-Demo-v0",
             "--repetitions", "2", "--out", str(out), "--resume", "--quiet"],
            cwd=tmp_path, env=_cli_env(tmp_path), capture_output=True, text=True,
            timeout=300)
        assert second.returncode == 2, (second.stdout, second.stderr)
        (message,) = second.stderr.splitlines()
        assert message.startswith(f"clinenv: error: {out}: in use by another run (pid "
                                  f"{holder.pid}, since ")
        assert message.endswith("wait for it to end, or write to another file")
        assert second.stdout == ""
        assert out.read_bytes() == before  # the refused run wrote nothing
    finally:
        go.touch()
        stdout, stderr = holder.communicate(timeout=300)
    assert holder.returncode == 0, stderr
    assert stdout.split() == ["done", str(2 * N_DEMO)]
    lines = _lines(out)
    keys = [(x["case_id"], x["repetition"]) for x in lines]
    assert len(keys) == len(set(keys)) == 2 * N_DEMO
    assert not lock_path(out).exists()  # released and removed at the end


def test_two_cli_runs_started_together_never_duplicate_an_episode(tmp_path):
    """Both terminals started at once, as in the issue: whichever runs first, the log
    ends with each episode once; the other run is refused or resumes a finished log."""
    out = tmp_path / "runs" / "dup.jsonl"
    cmd = [sys.executable, "-m", "clinenv", "run", "--env", "EGIP-Demo-v0",
           "--repetitions", "3", "--exploration", "0.5", "--out", str(out), "--resume",
           "--quiet"]
    procs = [subprocess.Popen(cmd, cwd=tmp_path, env=_cli_env(tmp_path),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    for code, _stdout, stderr in results:
        assert code in (0, 2), stderr
        if code == 2:
            assert "in use by another run (pid" in stderr
    keys = [(x["case_id"], x["repetition"]) for x in _lines(out)]
    assert len(keys) == len(set(keys)) == 3 * N_DEMO


def test_the_lock_is_held_from_reading_to_the_last_line_and_released(tmp_path):
    out = tmp_path / "runs" / "log.jsonl"
    env = gym.make("EGIP-Demo-v0")
    prepared = prepare_run(env, ScriptedDoctor(), RunSpec(out=out, episodes=2))
    with pytest.raises(RunLogLocked, match=rf"in use by another run in this process \(pid "
                                           rf"{os.getpid()}, since "):
        prepare_run(env, ScriptedDoctor(), RunSpec(out=out, episodes=2, resume=True))
    with pytest.raises(RunLogLocked):
        run(lambda: env, ScriptedDoctor, RunSpec(out=out, episodes=2, resume=True))
    holder = json.loads(lock_path(out).read_text(encoding="utf-8"))
    assert holder["pid"] == os.getpid()
    prepared.close()
    prepared.close()  # idempotent
    assert not lock_path(out).exists() and not out.parent.exists()  # nothing left
    assert run(lambda: env, ScriptedDoctor, RunSpec(out=out, episodes=2)).n_new == 2
    assert not lock_path(out).exists()
    env.close()


def test_a_refused_resume_releases_the_lock(tmp_path):
    out = tmp_path / "log.jsonl"
    with gym.make("EGIP-Demo-v0") as env:
        run(lambda: env, ScriptedDoctor, RunSpec(out=out, episodes=2))
        with pytest.raises(RunLogError, match="run_seed"):
            run(lambda: env, ScriptedDoctor, RunSpec(out=out, episodes=2, seed=5, resume=True))
        with pytest.raises(FileExistsError):
            run(lambda: env, ScriptedDoctor, RunSpec(out=out, episodes=2))
        assert not lock_path(out).exists()
        more = run(lambda: env, ScriptedDoctor, RunSpec(out=out, episodes=3, resume=True))
        assert more.n_new == 1


def test_concurrent_runs_and_replays_take_the_same_lock(tmp_path):
    out = tmp_path / "log.jsonl"
    with RunLogLock(out):
        with pytest.raises(RunLogLocked):
            run(lambda: gym.make("EGIP-Demo-v0"), ScriptedDoctor, RunSpec(out=out, episodes=2),
                Concurrent(2))
    run(lambda: gym.make("EGIP-Demo-v0"), ScriptedDoctor, RunSpec(out=out, episodes=2),
        Concurrent(2))
    replayed = tmp_path / "replay.jsonl"
    with RunLogLock(replayed), pytest.raises(RunLogLocked):
        replay_run(out, ScriptedDoctor, RunSpec(out=replayed))
    assert replay_run(out, ScriptedDoctor, RunSpec(out=replayed)).n_new == 2
    assert not lock_path(out).exists() and not lock_path(replayed).exists()


def test_a_crashed_holder_leaves_no_lock(tmp_path):
    """flock is dropped by the kernel when its holder dies; the stale sidecar it leaves
    is taken over."""
    out = tmp_path / "log.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, sys
        from clinenv.runlog_lock import RunLogLock
        lock = RunLogLock({str(out)!r}).acquire()
        print("held", flush=True)
        sys.stdin.readline()
        os._exit(9)  # no release: the sidecar stays
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    with pytest.raises(RunLogLocked, match=f"pid {proc.pid}"):
        RunLogLock(out).acquire()
    proc.communicate("\n", timeout=60)
    assert proc.returncode == 9 and lock_path(out).exists()
    with RunLogLock(out) as lock:
        assert lock.held
    assert not lock_path(out).exists()


def test_unlink_race_takes_the_lock_anew(tmp_path, monkeypatch):
    """A holder that removes the sidecar between our open and our flock: the lock we got
    is on a file nobody sees, so it is taken again on the new one."""
    out = tmp_path / "log.jsonl"
    real_flock = __import__("fcntl").flock
    calls = []

    def flock(fd, op):
        calls.append(op)
        if len(calls) == 1:  # the previous holder unlinks now
            lock_path(out).unlink()
        return real_flock(fd, op)

    monkeypatch.setattr("clinenv.runlog_lock.fcntl.flock", flock)
    lock = RunLogLock(out).acquire()
    assert len(calls) == 2 and lock_path(out).exists()
    assert os.fstat(lock._fd).st_ino == os.stat(lock_path(out)).st_ino
    lock.release()


def test_lock_holder_text_without_details_still_reads(tmp_path):
    out = tmp_path / "log.jsonl"
    lock = RunLogLock(out).acquire()
    os.ftruncate(lock._fd, 0)  # a holder that has not written who it is yet
    with pytest.raises(RunLogLocked, match=r"log\.jsonl: in use by another run; two runs"):
        RunLogLock(out).acquire()
    lock.release()
    with pytest.raises(RuntimeError, match="already held"):
        with RunLogLock(out) as again:
            again.acquire()


def test_a_file_system_without_locks_is_a_clear_error(tmp_path, monkeypatch):
    import errno

    def flock(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr("clinenv.runlog_lock.fcntl.flock", flock)
    out = tmp_path / "log.jsonl"
    with pytest.raises(RunLogError, match=r"log\.jsonl: the file system of .* cannot lock "
                                          r"files \(No locks available\); write the log to "
                                          r"a local folder"):
        RunLogLock(out).acquire()


def test_every_spelling_of_one_log_names_one_lock(tmp_path, monkeypatch):
    """A symlink, a relative path and a chdir between acquire and release: one lock,
    and a release never removes another holder's sidecar."""
    real = tmp_path / "d" / "real.jsonl"
    real.parent.mkdir()
    real.touch()
    (tmp_path / "link.jsonl").symlink_to(real)
    with RunLogLock(tmp_path / "link.jsonl"):
        with pytest.raises(RunLogLocked):
            RunLogLock(real).acquire()
        monkeypatch.chdir(real.parent)
        with pytest.raises(RunLogLocked):
            RunLogLock("real.jsonl").acquire()
    assert not lock_path(real).exists()
    other = tmp_path / "e"
    other.mkdir()
    monkeypatch.chdir(tmp_path)
    mine = RunLogLock("d/real.jsonl").acquire()  # relative, then the folder changes
    monkeypatch.chdir(other)
    mine.release()
    assert not lock_path(real).exists()
    # a sidecar that is not ours (deleted and re-made by hand) stays on release
    held = RunLogLock(real).acquire()
    lock_path(real).unlink()
    theirs = RunLogLock(real).acquire()
    held.release()
    assert lock_path(real).exists()
    with pytest.raises(RunLogLocked):
        RunLogLock(real).acquire()
    theirs.release()
    assert not lock_path(real).exists()


def test_a_lock_file_of_another_user_is_a_clear_error(tmp_path, monkeypatch):
    out = tmp_path / "log.jsonl"
    real_open = os.open

    def refuse(path, flags, mode=0o777):
        if str(path).endswith(".lock"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, mode)

    monkeypatch.setattr("clinenv.runlog_lock.os.open", refuse)
    with pytest.raises(RunLogError, match=r"log\.jsonl: cannot open its lock file .*log\.jsonl"
                                          r"\.lock \(Permission denied\); a run of another "
                                          r"user holds or left it"):
        RunLogLock(out).acquire()
