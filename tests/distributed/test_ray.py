"""Scale-out on Ray (:mod:`clinenv.distributed`, ``clinenv run --ray``) with a real Ray.

Two kinds of test:

- without Ray (any environment): the base-URL map file, the URL plan and runner
  placement, case groups, the ``vllm serve`` node actor's process handling (with a
  stand-in ``vllm`` program), the ``--ray`` option checks, and the import graph (the
  core never imports :mod:`clinenv.distributed`; ``clinenv`` and ``clinenv.cli`` never
  import Ray);
- with Ray (``@in_namespace``): a local Ray (``ray.init(address="local",
  num_cpus=2)``), a two-node :class:`ray.cluster_utils.Cluster` and ``clinenv run
  --ray local`` in subprocesses, against fake OpenAI-compatible servers on 127.0.0.1
  whose replies depend only on the request (``clinenv.testing.clinic.clinic_responder``).
  Ray binds its services to the machine's own address, so these tests run only inside
  a network namespace that holds nothing but loopback. Outside one, the first such test
  re-runs this file there once (``unshare -n``, then ``ip link set lo up``; needs root)
  and each test reports its outcome inside; where Ray is missing or ``unshare`` is not
  permitted they skip, saying why.

Reference values: a one-machine run (:func:`clinenv.runs.run` with
:class:`~clinenv.runs.Concurrent`) of the same schedule; a Ray run must write the same
lines apart from ``timing`` and ``llm``, whatever runner or node dies on the way.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.llm_doctor import LLMDoctor
from clinenv.cli import main
from clinenv.distributed import (
    BaseUrlMapError,
    NoServerError,
    Ray,
    RayConfig,
    RayRunError,
    RunnerParts,
    ServeConfig,
    ServeError,
    UrlPlan,
    VLLMServer,
    read_base_url_map,
)
from clinenv.distributed.placement import Node, runner_nodes
from clinenv.distributed.serve import serve_command, server_nodes
from clinenv.distributed.units import case_groups, take_tail_group
from clinenv.evaluation.summary import summarize
from clinenv.llm.openai_backend import OpenAIChatModel
from clinenv.runlog import read_run_log
from clinenv.runs import Concurrent, RunSpec, run
from clinenv.testing.clinic import clinic_responder
from clinenv.testing.fake_server import FakeChatServer

ROOT = Path(__file__).resolve().parents[2]
HAVE_RAY = importlib.util.find_spec("ray") is not None
#: This process sees only the loopback interface: Ray's traffic cannot leave it.
LOOPBACK_ONLY = [name for _, name in socket.if_nameindex()] == ["lo"]
ENV_ID = "EGIP-Demo-v0"
#: The schedule of every Ray run here: the first 11 demo cases (verdicts correct, wrong
#: and unscored) x 2 repetitions, run seed 0.
EPISODES, REPETITIONS = 11, 2
#: Seconds per fake-server request: an episode makes 20 requests, about 0.6 s.
DELAY_S = 0.03
VOLATILE = ("timing", "llm")


# ------------------------------------------------------------------ shared helpers
class DemoParts:
    """The parts factory of these runs: the demo environment and an LLM doctor (direct
    strategy) of the node's server. Travels to the runners by value (registered below)."""

    def __call__(self, base_url):
        # the driver's copy (no URL with ServeConfig(port=0)) runs no episode
        model = OpenAIChatModel("fake-model", base_url=base_url or "http://127.0.0.1:9/v1",
                                timeout_s=30)
        return RunnerParts(make_env=lambda: gym.make(ENV_ID),
                           make_doctor=lambda: LLMDoctor(model), close=model.close)


class NodeWithoutData(DemoParts):
    """Parts that fail on a runner's node, as a missing dataset would there."""

    def __call__(self, base_url):
        import ray

        if ray.get_runtime_context().get_actor_id() is not None:
            raise FileNotFoundError("no dataset on this node")
        return super().__call__(base_url)


def stable(lines):
    """Lines without the volatile fields, sorted by episode key."""
    return sorted(({k: v for k, v in line.items() if k not in VOLATILE} for line in lines),
                  key=lambda line: (line["case_id"], line["repetition"]))


def figures(lines, plan=None):
    """The run's figures (summarize) that do not depend on timing."""
    summary = summarize(lines, plan=plan)
    return {k: summary[k] for k in ("n_scheduled", "n_records", "n_correct", "n_wrong",
                                    "n_unscored", "accuracy", "coverage", "mean_turns",
                                    "mean_exams", "accuracy_mean", "accuracy_sd")}


def logged(out):
    """The log's lines, checked: whole lines, no episode twice."""
    log = read_run_log(out)
    assert log.partial_bytes == 0
    keys = Counter((line["case_id"], line["repetition"]) for line in log.lines)
    assert max(keys.values()) == 1, [k for k, n in keys.items() if n > 1]
    return log.lines


def scheduled_keys():
    return {(f"demo-{i + 1:02d}", r) for i in range(EPISODES) for r in range(REPETITIONS)}


def write_stand_in_vllm(folder: Path, records: Path, delay_s: float = DELAY_S) -> Path:
    """A stand-in ``vllm`` program in ``folder``: ``vllm serve MODEL --host H --port P
    ...`` serves the fake clinic on H:P (health check included) after a 1 s start-up,
    and writes its argv, pid and CUDA_VISIBLE_DEVICES to ``records/<pid>.json``; ``vllm
    serve fail`` exits with code 3 after printing a line."""
    folder.mkdir(parents=True, exist_ok=True)
    records.mkdir(parents=True, exist_ok=True)
    script = folder / "vllm"
    script.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json, os, signal, sys, threading, time
        argv = sys.argv[1:]
        assert argv[0] == "serve", argv
        model, options = argv[1], dict(zip(argv[2::2], argv[3::2]))
        if model == "fail":
            print("stand-in vllm: cannot load model 'fail'", flush=True)
            sys.exit(3)
        with open(os.path.join({str(records)!r}, f"{{os.getpid()}}.json"), "w") as fh:
            json.dump({{"argv": argv, "pid": os.getpid(),
                       "cuda": os.environ.get("CUDA_VISIBLE_DEVICES")}}, fh)
        time.sleep(1.0)  # a server is not healthy at once
        from clinenv.testing.clinic import clinic_responder
        from clinenv.testing.fake_server import FakeChatServer
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with FakeChatServer(clinic_responder(), delay_s={delay_s}, host=options["--host"],
                            port=int(options["--port"]), model=model):
            while not stop.wait(0.1):
                pass
        """), encoding="utf-8")
    script.chmod(0o755)
    return script


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as reply:
            return reply.status == 200
    except OSError:
        return False


def wait_until(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.1)


# ------------------------------------------------------------------ the namespace
@functools.lru_cache(maxsize=1)
def _namespace_run() -> tuple[str | None, dict[tuple[str, str], tuple[str, str]], str]:
    """Run this file inside a loopback-only network namespace, once.

    Returns:
        ``(skip reason or None, {(class, test): (outcome, message)}, output tail)``.
    """
    if not HAVE_RAY:
        return ("ray is not installed: run in .venv-ray (pip install -e '.[test,ray]'), "
                "as .ci/run does", {}, "")
    try:
        probe = subprocess.run(["unshare", "-n", "sh", "-c", "ip link set lo up"],
                               capture_output=True, text=True, timeout=60)
    except (FileNotFoundError, subprocess.TimeoutExpired) as err:
        return f"cannot make a network namespace: {err}", {}, ""
    if probe.returncode != 0:
        return (f"cannot make a loopback-only network namespace (unshare -n needs root): "
                f"{probe.stderr.strip()}", {}, "")
    import tempfile

    with tempfile.TemporaryDirectory(prefix="clinenv-ray-") as tmp:
        report = Path(tmp) / "inner.xml"
        try:
            inner = subprocess.run(
                ["unshare", "-n", "sh", "-c",
                 'ip link set lo up && exec "$0" -m pytest -q -p no:cacheprovider '
                 '--junitxml="$2" "$1"', sys.executable, str(Path(__file__)), str(report)],
                cwd=ROOT, capture_output=True, text=True, timeout=1500)
        except subprocess.TimeoutExpired as err:
            return None, {}, f"the namespace run timed out after {err.timeout} s"
        tail = (inner.stdout + inner.stderr)[-6000:]
        if not report.is_file():
            return None, {}, tail
        results = {}
        for case in ET.parse(report).getroot().iter("testcase"):
            key = (case.get("classname", "").rpartition(".")[2], case.get("name", ""))
            outcome, message = "passed", ""
            for kind in ("failure", "error", "skipped"):
                found = case.find(kind)
                if found is not None:
                    outcome = kind
                    message = (found.get("message") or "") + "\n" + (found.text or "")
                    break
            results[key] = (outcome, message)
    return None, results, tail


def in_namespace(test):
    """Run ``test`` inside a loopback-only network namespace: directly when this process
    is in one, else by the one namespace run of this file (its outcome reported here).
    The Ray fixtures do nothing outside the namespace."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        if LOOPBACK_ONLY:
            return test(*args, **kwargs)
        skip, results, tail = _namespace_run()
        if skip:
            pytest.skip(skip)
        owner, _, name = test.__qualname__.rpartition(".")
        outcome, message = results.get((owner, name), ("missing", ""))
        if outcome == "skipped":
            pytest.skip(f"inside the namespace: {message.strip()}")
        if outcome != "passed":
            pytest.fail(f"{outcome} inside the loopback-only namespace:\n{message}\n"
                        f"--- output of the namespace run ---\n{tail}", pytrace=False)

    return run


@pytest.fixture(scope="module")
def reference():
    """The one-machine run of the schedule: its lines (plan order) and plan."""
    if not LOOPBACK_ONLY:
        yield None
        return
    import tempfile

    with FakeChatServer(clinic_responder()) as server, \
            tempfile.TemporaryDirectory() as tmp:
        model = OpenAIChatModel("fake-model", base_url=server.base_url)
        result = run(lambda: gym.make(ENV_ID), lambda: LLMDoctor(model),
                     RunSpec(out=Path(tmp) / "one.jsonl", episodes=EPISODES,
                             repetitions=REPETITIONS), Concurrent(6))
        model.close()
    assert {line["verdict"] for line in result.lines} == {"correct", "wrong", "unscored"}
    yield result


def _by_value():
    """Ship this module's classes to Ray workers by value (they cannot import it)."""
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


# ------------------------------------------------------------------ without Ray
def test_a_base_url_map_is_read_in_file_order(tmp_path):
    path = tmp_path / "map.json"
    path.write_bytes(b'\xef\xbb\xbf{"10.0.0.2": "http://127.0.0.1:8000/v1",\n'
                     b' "gpu-a": "https://gpu-a:8443/v1"}')
    assert list(read_base_url_map(path).items()) == [
        ("10.0.0.2", "http://127.0.0.1:8000/v1"), ("gpu-a", "https://gpu-a:8443/v1")]


@pytest.mark.parametrize("text, message", [
    (None, "no such file"),
    ('{"a": "http://x/v1",\n "b": }', r"line 2 column 7: not JSON"),
    ('["http://x/v1"]', "expected a JSON object .* got a list"),
    ("{}", "the map is empty"),
    ('{"a": "http://x/v1", "a": "http://y/v1"}', "key 'a' appears twice"),
    ('{" ": "http://x/v1"}', "an empty key"),
    ('{"node-1": "127.0.0.1:8000"}', r"key 'node-1': the value must be an http:// or "
                                     r"https:// URL with a host, got '127.0.0.1:8000'"),
    ('{"node-1": 8000}', "key 'node-1': the value must be"),
])
def test_a_bad_base_url_map_is_refused_naming_file_and_key(tmp_path, text, message):
    path = tmp_path / "map.json"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(BaseUrlMapError, match=message) as caught:
        read_base_url_map(path)
    assert str(path) in str(caught.value)


def test_a_node_uses_its_own_server_first():
    plan = UrlPlan(served={"n1": "http://127.0.0.1:1/v1"},
                   by_node={"n2": "http://127.0.0.1:2/v1", "10.0.0.3": "http://127.0.0.1:3/v1",
                            "host-4": "http://127.0.0.1:4/v1", "10.0.0.1": "http://ip/v1"},
                   base_url="http://shared/v1")
    assert plan.resolve("n1", "10.0.0.1", "host-1") == ("http://127.0.0.1:1/v1", "served")
    assert plan.resolve("n2", "10.0.0.3", "host-4") == ("http://127.0.0.1:2/v1",
                                                        "map:node-id")
    assert plan.resolve("n3", "10.0.0.3", "host-4") == ("http://127.0.0.1:3/v1", "map:ip")
    assert plan.resolve("n4", "10.0.0.4", "host-4") == ("http://127.0.0.1:4/v1",
                                                        "map:hostname")
    assert plan.resolve("n5", "10.0.0.5", "host-5") == ("http://shared/v1", "base-url")
    assert UrlPlan().resolve("n5", "10.0.0.5", "host-5") == (None, "none")


def test_a_node_without_a_server_is_refused_by_name():
    plan = UrlPlan(by_node={"10.0.0.1": "http://127.0.0.1:8000/v1"}, source="nodes.json")
    with pytest.raises(NoServerError, match=r"node n2 \(IP 10.0.0.2, hostname gpu-b\) has "
                                            r"no LLM server: nodes.json has no entry"):
        plan.resolve("n2", "10.0.0.2", "gpu-b")


def test_runners_go_to_the_nodes_with_a_server_round_robin():
    a, b, c = (Node(f"n{i}", f"10.0.0.{i}", f"host-{i}", cpus=8) for i in (1, 2, 3))
    plan = UrlPlan(by_node={"10.0.0.1": "http://127.0.0.1:8000/v1",
                            "host-3": "http://127.0.0.1:8000/v1"})
    assert runner_nodes([a, b, c], plan, None) == [a, c]  # b has no server
    assert runner_nodes([a, b, c], plan, 3) == [a, c, a]
    assert runner_nodes([a, b, c], UrlPlan(), 2) == [a, b]  # no server needed
    with pytest.raises(NoServerError, match="no node of the cluster has an LLM server"):
        runner_nodes([b], plan, None)
    with pytest.raises(ValueError, match="runners must be None"):
        runner_nodes([a], plan, 0)


def test_units_are_handed_out_in_whole_case_groups():
    units = [(0, 0, 10), (1, 0, 11), (2, 0, 12), (0, 1, 13), (1, 1, 14), (2, 1, 15)]
    assert case_groups(units) == [[(0, 0, 10), (0, 1, 13)], [(1, 0, 11), (1, 1, 14)],
                                  [(2, 0, 12), (2, 1, 15)]]
    queue = [(1, 1, 14), (2, 0, 12), (2, 1, 15)]
    assert take_tail_group(queue, busy_cases={1}) == [(2, 0, 12), (2, 1, 15)]
    assert take_tail_group(queue, busy_cases={1}) is None  # case 1 is running there
    assert queue == [(1, 1, 14)]


def test_serve_commands_and_nodes():
    config = ServeConfig("Qwen/Qwen2.5-7B-Instruct", args=("--max-model-len", "8192"))
    assert serve_command(config, 8000, 4) == [
        "vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--host", "127.0.0.1", "--port", "8000",
        "--tensor-parallel-size", "4", "--max-model-len", "8192"]
    assert serve_command(config, 8001, 1)[-3:] == ["8001", "--max-model-len", "8192"]
    cpu, gpu2, gpu8 = Node("c", "1", "c"), Node("g", "2", "g", gpus=2), Node("h", "3", "h",
                                                                           gpus=8)
    assert server_nodes([cpu, gpu2, gpu8], config) == [(gpu2, 2), (gpu8, 8)]
    assert server_nodes([cpu, gpu8], ServeConfig("m", gpus_per_node=4)) == [(gpu8, 4)]
    assert server_nodes([cpu], config) == [(cpu, 0)]  # a CPU cluster: every node
    for bad, message in (({"model": ""}, "model must be"), ({"port": 70000}, "port must"),
                         ({"startup_timeout_s": 0}, "startup_timeout_s"),
                         ({"gpus_per_node": 0}, "gpus_per_node"), ({"args": (1,)}, "args")):
        with pytest.raises(ValueError, match=message):
            ServeConfig(**{"model": "m", **bad})


def test_ray_and_serve_configs_are_checked_settings_objects():
    """Ray ships both to its actors: a pickled config is an equal one; a bad field is
    named; a variant is checked again."""
    import pickle

    config = RayConfig(runners=2, serve=ServeConfig("m", args=["--a", "b"]),
                       env_vars={"CLINENV_DATA_DIR": "/data"})
    assert config.serve.args == ("--a", "b")
    assert pickle.loads(pickle.dumps(config)) == config
    assert config.model_dump(mode="json")["serve"]["model"] == "m"
    for bad, message in (({"concurrency": 0}, r"concurrency must be an integer >= 1, got 0"),
                         ({"runners": True}, r"runners must be an integer >= 1, got True"),
                         ({"max_restarts": 1.0}, r"max_restarts must be an integer >= 0"),
                         ({"runner_cpus": "1"}, r"runner_cpus must be a number >= 0"),
                         ({"runner_timeout_s": 0}, r"runner_timeout_s must be > 0"),
                         ({"bogus": 1}, r"bogus\n  Extra inputs are not permitted"),
                         ({"serve": ServeConfig("m"), "base_url": "http://x/v1"},
                          r"give neither base_url nor base_url_map")):
        with pytest.raises(ValueError, match=message):
            RayConfig(**bad)
    with pytest.raises(ValueError, match="concurrency must be an integer >= 1"):
        config.replace(concurrency=0)
    with pytest.raises(TypeError, match="multiple values for argument 'model'"):
        ServeConfig("m", model="n")


def test_the_node_server_waits_for_the_health_check_and_stops_its_process(tmp_path):
    write_stand_in_vllm(tmp_path / "bin", tmp_path / "records", delay_s=0.0)
    config = ServeConfig("fake-model", port=0, executable=str(tmp_path / "bin" / "vllm"),
                         startup_timeout_s=60)
    server = VLLMServer(config, gpus=0)
    started = time.monotonic()
    info = server.start()
    assert time.monotonic() - started >= 1.0  # the stand-in's start-up was waited for
    record = json.loads(next((tmp_path / "records").iterdir()).read_text())
    assert record["argv"] == ["serve", "fake-model", "--host", "127.0.0.1", "--port",
                              str(info["port"])]
    assert info["pid"] == record["pid"] and info["url"] == f"http://127.0.0.1:{info['port']}/v1"
    assert answers(f"http://127.0.0.1:{info['port']}/health")
    server.stop()
    assert not alive(record["pid"]) and not answers(f"http://127.0.0.1:{info['port']}/health")


def test_a_node_server_that_exits_is_reported_with_its_log(tmp_path):
    write_stand_in_vllm(tmp_path / "bin", tmp_path / "records")
    server = VLLMServer(ServeConfig("fail", port=0, executable=str(tmp_path / "bin" / "vllm")))
    with pytest.raises(ServeError, match=r"(?s)exited with code 3 before its health check "
                                         r"answered; log .*cannot load model 'fail'"):
        server.start()
    missing = VLLMServer(ServeConfig("m", executable=str(tmp_path / "no-such-vllm")))
    with pytest.raises(ServeError, match="is not on PATH"):
        missing.start()


@pytest.mark.parametrize("argv, message", [
    (["--ray-runners", "2"], "--ray-runners is used only with --ray ADDRESS"),
    (["--base-url-map", "m.json"], "--base-url-map is used only with --ray ADDRESS"),
    (["--ray-serve", "m"], "--ray-serve is used only with --ray ADDRESS"),
])
def test_ray_options_need_ray(capsys, argv, message):
    assert main(["run", "--env", ENV_ID, *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.skipif(not HAVE_RAY, reason="ray is not installed (the checks after "
                                         "'--ray needs Ray')")
@pytest.mark.parametrize("argv, message", [
    (["--ray-serve", "m"], "--ray-serve is used only with an LLM agent"),
    (["--doctor", "llm", "--model", "m", "--base-url", "http://127.0.0.1:1/v1",
      "--ray-serve", "m"], "--base-url is not used with --ray-serve"),
    (["--doctor", "llm", "--model", "other", "--ray-serve", "m"],
     "--model other differs from --ray-serve m"),
    (["--doctor", "llm", "--model", "m", "--backend", "vllm"],
     "use --backend openai, not vllm"),
    (["--doctor", "llm", "--model", "m", "--ray-serve", "m", "--base-url-map", "x.json"],
     "--base-url-map and --ray-serve both choose"),
    (["--doctor", "llm", "--model", "m", "--base-url-map", "MISSING"],
     "--base-url-map: MISSING: no such file"),
])
def test_bad_ray_options_are_refused_before_ray_starts(capsys, tmp_path, argv, message):
    argv = [str(tmp_path / "nope.json") if a == "MISSING" else a for a in argv]
    message = message.replace("MISSING", str(tmp_path / "nope.json"))
    assert main(["run", "--env", ENV_ID, "--ray", "local", *argv,
                 "--out", str(tmp_path / "run.jsonl")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run.jsonl").exists()


@pytest.mark.skipif(HAVE_RAY, reason="ray is installed")
def test_ray_is_asked_for_by_name_when_missing(capsys):
    assert main(["run", "--env", ENV_ID, "--ray", "local"]) == 2
    assert "--ray needs Ray: pip install -e '.[ray]' in a clinenv clone" in \
        capsys.readouterr().err


@pytest.mark.skipif(not HAVE_RAY, reason="needs ray (clinenv[ray])")
def test_a_log_in_use_is_refused_before_ray_starts(tmp_path):
    """The Ray driver writes the log too: it takes the same lock (clinenv.runlog_lock)
    before it reads the log, so a second driver on one log stops before Ray starts."""
    import ray

    from clinenv.runlog_lock import RunLogLock, RunLogLocked

    out = tmp_path / "ray.jsonl"
    with RunLogLock(out), pytest.raises(RunLogLocked, match=rf"ray\.jsonl: in use by "
                                                            r"another run in this process "
                                                            rf"\(pid {os.getpid()}"):
        run(None, None, RunSpec(out=out, episodes=EPISODES), Ray(RayConfig(address="local"),
                                                                 parts=DemoParts()))
    assert not ray.is_initialized() and not out.exists()


def test_the_core_imports_neither_ray_nor_the_distributed_package():
    code = ("import sys, clinenv, clinenv.cli, clinenv.runs.concurrent, clinenv.distributed\n"
            "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"
    import ast

    beside = ("distributed", "cli", "testing", "integrations")
    bad = []
    for path in (ROOT / "clinenv").rglob("*.py"):
        part = path.relative_to(ROOT / "clinenv").parts[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                if (name == "ray" or name.startswith("ray.")) and part != "distributed":
                    bad.append(f"{path}: import {name}")
                if name.startswith("clinenv.distributed") and part not in beside:
                    bad.append(f"{path}: import {name}")
    assert not bad, "\n".join(bad)


# ------------------------------------------------------------------ a local Ray
@pytest.fixture(scope="class")
def local_ray():
    """``ray.init(address="local", num_cpus=2)`` and a fake clinic (50 ms a request)."""
    if not LOOPBACK_ONLY:
        yield None
        return
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False)
    _by_value()
    try:
        with FakeChatServer(clinic_responder(), delay_s=DELAY_S) as server:
            yield server
    finally:
        ray.shutdown()


class TestLocalRay:
    @in_namespace
    def test_a_ray_run_writes_the_lines_of_a_run_on_one_machine(self, local_ray, reference,
                                                                 tmp_path):
        server = local_ray
        result = run(None, None, RunSpec(out=tmp_path / "ray.jsonl", episodes=EPISODES,
                                         repetitions=REPETITIONS),
                     Ray(RayConfig(base_url=server.base_url, runners=2, concurrency=2),
                         parts=DemoParts()))
        assert stable(result.lines) == stable(reference.lines)
        assert stable(logged(tmp_path / "ray.jsonl")) == stable(reference.lines)
        assert figures(result.lines, result.plan) == figures(reference.lines, reference.plan)
        assert (result.n_new, result.n_resubmitted, result.n_runners_lost) == (
            EPISODES * REPETITIONS, 0, 0)
        # all repetitions of a case ran on one runner, and both runners had cases
        by_case = {}
        for (case_id, _), index in result.placements.items():
            by_case.setdefault(case_id, set()).add(index)
        assert all(len(indices) == 1 for indices in by_case.values())
        assert {i for indices in by_case.values() for i in indices} == {0, 1}
        assert [r["url_source"] for r in result.runners] == ["base-url", "base-url"]

    @in_namespace
    def test_a_runner_killed_mid_run_loses_no_episode(self, local_ray, reference, tmp_path):
        import ray

        from clinenv.distributed.driver import runner_name

        out = tmp_path / "killed.jsonl"
        seen = []

        def kill_after_first_line(line):
            seen.append(len(read_run_log(out).lines))
            if len(seen) == 1:
                ray.kill(ray.get_actor(runner_name(0)), no_restart=True)

        result = run(None, None, RunSpec(out=out, episodes=EPISODES, repetitions=REPETITIONS),
                     Ray(RayConfig(base_url=local_ray.base_url, runners=2, concurrency=2),
                         parts=DemoParts()), progress=kill_after_first_line)
        assert seen[0] == 1  # one unit logged when the runner died...
        assert result.n_resubmitted >= 1  # ...and at least one in flight on it
        lines = logged(out)
        assert {(line["case_id"], line["repetition"]) for line in lines} == scheduled_keys()
        assert stable(lines) == stable(reference.lines)
        assert figures(result.lines, result.plan) == figures(reference.lines, reference.plan)
        assert [r["state"] for r in result.runners] == ["lost", "ok"]
        assert result.n_runners_lost == 1
        assert sum(r["n_lines"] for r in result.runners) == EPISODES * REPETITIONS

    @in_namespace
    def test_a_runner_process_that_dies_is_restarted_and_rejoins(self, local_ray, reference,
                                                                tmp_path):
        import ray

        from clinenv.distributed.driver import runner_name

        out = tmp_path / "restarted.jsonl"
        pids = []

        def crash_after_first_line(line):
            if not pids:
                pids.append(ray.get(ray.get_actor(runner_name(0)).info.remote())["pid"])
                os.kill(pids[0], signal.SIGKILL)

        # the one runner: the run can finish only once Ray has restarted it
        result = run(None, None, RunSpec(out=out, episodes=EPISODES, repetitions=REPETITIONS),
                     Ray(RayConfig(base_url=local_ray.base_url, runners=1, concurrency=2),
                         parts=DemoParts()), progress=crash_after_first_line)
        assert result.n_resubmitted >= 1
        assert stable(logged(out)) == stable(reference.lines)
        (runner,) = result.runners
        assert (runner["state"], runner["n_failures"]) == ("ok", 1)
        assert runner["pid"] != pids[0]

    @in_namespace
    def test_a_run_whose_runners_all_died_is_completed_by_resume(self, local_ray, reference,
                                                                 tmp_path):
        import ray

        from clinenv.distributed.driver import runner_name

        out = tmp_path / "resumed.jsonl"
        killed = []

        def kill_after_first_line(line):
            if not killed:  # a unit that finished with the first one may follow it
                killed.append(ray.kill(ray.get_actor(runner_name(0)), no_restart=True))

        spec = RunSpec(out=out, episodes=EPISODES, repetitions=REPETITIONS)
        executor = Ray(RayConfig(base_url=local_ray.base_url, runners=1, concurrency=2),
                       parts=DemoParts())
        with pytest.raises(RayRunError, match=r"every runner was lost \(runner 0: .*\); "
                                              rf"{out} keeps the [12] line\(s\) written now"):
            run(None, None, spec, executor, progress=kill_after_first_line)
        n_before = len(logged(out))
        result = run(None, None, spec.replace(resume=True), executor)
        assert (result.n_new, result.n_resumed) == (EPISODES * REPETITIONS - n_before, n_before)
        assert stable(logged(out)) == stable(reference.lines)
        assert figures(result.lines, result.plan) == figures(reference.lines, reference.plan)

    @in_namespace
    def test_a_runner_or_node_that_cannot_serve_the_run_is_named(self, local_ray, tmp_path):
        out = tmp_path / "x.jsonl"
        with pytest.raises(RayRunError, match=r"runner 0 on node \w+ \(IP 127.0.0.1, hostname "
                                              r".+\) could not start: FileNotFoundError: no "
                                              r"dataset on this node"):
            run(None, None, RunSpec(out=out, episodes=1),
                Ray(RayConfig(base_url=local_ray.base_url), parts=NodeWithoutData()))
        with pytest.raises(RayRunError, match=r"no node of the cluster has an LLM server in "
                                              r"the base-URL map: \w+ \(IP 127.0.0.1"):
            run(None, None, RunSpec(out=out, episodes=1),
                Ray(RayConfig(base_url_map={"10.255.0.1": "http://127.0.0.1:9/v1"}),
                    parts=DemoParts()))
        vllm = write_stand_in_vllm(tmp_path / "bin", tmp_path / "records")
        with pytest.raises(RayRunError, match=r"(?s)vllm serve on node \w+ \(IP 127.0.0.1, "
                                              r"hostname .+\) failed: .*exited with code 3 .*"
                                              r"cannot load model 'fail'"):
            run(None, None, RunSpec(out=out, episodes=1),
                Ray(RayConfig(serve=ServeConfig("fail", port=0, executable=str(vllm))),
                    parts=DemoParts()))
        assert not out.exists()


# ------------------------------------------------------------------ two nodes
@pytest.fixture(scope="class")
def two_nodes(tmp_path_factory):
    """A two-node ``Cluster`` (2 CPUs each) with a stand-in ``vllm`` on the nodes' PATH,
    and one fake clinic per node; yields ``(cluster, {node_id: server}, records)``."""
    if not LOOPBACK_ONLY:
        yield None
        return
    import ray
    from ray.cluster_utils import Cluster

    tmp = tmp_path_factory.mktemp("cluster")
    records = tmp / "records"
    write_stand_in_vllm(tmp / "bin", records)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", f"{tmp / 'bin'}{os.pathsep}{os.environ['PATH']}")
        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 2, "include_dashboard": False,
            "_system_config": {"health_check_initial_delay_ms": 0,
                               "health_check_period_ms": 1000,
                               "health_check_timeout_ms": 1000,
                               "health_check_failure_threshold": 3}})
        cluster.add_node(num_cpus=2)
        ray.init(address=cluster.address)
        _by_value()
        try:
            cluster.wait_for_nodes()
            ids = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
            assert len(ids) == 2
            servers = {node: FakeChatServer(clinic_responder(), delay_s=DELAY_S).start()
                       for node in ids}
            yield cluster, servers, records
            for server in servers.values():
                server.stop()
        finally:
            ray.shutdown()
            cluster.shutdown()


class TestTwoNodes:
    @in_namespace
    def test_each_runner_uses_the_server_of_its_own_node(self, two_nodes, reference, tmp_path):
        _, servers, _ = two_nodes
        for server in servers.values():
            server.requests.clear()
        urls = {node: s.base_url for node, s in servers.items()}
        result = run(None, None, RunSpec(out=tmp_path / "two.jsonl", episodes=EPISODES,
                                         repetitions=REPETITIONS),
                     Ray(RayConfig(concurrency=3, base_url_map=urls), parts=DemoParts()))
        assert stable(result.lines) == stable(reference.lines)
        assert figures(result.lines, result.plan) == figures(reference.lines, reference.plan)
        runners = result.runners
        assert sorted(r["node_id"] for r in runners) == sorted(servers)
        assert all(r["base_url"] == servers[r["node_id"]].base_url
                   and r["url_source"] == "map:node-id" for r in runners)
        # every request of an episode went to the server of the node that ran it
        lines = {(line["case_id"], line["repetition"]): line for line in result.lines}
        for runner in runners:
            sent = sum(lines[key]["llm"]["n_requests"]
                       for key, index in result.placements.items() if index == runner["index"])
            assert sent > 0 and len(servers[runner["node_id"]].requests) == sent

    @in_namespace
    def test_a_node_that_dies_loses_no_episode(self, two_nodes, reference, tmp_path):
        import ray

        cluster, servers, _ = two_nodes
        doomed = cluster.add_node(num_cpus=2)
        cluster.wait_for_nodes()
        urls = {node: s.base_url for node, s in servers.items()}
        urls[doomed.node_id] = next(iter(servers.values())).base_url
        out = tmp_path / "node.jsonl"
        removed = threading.Event()

        def remove_after_first_line(line):
            if not removed.is_set():
                removed.set()
                cluster.remove_node(doomed, allow_graceful=False)

        result = run(None, None, RunSpec(out=out, episodes=EPISODES, repetitions=REPETITIONS),
                     Ray(RayConfig(concurrency=2, base_url_map=urls), parts=DemoParts()),
                     progress=remove_after_first_line)
        assert removed.is_set() and len(result.runners) == 3
        assert result.n_resubmitted >= 1
        lines = logged(out)
        assert {(line["case_id"], line["repetition"]) for line in lines} == scheduled_keys()
        assert stable(lines) == stable(reference.lines)
        assert figures(result.lines, result.plan) == figures(reference.lines, reference.plan)
        (gone,) = [r for r in result.runners if r["n_failures"]]
        # restarted on a surviving node (soft node affinity), still set aside when the
        # others had finished, or given up
        assert gone["state"] in ("set-aside", "lost") or gone["node_id"] != doomed.node_id
        assert doomed.node_id not in {n["NodeID"] for n in ray.nodes() if n["Alive"]}

    @in_namespace
    def test_ray_serve_starts_one_server_per_node_and_stops_them(self, two_nodes, reference,
                                                                 tmp_path):
        _, servers, records = two_nodes
        before = set(records.iterdir()) if records.is_dir() else set()
        serve = ServeConfig("fake-model", port=0, startup_timeout_s=120)
        result = run(None, None, RunSpec(out=tmp_path / "served.jsonl", episodes=EPISODES,
                                         repetitions=REPETITIONS),
                     Ray(RayConfig(concurrency=3, serve=serve), parts=DemoParts()))
        assert stable(result.lines) == stable(reference.lines)
        started = [json.loads(p.read_text()) for p in set(records.iterdir()) - before]
        alive_nodes = {n for n in servers}
        assert len(started) == 2 and {s["node_id"] for s in result.servers} == alive_nodes
        ports = set()
        for record in started:
            argv = record["argv"]
            assert argv[:5] == ["serve", "fake-model", "--host", "127.0.0.1", "--port"]
            ports.add(int(argv[5]))
        assert ports == {s["port"] for s in result.servers} and len(ports) == 2
        served = {s["node_id"]: s["url"] for s in result.servers}
        assert all(r["url_source"] == "served" and r["base_url"] == served[r["node_id"]]
                   for r in result.runners)
        for port in ports:  # stopped with the run
            wait_until(lambda p=port: not answers(f"http://127.0.0.1:{p}/health"), 30,
                       "the stand-in to stop")


# ------------------------------------------------------------------ the command line
class TestCommandLine:
    @in_namespace
    def test_a_killed_driver_leaves_a_log_that_resume_completes(self, reference, tmp_path):
        """``clinenv run --ray local --ray-serve``: the driver is SIGKILLed after its
        first line; its Ray and the node's server go with it; ``--resume`` completes."""
        records = tmp_path / "records"
        write_stand_in_vllm(tmp_path / "bin", records)
        env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
        out = tmp_path / "cli.jsonl"
        command = [sys.executable, "-m", "clinenv", "run", "--env", ENV_ID, "--episodes",
                   str(EPISODES), "--repetitions", str(REPETITIONS), "--doctor", "llm",
                   "--ray", "local", "--ray-serve", "fake-model", "--concurrency", "2",
                   "--out", str(out)]
        driver = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        try:
            wait_until(lambda: out.is_file() and read_run_log(out).lines, 300,
                       "the driver's first line")
        finally:
            driver.kill()
        driver.communicate(timeout=60)
        n_before = len(read_run_log(out).lines)
        assert 1 <= n_before < EPISODES * REPETITIONS
        assert len(list(records.iterdir())) == 1  # the node's one server...
        wait_until(lambda: not answers("http://127.0.0.1:8000/health"), 60,
                   "the node's server to die with the driver's Ray")  # ...died with it
        resumed = subprocess.run([*command, "--resume"], env=env, capture_output=True,
                                 text=True, timeout=600)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        lines = logged(out)
        assert {(line["case_id"], line["repetition"]) for line in lines} == scheduled_keys()
        assert stable(lines) == stable(reference.lines)
        run_now = EPISODES * REPETITIONS - n_before
        assert f"{run_now} run now, {n_before} resumed" in resumed.stdout
        one_machine = figures(reference.lines, reference.plan)
        assert f"accuracy    {one_machine['accuracy']:.2f} %" in resumed.stdout
