"""Speed and memory of the EGIP environment with the scripted doctor.

Measures, on one CPU core:

(a) throughput of ``EGIP-MedQA-v0`` with :class:`~clinenv.agents.scripted_doctor.ScriptedDoctor`
    over every case (or the first ``--episodes``): doctor steps per second and episodes
    per second, timing only ``env.step`` and ``doctor.act`` (``reset`` is reported
    apart). Rates are given including and excluding the doctor's own time, and the mean
    ``env.step`` time per action kind of the doctor's real mix (:func:`action_kind`:
    question, exam request, invalid/feedback, answer). The pass over the cases is
    repeated ``--repeat`` times after one warm-up pass (which builds each case's shared
    artifacts); the median pass is reported. One more pass empties the retrieval
    patient's question memos before each episode (every question and question word scored
    as if new: a case met for the first time): its rate and question step time are reported
    apart and are not in the rates above.
(b) memory of ``--envs`` environments alive at once, each made with ``gym.make`` and
    reset on a case (case ``i mod n_cases``, so consecutive environments hold different
    cases): (RSS after - RSS before) / n from ``/proc/self/statm``, and as a cross-check
    the Python heap growth / n from :mod:`tracemalloc` (a second, separate batch). The
    shared case pool and the imports are loaded before the "before" reading, so the
    figure is the marginal cost of one more live environment.

Targets: >= 20,000 doctor steps/s (env + doctor), <= 1 MB per live environment. Falls
back to the bundled demo set (with a note) when the MedQA file cannot be found.

Usage::

    python benchmarks/bench_env.py [--data-dir DIR] [--episodes N] [--envs N]
                                   [--repeat R] [--core K] [--advance K] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import resource
import sys
import time
import tracemalloc

import gymnasium as gym

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.datasets import resolve_dataset
from clinenv.env import retrieval_patient
from clinenv.errors import DatasetNotFoundError

TARGET_STEPS_PER_S = 20_000
TARGET_MB_PER_ENV = 1.0
#: The action kinds of :func:`action_kind`, in report order.
ACTION_KINDS = ("question", "exam request", "invalid/feedback", "answer")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    """Current resident set size of this process (``/proc/self/statm``, Linux)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * _PAGE


def choose_env(data_dir: str | None) -> tuple[str, str]:
    """``(env_id, note)``: MedQA when its file resolves, else the demo set."""
    try:
        path = resolve_dataset("medqa", data_dir)
    except DatasetNotFoundError:
        return "EGIP-Demo-v0", ("NOTE: MedQA not found (set CLINENV_DATA_DIR or --data-dir); "
                                "measuring the bundled demo set instead")
    return "EGIP-MedQA-v0", f"dataset: {path}"


def make_env(env_id: str, data_dir: str | None) -> gym.Env:
    """``gym.make(env_id)`` with ``data_dir`` when given."""
    return gym.make(env_id, **({"data_dir": data_dir} if data_dir else {}))


def action_kind(before: dict, after: dict) -> str:
    """The kind of the doctor action that turned ``info`` ``before`` into ``after``:
    ``"answer"`` (the decision step), ``"invalid/feedback"`` (an invalid action, or a
    premature diagnosis or empty text answered by interface feedback or a fixed
    clarification), ``"exam request"`` or ``"question"``."""
    if after["action_kind"] == "answer":
        return "answer"
    if (after["invalid_actions"] > before["invalid_actions"]
            or after["action_kind"] in ("diagnosis", "empty")):
        return "invalid/feedback"
    return "exam request" if after["action_kind"] == "test_request" else "question"


def clear_question_memos(indexes: list) -> None:
    """Empty the retrieval patient's memos of question texts (readings, stems, routes)
    and what each fact index of ``indexes`` keeps (scored questions, matched stems)."""
    for memo in (retrieval_patient._reading_memo, retrieval_patient._stems,
                 retrieval_patient._routes):
        memo.cache_clear()
    for index in indexes:
        index.scored.clear()
        index.credited.clear()


def live_indexes() -> list:
    """The retrieval patient's fact indexes alive in the process (a heap walk: call it
    outside timed code)."""
    return [obj for obj in gc.get_objects() if isinstance(obj, retrieval_patient._Index)]


def _timed_episode(env: gym.Env, doctor: ScriptedDoctor, index: int,
                   kinds: dict[str, list[float]]) -> tuple[int, float, float, float]:
    """One episode: ``(steps, env_s, doctor_s, reset_s)``; each step's ``env.step`` time
    is added to ``kinds[action_kind]`` as ``[count, seconds]``."""
    clock = time.perf_counter
    t0 = clock()
    obs, info = env.reset(seed=index, options={"case_id": index})
    doctor.reset(seed=index)
    reset_s = clock() - t0
    steps, env_s, doctor_s, done = 0, 0.0, 0.0, False
    while not done:
        t0 = clock()
        action = doctor.act(obs, info)
        t1 = clock()
        obs, _reward, terminated, truncated, after = env.step(action)
        t2 = clock()
        tally = kinds[action_kind(info, after)]
        tally[0] += 1
        tally[1] += t2 - t1
        steps, env_s, doctor_s = steps + 1, env_s + t2 - t1, doctor_s + t1 - t0
        info, done = after, terminated or truncated
    return steps, env_s, doctor_s, reset_s


def bench_speed(env_id: str, data_dir: str | None, episodes: int | None,
                repeat: int) -> dict[str, float]:
    """Median pass over the cases: steps/s and episodes/s with and without the doctor,
    and ``us_<kind>`` / ``n_<kind>`` (mean ``env.step`` microseconds, and count, per
    action kind of :data:`ACTION_KINDS`)."""
    env = make_env(env_id, data_dir)
    doctor = ScriptedDoctor()
    n_cases = len(env.unwrapped.pool.cases)
    cases = range(n_cases if episodes is None else min(episodes, n_cases))
    for index in cases:  # warm-up: imports, each case's prepared artifacts
        _timed_episode(env, doctor, index, {k: [0, 0.0] for k in ACTION_KINDS})
    passes = []
    for _ in range(repeat):
        steps = 0
        env_s = doctor_s = reset_s = 0.0
        kinds = {k: [0, 0.0] for k in ACTION_KINDS}
        for index in cases:
            n, e, d, r = _timed_episode(env, doctor, index, kinds)
            steps, env_s, doctor_s, reset_s = steps + n, env_s + e, doctor_s + d, reset_s + r
        passes.append({
            "episodes": len(cases),
            "steps": steps,
            "steps_per_s_with_doctor": steps / (env_s + doctor_s),
            "steps_per_s_env_only": steps / env_s,
            "episodes_per_s_with_doctor": len(cases) / (env_s + doctor_s),
            "episodes_per_s_env_only": len(cases) / env_s,
            "doctor_share": doctor_s / (env_s + doctor_s),
            "reset_ms": 1000 * reset_s / len(cases),
            **{f"n_{k}": n for k, (n, _) in kinds.items()},
            **{f"us_{k}": 1e6 * t / n if n else float("nan") for k, (n, t) in kinds.items()},
        })
    cold = {k: [0, 0.0] for k in ACTION_KINDS}
    cold_steps, cold_s = 0, 0.0
    indexes = live_indexes()
    for index in cases:
        clear_question_memos(indexes)
        n, e, d, _ = _timed_episode(env, doctor, index, cold)
        cold_steps, cold_s = cold_steps + n, cold_s + e + d
    env.close()
    passes.sort(key=lambda p: p["steps_per_s_with_doctor"])
    n, t = cold["question"]
    return {**passes[len(passes) // 2], "us_question_cold": 1e6 * t / n if n else float("nan"),
            "steps_per_s_cold": cold_steps / cold_s}


def _build(env_id: str, data_dir: str | None, n_envs: int, advance: int) -> list[gym.Env]:
    envs = []
    doctor = ScriptedDoctor()
    for i in range(n_envs):
        env = make_env(env_id, data_dir)
        n_cases = len(env.unwrapped.pool.cases)
        obs, info = env.reset(seed=i, options={"case_id": i % n_cases})
        doctor.reset(seed=i)
        for _ in range(advance):
            obs, _r, term, trunc, info = env.step(doctor.act(obs, info))
            if term or trunc:
                break
        envs.append(env)
    return envs


def bench_memory(env_id: str, data_dir: str | None, n_envs: int,
                 advance: int) -> dict[str, float]:
    """Per-environment memory from RSS and from tracemalloc (two separate batches)."""
    warm = _build(env_id, data_dir, 1, advance)  # loads the shared pool and imports
    gc.collect()
    before = rss_bytes()
    t0 = time.perf_counter()
    envs = _build(env_id, data_dir, n_envs, advance)
    build_s = time.perf_counter() - t0
    gc.collect()
    after = rss_bytes()
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    del envs
    gc.collect()
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    envs = _build(env_id, data_dir, n_envs, advance)
    gc.collect()
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del envs, warm
    return {
        "envs": n_envs,
        "rss_before_mb": before / 2**20,
        "rss_after_mb": after / 2**20,
        "rss_per_env_mb": (after - before) / n_envs / 2**20,
        "traced_per_env_mb": (current - base) / n_envs / 2**20,
        "traced_peak_mb": peak / 2**20,
        "peak_rss_mb": peak_rss / 2**20,
        "build_ms_per_env": 1000 * build_s / n_envs,
    }


def profile_speed(env_id: str, data_dir: str | None, episodes: int | None,
                  top: int) -> str:
    """cProfile of one pass, enabled only around ``doctor.act`` and ``env.step``.

    Returns the ``top`` functions by own time, then by cumulative time, and the callers
    of the three heaviest (by own time).
    """
    env = make_env(env_id, data_dir)
    doctor = ScriptedDoctor()
    n_cases = len(env.unwrapped.pool.cases)
    profiler = cProfile.Profile()
    for index in range(n_cases if episodes is None else min(episodes, n_cases)):
        obs, info = env.reset(seed=index, options={"case_id": index})
        doctor.reset(seed=index)
        done = False
        while not done:
            profiler.enable()
            action = doctor.act(obs, info)
            obs, _r, term, trunc, info = env.step(action)
            profiler.disable()
            done = term or trunc
    env.close()
    buf = io.StringIO()
    stats = pstats.Stats(profiler, stream=buf)
    stats.sort_stats("tottime").print_stats(top)
    stats.print_callers(3)
    stats.sort_stats("cumulative").print_stats(top + 15)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the tables; returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None, help="folder holding the MedQA file")
    parser.add_argument("--episodes", type=int, default=None,
                        help="first N cases for the speed test (default: all)")
    parser.add_argument("--envs", type=int, default=1000, help="live environments (1000)")
    parser.add_argument("--repeat", type=int, default=3, help="speed passes (median)")
    parser.add_argument("--core", type=int, default=None,
                        help="CPU core to pin to (default: the first allowed one)")
    parser.add_argument("--advance", type=int, default=0,
                        help="doctor steps taken in each live env before measuring (0)")
    parser.add_argument("--profile", action="store_true",
                        help="print cProfile's top 10 hot spots of the speed test")
    args = parser.parse_args(argv)

    if hasattr(os, "sched_setaffinity"):
        core = args.core if args.core is not None else min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {core})
        pinned = f"pinned to CPU core {core}"
    else:
        pinned = "not pinned (no sched_setaffinity)"
    env_id, note = choose_env(args.data_dir)
    print(f"{env_id}  ({note}; {pinned}; python {sys.version.split()[0]}, "
          f"gymnasium {gym.__version__}, clinenv {clinenv.__version__})")

    speed = bench_speed(env_id, args.data_dir, args.episodes, args.repeat)
    mem = bench_memory(env_id, args.data_dir, args.envs, args.advance)

    ok_speed = speed["steps_per_s_with_doctor"] >= TARGET_STEPS_PER_S
    ok_mem = mem["rss_per_env_mb"] <= TARGET_MB_PER_ENV
    rows = [
        ("episodes x steps", f"{speed['episodes']} x {speed['steps']} steps", ""),
        ("doctor steps/s (env + doctor)", f"{speed['steps_per_s_with_doctor']:,.0f}",
         f">= {TARGET_STEPS_PER_S:,}  {'PASS' if ok_speed else 'MISS'}"),
        ("doctor steps/s (env only)", f"{speed['steps_per_s_env_only']:,.0f}", ""),
        ("episodes/s (env + doctor)", f"{speed['episodes_per_s_with_doctor']:,.1f}", ""),
        ("episodes/s (env only)", f"{speed['episodes_per_s_env_only']:,.1f}", ""),
        ("doctor share of time", f"{100 * speed['doctor_share']:.1f} %", ""),
        *((f"env.step, {kind}", f"{speed[f'us_{kind}']:.1f} us",
           f"{speed[f'n_{kind}']:,} steps") for kind in ACTION_KINDS),
        ("memo emptied each episode:", "", ""),
        ("  doctor steps/s (env + doctor)", f"{speed['steps_per_s_cold']:,.0f}",
         "one pass, not in the rates above"),
        ("  env.step, question", f"{speed['us_question_cold']:.1f} us", ""),
        ("reset (not in rates)", f"{speed['reset_ms']:.2f} ms/episode", ""),
        (f"live envs (advance {args.advance})", f"{mem['envs']:,}", ""),
        ("RSS before -> after", f"{mem['rss_before_mb']:.1f} -> {mem['rss_after_mb']:.1f} MB",
         ""),
        ("per env, RSS", f"{mem['rss_per_env_mb']:.3f} MB",
         f"<= {TARGET_MB_PER_ENV} MB  {'PASS' if ok_mem else 'MISS'}"),
        ("per env, tracemalloc", f"{mem['traced_per_env_mb']:.3f} MB", "cross-check"),
        ("peak RSS of process", f"{mem['peak_rss_mb']:.1f} MB", ""),
        ("gym.make + reset", f"{mem['build_ms_per_env']:.2f} ms/env", ""),
    ]
    width = [max(len(r[i]) for r in rows) for i in range(3)]
    for name, value, target in rows:
        print(f"  {name.ljust(width[0])}  {value.rjust(width[1])}  {target}".rstrip())
    if args.profile or not ok_speed:
        print("\ncProfile of one speed pass (doctor.act + env.step only):")
        print(profile_speed(env_id, args.data_dir, args.episodes, 10))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
