"""The scripted doctor on MedQA under each patient persona and examiner-noise setting.

Runs ``clinenv run --env EGIP-MedQA-v0 --doctor scripted --seed 0`` (or ``--env ID``)
once per setting
(:data:`SETTINGS`: the flags ``--patient-persona`` / ``--exam-noise``), then prints a
Markdown table read from the run logs: accuracy (share of the 107 scheduled episodes
scored correct), exams per episode (``n_exams_requested``), workup recall (the
``workup_recall`` reward component), and the measurement events the noise changed
(``noise: true``). The same metrics come from ``clinenv eval --components
LABEL=RUN.jsonl ...`` (printed at the end).

Usage::

    CLINENV_DATA_DIR=/path/to/agentclinic python benchmarks/persona_table.py \\
        [--out-dir runs/persona] [--episodes N] [--env EGIP-NEJM-v0]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

#: ``(label, extra clinenv run flags)``, one run each.
SETTINGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("cooperative", ()),
    ("reluctant", ("--patient-persona", "reluctant")),
    ("vague", ("--patient-persona", "vague")),
    ("lay", ("--patient-persona", "lay")),
    ("forgetful:0.3", ("--patient-persona", "forgetful:0.3")),
    ("tangential:0.3", ("--patient-persona", "tangential:0.3")),
    ("unavailable:0.2", ("--exam-noise", "unavailable=0.2")),
    ("unavailable:0.5", ("--exam-noise", "unavailable=0.5")),
    ("delayed:0.5", ("--exam-noise", "delayed=0.5")),
)


def run_setting(flags: tuple[str, ...], out: Path, episodes: int | None,
                env_id: str = "EGIP-MedQA-v0") -> None:
    """One ``clinenv run`` of the scripted doctor (an existing log is replaced)."""
    out.unlink(missing_ok=True)
    command = [sys.executable, "-m", "clinenv", "run", "--env", env_id,
               "--doctor", "scripted", "--seed", "0", "--quiet", "--out", str(out), *flags]
    if episodes is not None:
        command += ["--episodes", str(episodes)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def metrics(path: Path) -> dict[str, float]:
    """Accuracy (%), exams per episode, workup recall (mean over the episodes that have
    one; NaN if none) and noised events per episode of a run log (episode lines)."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
             if line.strip()]
    episodes = [line for line in lines if "case_id" in line and "events" in line]
    noised = [sum(1 for e in line["events"] if e.get("noise")) for line in episodes]
    # None where the case has no recorded workup to recall (NEJM's free-text tests)
    recall = [line["reward_components"]["workup_recall"] for line in episodes
              if line["reward_components"].get("workup_recall") is not None]
    return {
        "episodes": len(episodes),
        "accuracy": 100.0 * sum(bool(line.get("correct")) for line in episodes)
        / len(episodes),
        "exams": statistics.fmean(line["n_exams_requested"] for line in episodes),
        "recall": statistics.fmean(recall) if recall else float("nan"),
        "noised": statistics.fmean(noised),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=Path("runs/persona"))
    parser.add_argument("--episodes", type=int, default=None,
                        help="first N cases only (default: all)")
    parser.add_argument("--env", default="EGIP-MedQA-v0",
                        help="environment id (default: EGIP-MedQA-v0)")
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    rows, paths = [], []
    for label, flags in SETTINGS:
        path = args.out_dir / (label.replace(":", "_") + ".jsonl")
        run_setting(flags, path, args.episodes, args.env)
        rows.append((label, metrics(path)))
        paths.append(f"{label}={path}")
    print("| setting | episodes | accuracy % | exams / episode | workup recall "
          "| noised results / episode |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, m in rows:
        print(f"| {label} | {m['episodes']} | {m['accuracy']:.2f} | {m['exams']:.2f} "
              f"| {m['recall']:.3f} | {m['noised']:.2f} |")
    print("\nclinenv eval --components " + " ".join(paths))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
