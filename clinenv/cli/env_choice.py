"""Which environment ``clinenv run`` plays (``--env ID|auto``) and how it is made.

Only clinenv's environments are run (the ``EGIP-*`` ids and the native-protocol ids
``AgentClinic-*`` / ``MedAgentSim-*``, all :class:`~clinenv.env.EGIPEnv`): an id
registered by another package is refused before it is made when its entry point is a
class, and after ``gym.make`` when it is a factory.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from clinenv.cli.errors import CLIError
from clinenv.config_model import ConfigModel

#: Environment chosen by ``--env auto`` when the MedQA file resolves, and the fallback.
AUTO_PREFERRED = "EGIP-MedQA-v0"
AUTO_FALLBACK = "EGIP-Demo-v0"


def add_dataset_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``--data-dir DIR`` and ``--allow-download`` (how a dataset file is found;
    :func:`clinenv.datasets.resolve.resolve_dataset`'s order) to ``parser``; returns it."""
    parser.add_argument("--data-dir", type=Path, default=None, metavar="DIR",
                        help="folder holding the dataset files (before $CLINENV_DATA_DIR)")
    parser.add_argument("--allow-download", action="store_true",
                        help="download a missing public dataset (pinned URL and sha256)")
    return parser


class DataConfig(ConfigModel):
    """Where a command's dataset files come from (:func:`add_dataset_arguments`,
    :func:`add_verify_argument`).

    Attributes:
        data_dir: ``--data-dir`` (before ``$CLINENV_DATA_DIR``).
        allow_download: ``--allow-download``.
        verify: ``False`` with ``--no-verify``.
    """

    data_dir: Path | None = None
    allow_download: bool = False
    verify: bool = True

    def make_env(self, env_id: str, **kwargs: Any) -> Any:
        """:func:`make_env` with these data options."""
        return make_env(env_id, self.data_dir, self.allow_download, self.verify, **kwargs)


def data_config(args: argparse.Namespace) -> DataConfig:
    """The :class:`DataConfig` of the parsed flags (``--no-verify`` may be absent)."""
    return DataConfig(data_dir=args.data_dir, allow_download=args.allow_download,
                      verify=getattr(args, "verify", True))


def env_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The environment's keyword arguments that ``clinenv run``'s flags set over the
    id's own (``gym.make`` keyword overrides; the data options are
    :class:`DataConfig`'s): the privileged teacher's settings (``--doctor teacher``),
    the seats (``--patient llm``, ``--judge llm``, ``--examiner``; the seats' models
    are added by :meth:`clinenv.cli.llm_setup.LLMSeats.env_kwargs`), ``--preset``,
    ``--premature-diagnosis``, ``--reward-spec`` (its canonical JSON: a file is read
    once, here), ``--icd-map``, ``--knowledge-source`` and ``--dataset``.

    Raises:
        CLIError: a bad ``--reward-spec`` (:func:`reward_spec_option`), or an
            ``--icd-map``, ``--dataset`` or ``--knowledge-source`` that is no file.
    """
    kwargs: dict[str, Any] = {}
    if args.doctor == "teacher":  # the tool view's settings (clinenv.cli.doctors)
        from clinenv.agents.teacher_doctor import TEACHER_ENV_SETTINGS

        kwargs.update(TEACHER_ENV_SETTINGS)
    for seat in ("patient", "judge"):
        if getattr(args, seat, None) == "llm":
            kwargs[seat] = "llm"
    if getattr(args, "examiner", None) is not None:
        kwargs["examiner"] = args.examiner
    if args.preset is not None:
        kwargs["preset"] = args.preset
    if args.premature_diagnosis is not None:
        kwargs["premature_diagnosis"] = args.premature_diagnosis
    reward_spec = reward_spec_option(getattr(args, "reward_spec", None))
    if reward_spec is not None:
        kwargs["reward_spec"] = reward_spec.to_dict()
    for flag, key in (("--icd-map", "icd_map"), ("--dataset", "dataset"),
                      ("--knowledge-source", "knowledge_source")):
        path = getattr(args, key)
        if path is not None and not path.is_file():
            raise CLIError(f"{flag} {path}: no such file")
    for key in ("icd_map", "knowledge_source", "dataset"):
        if getattr(args, key) is not None:
            kwargs[key] = str(getattr(args, key))
    return kwargs


def reward_spec_option(value: str | None) -> Any:
    """The :class:`~clinenv.reward_spec.RewardSpec` of ``--reward-spec`` (``value``), or
    ``None``.

    Raises:
        CLIError: an unknown preset, a missing or invalid file (one line: the file, the
            field and the nearest valid name).
    """
    from clinenv.reward_spec import RewardSpecError, load_reward_spec

    if value is None:
        return None
    try:
        return load_reward_spec(value)
    except RewardSpecError as err:
        raise CLIError("--reward-spec" + str(err).removeprefix("reward spec")) from None


def add_verify_argument(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``--no-verify`` (``args.verify``, default true: use a dataset file whose
    records differ from the pinned ones, with a warning) to ``parser``; returns it."""
    parser.add_argument("--no-verify", dest="verify", action="store_false",
                        help="use a dataset file whose records differ from the pinned ones "
                             "(a warning names the first differing case); a copy that "
                             "differs only in bytes (CRLF, BOM) needs no flag")
    return parser


def choose_env(requested: str, data_dir: Path | None, allow_download: bool,
               verify: bool = True) -> tuple[str, str]:
    """The environment id to run and why it was chosen.

    ``auto`` falls back to the demo set only when the MedQA file is simply not found
    with ``$CLINENV_DATA_DIR`` unset; a set variable that cannot supply the file is an
    error naming the folder.

    Args:
        requested: an environment id or ``"auto"``.
        data_dir: ``--data-dir``.
        allow_download: ``--allow-download`` (``auto`` may then download MedQA).
        verify: ``False`` (``--no-verify``) accepts a MedQA file whose records differ
            from the pinned ones.

    Returns:
        ``(env_id, reason)``.

    Raises:
        CLIError: an unknown id, an id registered by another package whose entry point is
            not an EGIP environment class, or (``auto``) a ``$CLINENV_DATA_DIR`` that
            cannot supply the MedQA file, a folder where the file should be, or a MedQA
            file whose records differ from the pinned ones.
    """
    import gymnasium as gym

    from clinenv.datasets import resolve_dataset
    from clinenv.env.registration import EGIP_IDS
    from clinenv.errors import (
        ChecksumError,
        DataDirError,
        DatasetFolderError,
        DatasetNotFoundError,
    )

    if requested != "auto":
        if requested not in gym.registry:
            near = nearest_id(requested)
            guess = f"did you mean {near}? " if near else ""
            raise CLIError(f"unknown environment id {requested!r}; {guess}{_ids_hint()}")
        reject_foreign_entry_point(requested)
        return requested, "requested with --env"
    dataset = EGIP_IDS[AUTO_PREFERRED]
    try:
        path = resolve_dataset(dataset, data_dir, allow_download=allow_download,
                               verify=verify)
    except DataDirError as err:
        raise CLIError(f"--env auto: {err}") from None
    except DatasetFolderError as err:
        raise CLIError(f"--env auto: {err}") from None
    except DatasetNotFoundError:
        return AUTO_FALLBACK, (f"--env auto: dataset {dataset!r} not found (set "
                               "CLINENV_DATA_DIR or run `clinenv data download medqa`), "
                               "so the bundled demo set is used")
    except ChecksumError as err:
        raise CLIError(f"--env auto: {err}") from None
    return AUTO_PREFERRED, f"--env auto: dataset {dataset!r} found at {path}"


def nearest_id(requested: str) -> str | None:
    """The ``--env`` id (EGIP or native) closest to a mistyped one: the best rapidfuzz
    ``ratio`` (normalized edit similarity) on case-folded ids if it is >= 70 of 100, else
    ``None``."""
    from rapidfuzz import fuzz, process

    from clinenv.env.registration import EGIP_IDS, NATIVE_IDS

    found = process.extractOne(requested, [*EGIP_IDS, *NATIVE_IDS], scorer=fuzz.ratio,
                               processor=str.casefold, score_cutoff=70)
    return found[0] if found else None


def _ids_hint() -> str:
    """The ids ``--env`` takes: the EGIP ids, then the native-protocol ids."""
    from clinenv.env.registration import EGIP_IDS, NATIVE_IDS

    return "clinenv ids: " + ", ".join([*EGIP_IDS, *NATIVE_IDS]) + " (or 'auto')"


def _not_egip(env_id: str) -> CLIError:
    return CLIError(f"{env_id!r} is not an EGIP environment; {_ids_hint()}")


def reject_foreign_entry_point(env_id: str) -> None:
    """Refuse, without making it, an id whose entry point is a class other than EGIPEnv.

    Making a foreign environment would pass it clinenv's keyword arguments and could fail
    in arbitrary ways; entry points that are factory functions are checked after
    ``gym.make`` instead (:func:`make_env`).

    Raises:
        CLIError: the entry point does not import, or is a class that is not an
            :class:`~clinenv.env.EGIPEnv`.
    """
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    from clinenv.env import EGIPEnv

    entry_point = gym.spec(env_id).entry_point
    try:
        creator = (load_env_creator(entry_point) if isinstance(entry_point, str)
                   else entry_point)
    except Exception:  # a foreign module that does not import (missing extra...)
        creator = None
    if creator is None or (isinstance(creator, type) and not issubclass(creator, EGIPEnv)):
        raise _not_egip(env_id)


def make_env(env_id: str, data_dir: Path | None, allow_download: bool,
             verify: bool = True, **kwargs: Any) -> Any:
    """``gym.make(env_id, **kwargs)`` with the data options; refuses a non-EGIP
    environment.

    Raises:
        CLIError: the dataset is missing or corrupt, gymnasium or the environment refuses
            the arguments (e.g. an examiner the protocol has no seat for), or the made
            environment is not an :class:`~clinenv.env.EGIPEnv` (it is closed).

    ``verify=False`` (``--no-verify``) passes ``verify=False`` to the environment.
    """
    import gymnasium as gym

    from clinenv.env import EGIPEnv
    from clinenv.errors import ClinenvError

    if data_dir is not None:
        kwargs["data_dir"] = str(data_dir)
    if allow_download:
        kwargs["allow_download"] = True
    if not verify:
        kwargs["verify"] = False
    from pydantic import ValidationError

    try:
        env = gym.make(env_id, **kwargs)
    except ClinenvError as err:
        raise CLIError(str(err)) from None
    except ValidationError as err:  # a protocol setting the id's protocol does not have
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(settings)"
        raise CLIError(f"cannot make {env_id!r}: setting {field!r}: {first['msg']} "
                       f"({err.title})") from None
    except (gym.error.Error, ValueError) as err:  # ValueError: EGIPEnv's argument checks
        raise CLIError(f"cannot make {env_id!r}: {err}") from None
    if not isinstance(env.unwrapped, EGIPEnv):
        env.close()
        raise _not_egip(env_id)
    return env
