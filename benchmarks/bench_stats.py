"""Speed of the paired statistics in :mod:`clinenv.evaluation.stats`, on one CPU core.

Measures, on synthetic correctness matrices of 288 cases x 3 repetitions for two methods:

(a) one :func:`paired_bootstrap_ci` with 10,000 case-cluster resamples;
(b) a family of 28 :func:`sign_flip_test` calls of 20,000 sign patterns each (EGIP
    Table 8), followed by :func:`holm` on the 28 p values.

Each figure is the median of ``--repeat`` timed runs after one warm-up. The process is
pinned to one core with :func:`os.sched_setaffinity` when available, and BLAS threads
are limited to one through the usual environment variables (set before numpy loads).

Targets: (a) < 1 s, (b) < 5 s.

Usage::

    python benchmarks/bench_stats.py [--repeat R] [--cases N] [--core K]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
             "BLIS_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from clinenv.evaluation import holm, paired_bootstrap_ci, sign_flip_test  # noqa: E402

TARGET_BOOTSTRAP_S = 1.0
TARGET_SIGN_FLIPS_S = 5.0
N_TESTS = 28


def pin(core: int) -> str:
    """Pin this process to ``core``; a note saying what happened."""
    if hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {core})
            return f"pinned to core {core}"
        except OSError as exc:
            return f"not pinned ({exc})"
    return "not pinned (os.sched_setaffinity unavailable)"


def timed(fn, repeat: int) -> tuple[float, list[float]]:
    """Median wall time of ``repeat`` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs (median reported)")
    parser.add_argument("--cases", type=int, default=288, help="cases per comparison")
    parser.add_argument("--repetitions", type=int, default=3, help="repetitions per case")
    parser.add_argument("--core", type=int, default=0, help="CPU core to pin to")
    args = parser.parse_args(argv)

    note = pin(args.core)
    rng = np.random.default_rng(2024)
    shape = (args.cases, args.repetitions)
    a = (rng.random(shape) < 0.45).astype(float)
    b = (rng.random(shape) < 0.55).astype(float)
    family = [((rng.random(shape) < 0.45).astype(float),
               (rng.random(shape) < 0.45 + 0.01 * k).astype(float)) for k in range(N_TESTS)]

    def bootstrap() -> None:
        paired_bootstrap_ci(a, b, n_resamples=10_000, seed=1)

    def sign_flips() -> None:
        p = [sign_flip_test(x, y, n_resamples=20_000, seed=k)
             for k, (x, y) in enumerate(family)]
        holm(p)

    t_boot, all_boot = timed(bootstrap, args.repeat)
    t_flip, all_flip = timed(sign_flips, args.repeat)
    ci = paired_bootstrap_ci(a, b, n_resamples=10_000, seed=1)

    print(f"clinenv.evaluation.stats benchmark ({note}; numpy {np.__version__}; "
          f"median of {args.repeat} after a warm-up)")
    print(f"data: {args.cases} cases x {args.repetitions} repetitions x 2 methods")
    print(f"(a) paired bootstrap, 10,000 resamples: {t_boot:.3f} s "
          f"(target < {TARGET_BOOTSTRAP_S:g} s: "
          f"{'PASS' if t_boot < TARGET_BOOTSTRAP_S else 'MISS'})"
          f"  runs: {', '.join(f'{t:.3f}' for t in all_boot)}")
    print(f"    difference {ci.difference:+.2f} pp [{ci.low:.2f}, {ci.high:.2f}]")
    print(f"(b) {N_TESTS} sign-flip tests x 20,000 + Holm: {t_flip:.3f} s "
          f"(target < {TARGET_SIGN_FLIPS_S:g} s: "
          f"{'PASS' if t_flip < TARGET_SIGN_FLIPS_S else 'MISS'})"
          f"  runs: {', '.join(f'{t:.3f}' for t in all_flip)}")
    ok = t_boot < TARGET_BOOTSTRAP_S and t_flip < TARGET_SIGN_FLIPS_S
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
