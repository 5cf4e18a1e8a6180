"""Instructions per warm doctor step of ``EGIP-MedQA-v0``, counted by valgrind's callgrind.

Wall-clock steps/s (``benchmarks/bench_env.py``) moves with the machine: the same code
has read 3.9 k and 20 k steps/s on two machines of the project. The instruction count
does not, so it is the figure to compare across changes and machines.

Method: the same loop as ``bench_env.py`` (``gym.make`` defaults, the scripted doctor,
every case once per pass, a warm-up pass first) is run twice under
``valgrind --tool=callgrind``, with one and with two timed passes; the difference of the
two totals, over the steps of one pass, is the count per warm step (start-up, imports
and the warm-up cancel out). Takes about two minutes. Needs ``valgrind`` on ``PATH``;
MedQA needs ``CLINENV_DATA_DIR`` (without it the bundled demo set is measured, with a
note).

Usage::

    python benchmarks/bench_env_instructions.py [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: The loop run under callgrind: ``passes`` timed passes after one warm-up pass; prints
#: the steps of the timed passes.
LOOP = """
import sys
import gymnasium as gym
import clinenv  # noqa: F401
from clinenv.agents.scripted_doctor import ScriptedDoctor
env = gym.make(sys.argv[1], **({"data_dir": sys.argv[3]} if len(sys.argv) > 3 else {}))
doctor, steps = ScriptedDoctor(), 0
n_cases = len(env.unwrapped.pool.cases)
for timed in range(1 + int(sys.argv[2])):
    for index in range(n_cases):
        obs, info = env.reset(seed=index, options={"case_id": index})
        doctor.reset(seed=index)
        done = False
        while not done:
            obs, _r, term, trunc, info = env.step(doctor.act(obs, info))
            done, steps = term or trunc, steps + (timed > 0)
print("steps", steps)
"""


def count(env_id: str, passes: int, data_dir: str | None, work: Path) -> tuple[int, int]:
    """``(instructions, timed steps)`` of the loop with ``passes`` timed passes."""
    script = work / "loop.py"
    script.write_text(LOOP)
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work}/cg.{passes}",
               sys.executable, str(script), env_id, str(passes), *([data_dir] if data_dir
                                                                    else [])]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"callgrind run exited {done.returncode}: {done.stderr[-2000:]}")
    collected = re.findall(r"Collected : (\d+)", done.stderr)
    steps = re.search(r"steps (\d+)", done.stdout)
    if not collected or steps is None:
        raise RuntimeError(f"no instruction count in callgrind's output: {done.stderr[-2000:]}")
    return int(collected[-1]), int(steps.group(1))


def main(argv: list[str] | None = None) -> int:
    """Print the instructions per warm step; returns 0 (2 without valgrind)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None, help="folder holding the MedQA file")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind not found on PATH: nothing measured", file=sys.stderr)
        return 2
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_env import choose_env

    env_id, note = choose_env(args.data_dir)
    with tempfile.TemporaryDirectory() as tmp:
        one, steps_one = count(env_id, 1, args.data_dir, Path(tmp))
        two, steps_two = count(env_id, 2, args.data_dir, Path(tmp))
    steps = steps_two - steps_one
    print(f"{env_id}  ({note})")
    print(f"  instructions, 1 and 2 timed passes   {one:,} / {two:,}")
    print(f"  steps in one pass                    {steps:,}")
    print(f"  instructions per warm doctor step    {(two - one) / steps / 1e6:.3f} M")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
