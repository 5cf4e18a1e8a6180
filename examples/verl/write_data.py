"""Write verl's parquet files for clinenv: ``train.parquet`` (the construction cases) and
``validation.parquet`` (the held-out cases) of a :func:`clinenv.datasets.split_cases`
split (fraction 0.7, seed 0), rows of :func:`clinenv.integrations.verl.verl_rows`
(``agent_name: clinenv_agent``). Needs clinenv[verl] (pandas and pyarrow come with verl).

    python examples/verl/write_data.py --out $HOME/data/clinenv --env-id EGIP-MedQA-v0 \\
        --exclude-flags target_in_records target_in_menu

``--exclude-flags`` leaves the flagged cases out of both files after the split, so a
held-out case stays held out; each file's note (stderr) says what was left out.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from clinenv.integrations.verl import verl_rows


def write_dataset(out_dir: str | Path, env_id: str = "EGIP-Demo-v0", *, fraction: float = 0.7,
                  seed: int = 0, exclude_flags: tuple[str, ...] = (),
                  **env_kwargs) -> dict[str, Path]:
    """Write the two files under ``out_dir``; returns their paths by split name.

    Raises:
        ValueError: as :func:`clinenv.integrations.verl.verl_rows`.
    """
    import gymnasium as gym
    import pandas as pd

    import clinenv  # noqa: F401  (registers the environment ids)
    from clinenv.datasets import split_cases

    env = gym.make(env_id, **env_kwargs)
    try:
        cases = env.unwrapped.pool.cases
    finally:
        env.close()
    split = split_cases(cases, fraction, seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, ids in (("train", split.construction), ("validation", split.evaluation)):
        with warnings.catch_warnings():  # said once below, without the warning's frame
            warnings.simplefilter("ignore", UserWarning)
            rows = verl_rows(env_id, list(ids), seed=seed, exclude_flags=exclude_flags,
                             **env_kwargs)
        if rows.note:
            print(f"{name}: {rows.note}", file=sys.stderr)
        paths[name] = out / f"{name}.parquet"
        pd.DataFrame(list(rows)).to_parquet(paths[name])
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, metavar="DIR")
    parser.add_argument("--env-id", default="EGIP-Demo-v0")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--exclude-flags", nargs="+", default=[], metavar="FLAG",
                        help="leave out cases with these flags, e.g. target_in_records "
                             "target_in_menu")
    args = parser.parse_args(argv)
    try:
        paths = write_dataset(args.out, args.env_id, seed=args.seed,
                              exclude_flags=tuple(args.exclude_flags))
    except ValueError as err:
        parser.error(str(err))
    for name, path in paths.items():
        print(f"{name}: {path}")


if __name__ == "__main__":
    main()
