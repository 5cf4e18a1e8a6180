"""README.md, run as written: its ```bash and ```python blocks in order, on the demo set.

A new user reads README top to bottom and runs each block in turn, in one working copy;
a block that fails, or that fails because an earlier one wrote into its way, is a README
defect. This module runs them so (the convention is in docs/testing.md):

- in a fresh temporary folder holding a copy of README.md and what its commands use
  (:data:`COPIED`), not the package sources: the installed clinenv runs, and a copy of
  ``clinenv/`` in the working folder would shadow it for ``python -m``;
- offline, with no data configured: ``CLINENV_DATA_DIR`` and ``CLINENV_TEST_DATA``
  unset, an empty user cache, so only the bundled demo set is found;
- with this interpreter's ``bin/`` first on ``PATH``, as after ``source
  .venv/bin/activate``;
- each bash block in a new ``bash -e -o pipefail``, each python block in a new process
  of this interpreter (from a file outside the working folder); files carry over from
  block to block;
- then once more every bash block that names a glob, which must still succeed: a glob
  reads whatever later sections added to its folder (README's ``clinenv eval
  runs/*.jsonl`` once met the CDEG section's scripted runs with another exam budget, and
  ``report`` its logs over different case sets).

A comment on the line before a block's fence says how to run it: ``<!-- not run by
tests: REASON -->`` (skipped), ``<!-- tests run this block after its venv set-up -->``
(README's first set-up command, run from ``.venv/bin/clinenv`` on in this environment)
and ``<!-- tests expect exit status N: REASON -->`` (one command, exit status N).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

#: What the working folder holds: README.md and the files its commands may use.
COPIED = ("README.md", "examples", "benchmarks", "docs", "pyproject.toml", "setup.cfg")

#: README's two set-up commands, byte for byte (CI runs the second one verbatim).
SETUP_RUN = ("python3 -m venv .venv && .venv/bin/pip install -q -e . && "
             ".venv/bin/clinenv run --doctor scripted --resume")
SETUP_TEST = ("python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && "
              ".venv/bin/python -m pytest -q -n auto --dist loadfile")

SKIP = re.compile(r"<!--\s*not run by tests:\s*(?P<reason>\S.*?)\s*-->")
AFTER_VENV = re.compile(r"<!--\s*tests run this block after its venv set-up\s*-->")
EXPECT = re.compile(r"<!--\s*tests expect exit status (?P<status>\d+):\s*(?P<reason>\S.*?)\s*-->")
VENV_SETUP = re.compile(r"^python3 -m venv \.venv && \.venv/bin/pip install -q -e \S+ && ")
FENCE = re.compile(r"^```(?P<lang>[\w+-]*)\s*$")
RUN_LANGS = frozenset({"bash", "python"})
QUIET_LANGS = frozenset({"", "text"})
BLOCK_TIMEOUT_S = 180


@dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    skip: str | None = None  # reason, for a block the tests do not run
    after_venv: bool = False
    status: int = 0  # expected exit status

    @property
    def globs(self) -> bool:
        """Whether a command of this bash block names a glob (comments left out)."""
        return self.lang == "bash" and any(
            "*" in line.split(" #")[0] for line in self.text.splitlines()
            if not line.lstrip().startswith("#"))

    def commands(self) -> list[str]:
        """Its commands: lines joined over ``\\`` continuations, blanks and comments out."""
        joined = re.sub(r"\\\n", " ", self.text)
        return [c for c in (x.strip() for x in joined.splitlines())
                if c and not c.startswith("#")]


class SequenceFailure(AssertionError):
    """A README block did not exit as expected."""


def parse_blocks(text: str) -> list[Block]:
    """The fenced code blocks of a Markdown text, with their markers."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        start, lang = i, match["lang"]
        end = next((j for j in range(start + 1, len(lines)) if lines[j].rstrip() == "```"),
                   None)
        if end is None:
            raise SequenceFailure(f"README line {start + 1}: code block never closed")
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        skip = SKIP.search(before)
        expect = EXPECT.search(before)
        blocks.append(Block(line=start + 1, lang=lang, text="\n".join(lines[start + 1:end]),
                            skip=skip["reason"] if skip else None,
                            after_venv=bool(AFTER_VENV.search(before)),
                            status=int(expect["status"]) if expect else 0))
        i = end + 1
    return blocks


def runnable(blocks: list[Block]) -> list[Block]:
    """The blocks that the sequence runs; a fence of an unknown language fails."""
    unknown = [b for b in blocks if b.lang not in RUN_LANGS | QUIET_LANGS]
    if unknown:
        raise SequenceFailure(
            "code fences the README test does not know (use bash, python, text or none): "
            + ", ".join(f"line {b.line} ```{b.lang}" for b in unknown))
    out = []
    for block in blocks:
        if block.lang not in RUN_LANGS or block.skip:
            continue
        if block.status and len(block.commands()) != 1:
            raise SequenceFailure(f"README line {block.line}: a block with an expected exit "
                                  f"status must hold one command, not "
                                  f"{len(block.commands())}")
        out.append(block)
    return out


def working_copy(folder: Path, readme_text: str) -> Path:
    """A fresh working folder: the :data:`COPIED` files of the repository, and README."""
    folder.mkdir(parents=True)
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, folder / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif source.is_file():
            shutil.copy2(source, folder / name)
    (folder / "README.md").write_text(readme_text, encoding="utf-8")
    return folder


def sequence_env(tmp: Path) -> dict[str, str]:
    """A new user's shell: the venv first on PATH, no data configured, an empty cache."""
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ)
    for name in ("CLINENV_DATA_DIR", "CLINENV_TEST_DATA", "PYTHONPATH"):
        env.pop(name, None)
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
               VIRTUAL_ENV=str(Path(sys.prefix)), XDG_CACHE_HOME=str(tmp / "cache"),
               MPLBACKEND="Agg", PYTHONIOENCODING="utf-8")
    return env


def script_of(block: Block) -> str:
    """The text that runs: after a venv set-up, the rest from this environment's bin/."""
    if not block.after_venv:
        return block.text
    text = block.text.strip()
    if not VENV_SETUP.match(text):
        raise SequenceFailure(f"README line {block.line}: marked as run after its venv "
                              f"set-up, but it does not start with one: {text!r}")
    return VENV_SETUP.sub("", text).replace(".venv/bin/", f"{Path(sys.executable).parent}/")


def run_block(block: Block, cwd: Path, env: dict[str, str], scripts: Path) -> tuple[int, str]:
    """Run one block; its exit status and its output (stdout and stderr together)."""
    scripts.mkdir(exist_ok=True)
    if block.lang == "bash":
        path = scripts / f"block_{block.line}.sh"
        path.write_text(script_of(block) + "\n", encoding="utf-8")
        command = ["bash", "-e", "-o", "pipefail", str(path)]
    else:
        path = scripts / f"block_{block.line}.py"
        path.write_text(block.text + "\n", encoding="utf-8")
        command = [sys.executable, str(path)]
    try:
        proc = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, encoding="utf-8",
                              errors="replace", timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        return 124, f"timed out after {BLOCK_TIMEOUT_S} s\n{exc.stdout or ''}"
    return proc.returncode, proc.stdout


def run_sequence(readme_text: str, tmp: Path) -> list[tuple[Block, float]]:
    """Run README's blocks in order in a fresh working folder under ``tmp``, then every
    glob block again; raise :class:`SequenceFailure` on the first block that exits
    otherwise than expected. Returns each run block with its wall time."""
    blocks = runnable(parse_blocks(readme_text))
    cwd = working_copy(tmp / "work", readme_text)
    env = sequence_env(tmp)
    scripts = tmp / "blocks"
    done: list[tuple[Block, float]] = []
    plan = [(b, "") for b in blocks] + [(b, " (again, after the whole README)")
                                       for b in blocks if b.globs]
    for block, when in plan:
        start = time.perf_counter()
        status, output = run_block(block, cwd, env, scripts)
        done.append((block, time.perf_counter() - start))
        if status != block.status:
            tail = "\n".join(output.splitlines()[-25:])
            raise SequenceFailure(
                f"README line {block.line} ```{block.lang}{when} exited {status}, expected "
                f"{block.status}:\n{block.text}\n--- its output, last lines ---\n{tail}")
    return done


# ------------------------------------------------------------------------------ README
def test_readme_runs_in_order_on_the_demo_set(tmp_path):
    start = time.perf_counter()
    done = run_sequence(README.read_text(encoding="utf-8"), tmp_path)
    wall = time.perf_counter() - start
    assert done, "README has no block that the tests run"
    print(f"README sequence: {len(done)} block runs in {wall:.1f} s; slowest: "
          + ", ".join(f"line {b.line} {t:.1f} s"
                      for b, t in sorted(done, key=lambda x: -x[1])[:3]))


def test_readme_keeps_its_two_set_up_commands_verbatim():
    blocks = parse_blocks(README.read_text(encoding="utf-8"))
    texts = [b.text for b in blocks if b.lang == "bash"]
    assert SETUP_RUN in texts and SETUP_TEST in texts
    run, test = (next(b for b in blocks if b.text == t) for t in (SETUP_RUN, SETUP_TEST))
    assert run.after_venv and not run.skip
    assert test.skip, "the test-suite command must be marked: the tests cannot run it"
    assert run.line < test.line


def test_readme_marks_say_why():
    """Every skipped block has a reason; no block is both skipped and expected to run."""
    blocks = parse_blocks(README.read_text(encoding="utf-8"))
    runnable(blocks)  # no unknown fence, expected statuses on single commands
    for block in blocks:
        assert not (block.skip and (block.after_venv or block.status)), block.line


# ----------------------------------------------------------------- the runner itself
def _readme(*blocks: str) -> str:
    return "\n".join(f"Step {i}.\n\n```bash\n{b}\n```\n" for i, b in enumerate(blocks))


RUN = "clinenv run --env EGIP-Demo-v0 --quiet"


@pytest.mark.parametrize("readme, message", [
    # a later command collides with an earlier one: one label, two exam budgets
    (_readme(RUN, f"{RUN} --exam-budget 3 --out runs/budget3.jsonl",
             "clinenv eval runs/*.jsonl"),
     "two different runs are labelled 'scripted'"),
    # an earlier glob meets what a later section wrote: a pair over different case sets
    (_readme(RUN, "clinenv report runs/*.jsonl --out reports/all.html",
             "clinenv data split demo --construction 0.5 --seed 0 --out runs/split\n"
             f"{RUN} --preset egip-no-menu --cases runs/split/evaluation.txt "
             "--out runs/no-menu.jsonl"),
     "different case sets"),
], ids=["label-collision", "case-set-collision"])
def test_the_runner_fails_on_commands_that_collide(tmp_path, readme, message):
    with pytest.raises(SequenceFailure, match=message):
        run_sequence(readme, tmp_path)


def test_the_runner_reads_its_marks(tmp_path):
    readme = ("<!-- not run by tests: needs a model server -->\n```bash\nexit 7\n```\n\n"
              "<!-- tests expect exit status 3: documented -->\n```bash\nexit 3\n```\n\n"
              "```python\nprint('ok')\n```\n\n```text\nnot code\n```\n")
    assert [(b.line, b.status) for b, _ in run_sequence(readme, tmp_path)] == [(7, 3), (11, 0)]
    with pytest.raises(SequenceFailure, match="exited 0, expected 3"):
        run_sequence(readme.replace("exit 3", "true"), tmp_path / "again")
    with pytest.raises(SequenceFailure, match="fences the README test does not know"):
        runnable(parse_blocks("```sh\nclinenv eval\n```\n"))
    with pytest.raises(SequenceFailure, match="must hold one command"):
        runnable(parse_blocks("<!-- tests expect exit status 1: x -->\n```bash\ntrue\n"
                              "false\n```\n"))
