"""SkyRL entrypoint for clinenv, in the shape of SkyRL's own environment examples
(``examples/train/<env>/main_<env>.py``): the environment is registered inside the Ray
entrypoint task, where SkyRL's workers make their environments, then ``BasePPOExp``
runs. ``run_clinenv.sh`` next to it holds the settings clinenv needs.

Write the parquet files first (needs clinenv[skyrl], which brings datasets):

    python examples/skyrl/main_clinenv.py --write-data $HOME/data/clinenv --env-id EGIP-Demo-v0

``train.parquet`` holds the construction cases and ``validation.parquet`` the held-out
cases of a :func:`clinenv.datasets.case_split.split_cases` split (fraction 0.7, seed 0).
``--exclude-flags target_in_records target_in_menu`` (``clinenv.integrations.tools.
LEAK_FLAGS``; any case flag name) leaves the flagged cases out of both files, after the
split, so a held-out case stays held out; each file's note says what was left out.
Then train (needs SkyRL's trainer and GPUs; see ``run_clinenv.sh``):

    python examples/skyrl/main_clinenv.py data.train_data="['$HOME/data/clinenv/train.parquet']" ...

The doctor plays the text protocol, so SkyRL must let an episode run: a text episode at
T acquisition rounds takes up to T + 1 replies (19 rounds: 20), and SkyRL's defaults
(``generator.max_turns=1``, ``generator.max_input_length=512``) end it after the first
reply. ``generator.batched=false`` is needed for any multi-turn environment.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from clinenv.integrations.skyrl import register_clinenv, task_rows

#: The settings SkyRL needs for a clinenv episode (docs/training.md, SkyRL).
REQUIRED_OVERRIDES = (
    "environment.env_class=clinenv",
    "generator.batched=false",
    "generator.max_turns=20",
    "generator.max_input_length=8192",
)


def write_dataset(out_dir: str | Path, env_id: str = "EGIP-Demo-v0", *, fraction: float = 0.7,
                  seed: int = 0, exclude_flags: tuple[str, ...] = (),
                  **env_kwargs) -> dict[str, Path]:
    """Write ``train.parquet`` (construction cases) and ``validation.parquet`` (held-out
    cases) of ``env_id`` under ``out_dir``, without the cases flagged ``exclude_flags``
    (:func:`clinenv.integrations.skyrl.task_rows`; its note, what was left out, goes to
    stderr); returns their paths by split name."""
    import datasets
    import gymnasium as gym

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
            rows = task_rows(env_id, list(ids), seed=seed, exclude_flags=exclude_flags,
                             **env_kwargs)
        if rows.note:
            print(f"{name}: {rows.note}", file=sys.stderr)
        paths[name] = out / f"{name}.parquet"
        datasets.Dataset.from_list(rows).to_parquet(str(paths[name]))
    return paths


def _skyrl_train():
    """SkyRL's trainer entry points: ``skyrl.train`` (current), else ``skyrl_train``."""
    try:
        from skyrl.train.config import SkyRLTrainConfig as config
        from skyrl.train.entrypoints.main_base import BasePPOExp, validate_cfg
        from skyrl.train.utils import initialize_ray
    except ImportError:
        try:
            from skyrl_train.config import SkyRLConfig as config
            from skyrl_train.entrypoints.main_base import BasePPOExp, validate_cfg
            from skyrl_train.utils import initialize_ray
        except ImportError as err:
            raise SystemExit("SkyRL's trainer is not installed (skyrl-gym alone runs the "
                             "environment, not training): install SkyRL (its skyrl-train "
                             f"package) to train. ({err})") from err
    return config, BasePPOExp, validate_cfg, initialize_ray


def train(overrides: list[str]) -> None:
    config, BasePPOExp, validate_cfg, initialize_ray = _skyrl_train()  # noqa: N806
    import ray

    @ray.remote(num_cpus=1)
    def skyrl_entrypoint(cfg):
        register_clinenv()  # inside the entrypoint task, where the workers make envs
        BasePPOExp(cfg).run()

    cfg = config.from_cli_overrides([*REQUIRED_OVERRIDES, *overrides])
    validate_cfg(cfg)
    initialize_ray(cfg)
    ray.get(skyrl_entrypoint.remote(cfg))


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0].startswith("--"):
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("--write-data", required=True, metavar="DIR",
                            help="write train.parquet and validation.parquet here")
        parser.add_argument("--env-id", default="EGIP-Demo-v0")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--exclude-flags", nargs="+", default=[], metavar="FLAG",
                            help="leave out cases with these flags, e.g. target_in_records "
                                 "target_in_menu (LEAK_FLAGS: a record or the menu names "
                                 "the target)")
        args = parser.parse_args(argv)
        try:
            paths = write_dataset(args.write_data, args.env_id, seed=args.seed,
                                  exclude_flags=tuple(args.exclude_flags))
        except ValueError as err:
            parser.error(str(err))
        for name, path in paths.items():
            print(f"{name}: {path}")
        return
    train(argv)


if __name__ == "__main__":
    main()
