"""The driver of a run on Ray: one schedule, runners on many nodes, one run log.

:class:`Ray` plans the run as :class:`clinenv.runs.logged.Serial` does and writes each
record as a one-machine run's line; its steps and faults: docs/cluster.md.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from clinenv.distributed.config import RayConfig
from clinenv.distributed.placement import (
    NoServerError,
    UrlPlan,
    alive_nodes,
    check_url,
    read_base_url_map,
    runner_nodes,
)
from clinenv.distributed.runner import EpisodeRunner, PartsFactory, RunnerParts, identity
from clinenv.distributed.serve import VLLMServer, server_nodes
from clinenv.distributed.units import Unit, case_groups, take_tail_group
from clinenv.errors import ClinenvError, install_hint
from clinenv.runlog import KEY, RunLogWriter
from clinenv.runs.fail_fast import FailFast
from clinenv.runs.logged import PreparedRun, RunResult, prepare_run
from clinenv.runs.spec import RunSpec

__all__ = ["FactoryParts", "Ray", "RayRunError", "RayRunResult", "runner_name"]

#: Seconds between two probes of a set-aside runner.
PROBE_INTERVAL_S = 1.0
#: Longest wait of the driver's loop before it looks at its runners again (seconds).
TICK_S = 1.0
#: Seconds a runner or server gets to close before it is killed.
CLOSE_TIMEOUT_S = 30.0


class RayRunError(ClinenvError, RuntimeError):
    """A run on Ray cannot go on: Ray cannot be reached, a server or runner cannot
    start (node and cause named), a runner differs from the driver, or every runner was
    lost. The log keeps every line written before; resume the run to continue."""


@dataclass
class RayRunResult(RunResult):
    """:class:`~clinenv.runs.logged.RunResult` of a run on :class:`Ray`, plus where it ran.

    Attributes:
        runners: one dict per runner: ``index``, ``node_id``, ``ip``, ``hostname``, ``pid``,
            ``base_url``, ``url_source`` (``"served"``, ``"map:node-id"``, ``"map:ip"``,
            ``"map:hostname"``, ``"base-url"`` or ``"none"``), ``state`` (``"ok"``,
            ``"set-aside"`` or ``"lost"``), ``n_lines`` and ``n_failures``.
        servers: one dict per started ``vllm serve`` (``node_id``, ``url``, ``pid``,
            ``log``, ``command``, ``cuda_visible_devices``).
        placements: ``(case_id, repetition)`` -> the runner whose line was written.
        n_resubmitted: units handed out again after their runner failed.
        n_runners_lost: runners given up during the run.
        startup_s: seconds from connecting to Ray until every runner was ready.
        run_s: seconds from the first unit handed out to the last line written.
        driver_cpu_s: CPU seconds of the driver process during ``run_s``.
    """

    runners: list[dict[str, Any]] = field(default_factory=list)
    servers: list[dict[str, Any]] = field(default_factory=list)
    placements: dict[KEY, int] = field(default_factory=dict)
    n_resubmitted: int = 0
    n_runners_lost: int = 0
    startup_s: float = 0.0
    run_s: float = 0.0
    driver_cpu_s: float = 0.0


@dataclass(frozen=True)
class FactoryParts:
    """The parts factory of runners built from plain factories (:class:`Ray` without
    ``parts``): every node gets ``RunnerParts(make_env, make_doctor)``, whatever its
    server; picklable when the factories are."""

    make_env: Callable[[], Any]
    make_doctor: Callable[[], Any]

    def __call__(self, base_url: str | None) -> RunnerParts:
        return RunnerParts(make_env=self.make_env, make_doctor=self.make_doctor)


@dataclass(frozen=True)
class Ray:
    """The executor of a run on Ray (docs/cluster.md), for :func:`clinenv.runs.run`.

    Schedule, resume, fail-fast stops and lines are those of
    :class:`clinenv.runs.logged.Serial`; ``run`` returns a :class:`RayRunResult`.

    Attributes:
        config: where and how (:class:`~clinenv.distributed.config.RayConfig`).
        parts: a picklable ``parts(base_url) -> RunnerParts``, called on each runner's node;
            ``None``: the ``make_env`` and ``make_doctor`` given to ``run`` (with
            ``parts``, pass ``None`` for both).

    Raises (from ``run``, besides those of :func:`clinenv.runs.run`): ImportError without
    Ray; :class:`RayRunError` when Ray cannot be reached, a server or runner cannot start,
    a runner differs from the driver, or every runner was lost; ValueError for an address
    given while connected or a bad URL; :class:`~clinenv.distributed.placement.
    BaseUrlMapError` for a map file that cannot be used.
    """

    config: RayConfig = field(default_factory=RayConfig)
    parts: PartsFactory | None = None

    async def arun(self, make_env: Any, make_doctor: Any, spec: RunSpec,
                   **hooks: Any) -> RayRunResult:
        """:meth:`run`, awaited (the loop waits for the whole run: the driver blocks)."""
        return self.run(make_env, make_doctor, spec, **hooks)

    def run(self, make_env: Any, make_doctor: Any, spec: RunSpec, *,
            progress: Callable[[dict[str, Any]], None] | None = None,
            on_start: Callable[[int], None] | None = None) -> RayRunResult:
        """The run (:func:`clinenv.runs.run`); ``on_start`` is called before Ray starts,
        ``progress`` in the order episodes finish."""
        config = self.config
        if self.parts is not None:
            parts = self.parts
            if make_env is not None or make_doctor is not None:
                raise ValueError("Ray(parts=...) builds every environment and doctor; "
                                 "pass None for make_env and make_doctor")
        elif make_env is None or make_doctor is None:
            raise ValueError("Ray() needs make_env and make_doctor, or Ray(parts=...)")
        else:
            parts = FactoryParts(make_env, make_doctor)
        base_url, base_url_map, serve = config.base_url, config.base_url_map, config.serve
        if base_url is not None:
            check_url(base_url, "base_url")
        source = "the base-URL map"
        if isinstance(base_url_map, str | Path):
            source = str(base_url_map)
            base_url_map = read_base_url_map(base_url_map)
        by_node = {str(k): check_url(v, f"base_url_map[{k!r}]")
                   for k, v in (base_url_map or {}).items()}
        plan = UrlPlan(by_node=by_node, base_url=base_url, source=source)
        context_url = base_url or next(iter(by_node.values()), None) or (
            serve.url(serve.port) if serve is not None and serve.port else None)

        try:
            import ray  # imported here only: clinenv.distributed imports without it
        except ImportError as err:
            raise ImportError(f"Ray() needs Ray: {install_hint('ray')} ({err})") from None

        driver_parts = parts(context_url)
        env0 = driver_parts.make_env()
        run = None
        try:
            try:
                doctor0 = driver_parts.make_doctor()
                run = prepare_run(env0, doctor0, spec)  # holds the log's lock until the end
                expected = identity(env0, doctor0)
            finally:
                env0.close()
                if driver_parts.close is not None:
                    driver_parts.close()
        except BaseException:
            if run is not None:  # the lock goes with any failure before the run starts
                run.close()
            raise
        with run:  # the lock is released when the run ends, however it ends
            if on_start is not None:
                on_start(len(run.todo))
            if not run.todo:
                return _result(run.result())
            guard = FailFast(spec.out, spec.max_consecutive_errors)
            loop: _Loop | None = None
            clock = {"start": time.monotonic()}
            with _Session(ray, config.address, config.ray_init):
                cluster = _Cluster(ray, parts, plan, config, expected=expected)
                try:
                    cluster.start()
                    clock.update(ready=time.monotonic(), cpu=time.process_time())
                    # the guard exits last: a fail-fast stop is counted from the file
                    with guard, RunLogWriter(run.out) as writer:
                        loop = _Loop(ray, run, cluster, guard, writer, progress)
                        loop.run()
                    clock.update(done=time.monotonic(),
                                 cpu=time.process_time() - clock["cpu"])
                finally:
                    cluster.stop()
            result = _result(run.result(), cluster=cluster, loop=loop)
            result.startup_s = clock["ready"] - clock["start"]
            result.run_s, result.driver_cpu_s = clock["done"] - clock["ready"], clock["cpu"]
            return result


def runner_name(index: int, job_id: str | None = None) -> str:
    """The Ray actor name of runner ``index`` of the run driven by job ``job_id`` (hex;
    default: this process's job), ``"clinenv-runner-<job id>-<index>"``: ``ray list
    actors`` shows it, ``ray.get_actor`` finds it."""
    if job_id is None:
        import ray

        job_id = ray.get_runtime_context().get_job_id()
    return f"clinenv-runner-{job_id}-{index}"


def _result(base: RunResult, cluster: _Cluster | None = None,
            loop: _Loop | None = None) -> RayRunResult:
    result = RayRunResult(**{f.name: getattr(base, f.name) for f in fields(RunResult)})
    if cluster is not None and loop is not None:
        result.runners = [slot.summary() for slot in cluster.slots]
        result.servers = list(cluster.servers)
        result.placements = dict(loop.placements)
        result.n_resubmitted = loop.n_resubmitted
        result.n_runners_lost = sum(slot.state == "lost" for slot in cluster.slots)
    return result


def _cause(err: BaseException) -> str:
    """The message of a Ray error's cause (a task's own exception when it has one)."""
    cause = getattr(err, "cause", None)
    return str(cause if isinstance(cause, BaseException) else err).strip() or \
        type(err).__name__


def _first_line(err: BaseException) -> str:
    """:func:`_cause`'s first line."""
    return _cause(err).splitlines()[0]


class _Session:
    """Connected to Ray inside the block; disconnects only what it connected."""

    def __init__(self, ray: Any, address: str | None, ray_init: Mapping[str, Any] | None):
        self.ray, self.address, self.kwargs = ray, address, dict(ray_init or {})
        self.connected = False

    def __enter__(self) -> _Session:
        ray = self.ray
        if ray.is_initialized():
            if self.address is not None:
                raise ValueError(f"address={self.address!r}, but this process is already "
                                 "connected to Ray; pass address=None to use that Ray")
            return self
        address = self.address or "local"
        kwargs = {"logging_level": logging.WARNING, **self.kwargs}
        if address == "local":
            kwargs.setdefault("include_dashboard", False)
        try:
            ray.init(address=address, **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise RayRunError(f"cannot connect to Ray at {address!r}: {err}") from None
        self.connected = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self.connected:
            self.ray.shutdown()


@dataclass
class _Slot:
    """The driver's view of one runner."""

    index: int
    handle: Any
    info: dict[str, Any]
    inflight: dict[Any, Unit] = field(default_factory=dict)  # ObjectRef -> unit
    queue: deque[Unit] = field(default_factory=deque)
    state: str = "ok"  # "ok" | "set-aside" | "lost"
    probe: Any = None  # ObjectRef of a pending info() call
    probe_at: float = 0.0
    aside_since: float = 0.0
    n_lines: int = 0
    n_failures: int = 0
    last_error: str = ""

    def summary(self) -> dict[str, Any]:
        keep = ("node_id", "ip", "hostname", "pid", "base_url", "url_source")
        return {"index": self.index, **{k: self.info.get(k) for k in keep},
                "state": self.state, "n_lines": self.n_lines, "n_failures": self.n_failures}


class _Cluster:
    """The servers and runners of one run: started, checked, stopped."""

    def __init__(self, ray: Any, parts: PartsFactory, plan: UrlPlan, config: RayConfig, *,
                 expected: dict[str, Any]) -> None:
        self.ray, self.parts, self.plan, self.serve = ray, parts, plan, config.serve
        self.n_runners, self.concurrency = config.runners, config.concurrency
        self.runner_cpus, self.max_restarts = config.runner_cpus, config.max_restarts
        self.timeout_s = config.runner_timeout_s
        self.env_vars, self.expected = dict(config.env_vars or {}), expected
        self.server_handles: list[Any] = []
        self.servers: list[dict[str, Any]] = []
        self.slots: list[_Slot] = []

    def _pin(self, node_id: str, *, soft: bool) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return NodeAffinitySchedulingStrategy(node_id, soft=soft)

    def start(self) -> None:
        ray = self.ray
        nodes = alive_nodes()
        plan = self.plan
        if self.serve is not None:
            plan = UrlPlan(served=self._start_servers(nodes), source="the started servers")
        self.plan = plan
        try:
            placed = runner_nodes(nodes, plan, self.n_runners)
        except NoServerError as err:
            raise RayRunError(str(err)) from None
        actor = ray.remote(EpisodeRunner)
        options: dict[str, Any] = dict(num_cpus=self.runner_cpus, max_restarts=self.max_restarts,
                                       max_task_retries=0,
                                       max_concurrency=self.concurrency + 4)
        if self.env_vars:
            options["runtime_env"] = {"env_vars": self.env_vars}
        for index, node in enumerate(placed):
            handle = actor.options(name=runner_name(index),
                                   scheduling_strategy=self._pin(node.node_id, soft=True),
                                   **options).remote(self.parts, plan, index)
            self.slots.append(_Slot(index, handle, {"node_id": node.node_id, "ip": node.ip,
                                                    "hostname": node.hostname}))
        refs = [slot.handle.info.remote() for slot in self.slots]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=self.timeout_s)
        for slot, ref in zip(self.slots, refs, strict=True):
            where = (f"runner {slot.index} on node {slot.info['node_id']} (IP "
                     f"{slot.info['ip']}, hostname {slot.info['hostname']})")
            if ref not in ready:
                raise RayRunError(f"{where} did not start within {self.timeout_s:g} s "
                                  "(the node's CPUs may all be held: lower runner_cpus or "
                                  "the number of runners)")
            try:
                info = ray.get(ref)
            except Exception as err:  # noqa: BLE001 - any start failure, named
                raise RayRunError(f"{where} could not start: {_first_line(err)}") from None
            problem = self.problem(info)
            if problem:
                raise RayRunError(f"{where} {problem}")
            slot.info = info

    def problem(self, info: dict[str, Any]) -> str:
        """Why a runner's ``info()`` shows it cannot serve this run (``""``: none)."""
        if info.get("error"):
            return f"could not start: {info['error']}"
        theirs = info.get("identity") or {}
        for name, ours in self.expected.items():
            if theirs.get(name) != ours:
                return (f"differs from the driver in {name}: {theirs.get(name)!r} there, "
                        f"{ours!r} here (every node needs the same clinenv, dataset files "
                        "and options)")
        return ""

    def _start_servers(self, nodes: list[Any]) -> dict[str, str]:
        ray, serve = self.ray, self.serve
        assert serve is not None
        actor = ray.remote(VLLMServer)
        placed = server_nodes(nodes, serve)
        for node, gpus in placed:
            self.server_handles.append(actor.options(
                num_cpus=0, num_gpus=gpus, max_restarts=0,
                scheduling_strategy=self._pin(node.node_id, soft=False)).remote(serve, gpus))
        refs = [handle.start.remote() for handle in self.server_handles]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=serve.startup_timeout_s + 60)
        served: dict[str, str] = {}
        for (node, gpus), ref in zip(placed, refs, strict=True):
            where = f"vllm serve on node {node.node_id} (IP {node.ip}, hostname {node.hostname})"
            if ref not in ready:
                raise RayRunError(f"{where} was not placed or healthy within "
                                  f"{serve.startup_timeout_s:g} s (are its {gpus} GPU(s) "
                                  "free?)")
            try:
                info = ray.get(ref)
            except Exception as err:  # noqa: BLE001 - ServeError or a Ray failure, named
                raise RayRunError(f"{where} failed: {_cause(err)}") from None
            self.servers.append({"node_id": node.node_id, **info})
            served[node.node_id] = info["url"]
        return served

    def stop(self) -> None:
        """Close and kill every runner, then stop and kill every server (errors of
        dead actors ignored)."""
        ray = self.ray
        for handles, method in (([s.handle for s in self.slots if s.state != "lost"], "close"),
                                (self.server_handles, "stop")):
            refs = []
            for handle in handles:
                try:
                    refs.append(getattr(handle, method).remote())
                except Exception:  # noqa: BLE001 - a dead actor
                    pass
            if refs:
                ray.wait(refs, num_returns=len(refs), timeout=CLOSE_TIMEOUT_S)
            for handle in handles:
                try:
                    ray.kill(handle)
                except Exception:  # noqa: BLE001 - already gone
                    pass


class _Loop:
    """Hands out units, writes lines, sets failing runners aside (docs/cluster.md)."""

    def __init__(self, ray: Any, run: PreparedRun, cluster: _Cluster, guard: FailFast,
                 writer: RunLogWriter, progress: Callable[[dict[str, Any]], None] | None):
        from ray.exceptions import ActorUnavailableError, ActorUnschedulableError, RayActorError

        self.ray, self.run_, self.cluster = ray, run, cluster
        self.guard, self.writer, self.progress = guard, writer, progress
        self.failures = (RayActorError, ActorUnschedulableError)
        self.unavailable = ActorUnavailableError
        self.slots = cluster.slots
        self.pool: deque[list[Unit]] = deque(case_groups(run.todo))
        self.remaining: set[KEY] = {self.key(unit) for unit in run.todo}
        self.owner: dict[Any, tuple[_Slot, Unit]] = {}
        self.orphans: dict[Any, tuple[_Slot, Unit]] = {}  # in flight on a set-aside runner
        self.placements: dict[KEY, int] = {}
        self.n_resubmitted = 0

    def key(self, unit: Unit) -> KEY:
        return self.run_.context.case_ids[unit[0]], unit[1]

    # ------------------------------------------------------------ the loop
    def run(self) -> None:
        ray = self.ray
        for slot in self.slots:
            self.fill(slot)
        while self.remaining:
            self.probe_set_aside()
            refs = [*self.owner, *self.orphans,
                    *(slot.probe for slot in self.slots if slot.probe is not None)]
            if not refs:
                time.sleep(min(TICK_S, PROBE_INTERVAL_S))
                continue
            ready, _ = ray.wait(refs, num_returns=1, timeout=TICK_S)
            if ready:  # everything ready now, not only the first
                ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            for ref in ready:
                self.settle(ref)

    def settle(self, ref: Any) -> None:
        ray = self.ray
        if ref in self.owner:
            slot, unit = self.owner.pop(ref)
            slot.inflight.pop(ref, None)
            try:
                record = ray.get(ref)
            except self.failures as err:
                self.set_aside(slot, unit, err)
                return
            self.write(slot, unit, record)
            self.fill(slot)
            self.fill_idle()
        elif ref in self.orphans:
            slot, unit = self.orphans.pop(ref)
            try:
                record = ray.get(ref)
            except self.failures:
                return  # handed out again already
            self.write(slot, unit, record)
        else:
            slot = next((s for s in self.slots if s.probe == ref), None)
            if slot is not None:  # a probe of a runner still set aside
                slot.probe = None
                self.probed(slot, ref)

    def write(self, slot: _Slot, unit: Unit, record: dict[str, Any]) -> None:
        """Write a unit's line unless it has one (a later record of a unit is ignored)."""
        key = self.key(unit)
        if key not in self.remaining:
            return
        self.guard.before_write(record)
        line = self.run_.line(record, unit)
        self.writer.write(line)
        self.run_.add(line)
        self.remaining.discard(key)
        self.placements[key] = slot.index
        slot.n_lines += 1
        if self.progress is not None:
            self.progress(line)
        self.guard.after_write(line)

    # ------------------------------------------------------------ handing out
    def fill(self, slot: _Slot) -> None:
        """Keep ``concurrency`` units in flight on ``slot`` while there are units."""
        while slot.state == "ok" and len(slot.inflight) < self.cluster.concurrency:
            if not slot.queue:
                group = self.pool.popleft() if self.pool else self.steal(slot)
                if group is None:
                    return
                slot.queue.extend(group)
            unit = slot.queue.popleft()
            if self.key(unit) not in self.remaining:
                continue
            ref = slot.handle.run.remote(unit)
            slot.inflight[ref] = unit
            self.owner[ref] = (slot, unit)

    def fill_idle(self) -> None:
        for slot in self.slots:
            if slot.state == "ok" and not slot.inflight:
                self.fill(slot)

    def steal(self, thief: _Slot) -> list[Unit] | None:
        """The last untouched case group of the longest queue of another runner."""
        donors = sorted((s for s in self.slots if s is not thief and s.state == "ok"
                         and s.queue), key=lambda s: -len(s.queue))
        for donor in donors:
            group = take_tail_group(donor.queue, {u[0] for u in donor.inflight.values()})
            if group is not None:
                return group
        return None

    # ------------------------------------------------------------ faults
    def set_aside(self, slot: _Slot, unit: Unit, err: BaseException) -> None:
        """``slot`` failed on ``unit``: every unit it holds goes back to the front of the
        pool (grouped by case), its other in-flight units become orphans."""
        slot.n_failures += 1
        slot.last_error = _first_line(err)
        slot.state = "set-aside"
        slot.aside_since = time.monotonic()
        slot.probe_at = slot.aside_since + PROBE_INTERVAL_S
        cut = [unit, *slot.inflight.values()]
        for ref, other in slot.inflight.items():
            self.owner.pop(ref, None)
            self.orphans[ref] = (slot, other)
        slot.inflight.clear()
        back = [u for u in [*cut, *slot.queue] if self.key(u) in self.remaining]
        slot.queue.clear()
        self.n_resubmitted += sum(self.key(u) in self.remaining for u in cut)
        # the plan's order within the returned units, then ahead of the rest of the pool
        order = {u: i for i, u in enumerate(self.run_.todo)}
        self.pool.extendleft(reversed(case_groups(sorted(back, key=order.__getitem__))))
        self.check_runners()
        for other in self.slots:
            self.fill(other)

    def probe_set_aside(self) -> None:
        now = time.monotonic()
        for slot in self.slots:
            if slot.state != "set-aside":
                continue
            if now - slot.aside_since > self.cluster.timeout_s:
                self.lose(slot, f"not back within {self.cluster.timeout_s:g} s")
            elif slot.probe is None and now >= slot.probe_at:
                try:
                    slot.probe = slot.handle.info.remote()
                except self.failures as err:
                    self.lose(slot, _first_line(err))

    def probed(self, slot: _Slot, ref: Any) -> None:
        try:
            info = self.ray.get(ref)
        except self.unavailable:
            slot.probe_at = time.monotonic() + PROBE_INTERVAL_S  # not reachable yet
            return
        except self.failures as err:
            self.lose(slot, _first_line(err))
            return
        problem = self.cluster.problem(info)
        if problem:
            self.lose(slot, problem)
            return
        slot.info, slot.state = info, "ok"  # restarted (maybe on another node)
        self.fill(slot)

    def lose(self, slot: _Slot, why: str) -> None:
        slot.state, slot.last_error = "lost", why
        try:
            self.ray.kill(slot.handle)
        except Exception:  # noqa: BLE001 - already gone
            pass
        self.check_runners()

    def check_runners(self) -> None:
        """Stop the run when no runner is left that could take the remaining units.

        Raises:
            RayRunError: every runner is lost.
        """
        if any(slot.state != "lost" for slot in self.slots):
            return
        why = "; ".join(f"runner {s.index}: {s.last_error}" for s in self.slots)
        out = self.run_.out
        raise RayRunError(f"every runner was lost ({why}); {out} keeps the "
                          f"{len(self.run_.todo) - len(self.remaining)} line(s) written now; "
                          "resume the run to continue (resume=True, clinenv run --resume)")
