"""docs/export.md, run as written: its first bash block (a demo run and its export) and
its "Three recipes" block, whose printed line must be the one the page quotes; then the
recipe's GRPO rows through the TRL adapter (no TRL needed): TRL's ``reset(**row)``
appends the opening text to the row's last message, and the result must be the opening
of the tool view's export of the same episode, with the opening once."""
# issue 30

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
from pathlib import Path

from clinenv.cli import main
from clinenv.integrations.tools import TASK_INTRO
from clinenv.integrations.trl import make_env_factory

PAGE = Path(__file__).resolve().parents[2] / "docs" / "export.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks(lang: str) -> list[str]:
    return [text for found, text in FENCE.findall(PAGE.read_text(encoding="utf-8"))
            if found == lang]


def commands(block: str) -> list[list[str]]:
    joined = block.replace("\\\n", " ")
    return [shlex.split(line) for line in joined.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_the_recipes_print_what_the_page_says_and_grpo_rows_open_once(workdir):
    for argv in commands(blocks("bash")[0]):
        assert argv[0] == "clinenv"
        assert main([*argv[1:], "--quiet"] if argv[1] == "run" else argv[1:]) == 0
    recipes = next(b for b in blocks("python") if "# 2. GRPO rows" in b)
    out = io.StringIO()
    namespace: dict = {}
    with contextlib.redirect_stdout(out):
        exec(compile(recipes, str(PAGE), "exec"), namespace)  # noqa: S102
    quoted = re.search(r"it printed `([^`]*)`", PAGE.read_text(encoding="utf-8")).group(1)
    assert out.getvalue().strip() == " ".join(quoted.split())
    assert out.getvalue().strip() == "48 episodes: 10 SFT, 48 GRPO rows, 2 pairs"

    # TRL's prompt for a row: the reset text appended to the last message (trl 1.16,
    # GRPOTrainer._generate_and_score_completions)
    assert main(["export", "runs/export/demo_explore.jsonl", "--format", "tools",
                 "--out", "tools.jsonl"]) == 0
    heads = {}
    for line in Path("tools.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        heads[(row["case_id"], row["seed"])] = [
            {"role": m["role"], "content": m["content"]} for m in row["messages"][:2]]
    env = make_env_factory("EGIP-Demo-v0")()
    grpo = namespace["grpo"]
    assert len(grpo) == len(heads) == 48
    for row in grpo:
        prompt = row["prompt"]
        opening = env.reset(**row)
        shown = prompt[:-1] + [{**prompt[-1], "content": prompt[-1]["content"] + opening}]
        assert shown == heads[(row["case_id"], row["seed"])]
        assert shown[-1]["content"] == TASK_INTRO + opening
        assert shown[-1]["content"].count("# Task\n") == 1

    # the next block drops the flagged cases' rows: the figures the page gives after it
    drop = next(b for b in blocks("python") if "exclude_flags=LEAK_FLAGS" in b)
    before = {r["case_id"] for r in namespace["rows"]}
    exec(compile(drop, str(PAGE), "exec"), namespace)  # noqa: S102
    rows = namespace["rows"]
    assert before - {r["case_id"] for r in rows} == {"demo-01", "demo-05"}
    assert (len(rows), sum(r["correct"] for r in rows)) == (40, 3)
    assert "drops demo-01 and demo-05 and leaves 40 episodes, of which 3 are correct" in \
        " ".join(PAGE.read_text(encoding="utf-8").split())
