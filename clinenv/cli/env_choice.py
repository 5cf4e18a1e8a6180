"""Which environment ``clinenv run`` plays (``--env ID|auto``) and how it is made.

Only clinenv's own ids (``EGIP-*``, ``AgentClinic-*``, ``MedAgentSim-*``) are run; an id
that another package registered is refused.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from clinenv.cli.errors import CLIError

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


def add_variation_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``--patient-persona NAME[:P]`` and ``--exam-noise KIND=P[,KIND=P]`` (the
    environment's ``patient_persona`` and ``exam_noise``; :mod:`clinenv.env.persona`,
    :mod:`clinenv.protocol.exam_noise`) to ``parser``; returns it."""
    from clinenv.env.persona import PERSONAS

    parser.add_argument("--patient-persona", default=None, metavar="NAME[:P]",
                        help=f"the retrieval patient's persona: {', '.join(PERSONAS)} "
                             "(default: cooperative); P is the probability of forgetful "
                             "and tangential (default 0.3)")
    parser.add_argument("--exam-noise", default=None, metavar="KIND=P[,KIND=P]",
                        help="examiner noise of record lookup: unavailable=P (a recorded "
                             "result comes back unavailable), delayed=P (it arrives a "
                             "round later); e.g. unavailable=0.2,delayed=0.1")
    return parser


def exam_noise_option(value: str | None) -> dict[str, Any] | None:
    """``--exam-noise`` as a dict (``"unavailable=0.2,delayed=0.1"`` ->
    ``{"unavailable": 0.2, "delayed": 0.1}``; a JSON object too), or ``None``.

    Raises:
        CLIError: a part that is not ``KIND=NUMBER``.
    """
    import json

    if value is None:
        return None
    if value.lstrip().startswith("{"):
        try:
            found = json.loads(value)
        except ValueError as err:
            raise CLIError(f"--exam-noise {value!r}: not a JSON object ({err})") from None
        if not isinstance(found, dict):
            raise CLIError(f"--exam-noise {value!r}: not a JSON object")
        return found
    noise: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in value.split(","))):
        kind, sep, number = part.partition("=")
        try:
            noise[kind.strip()] = float(number)
        except ValueError:
            sep = ""
        if not sep:
            raise CLIError(f"--exam-noise {value!r}: {part!r} is not KIND=P (e.g. "
                           "unavailable=0.2,delayed=0.1)")
    return noise


def env_config(args: argparse.Namespace) -> Any:
    """The :class:`~clinenv.env.EnvConfig` of a command's flags, over the id's own
    settings (the seats are :class:`~clinenv.cli.llm_setup.LLMConfig`'s): the data
    options (``--data-dir``, ``--allow-download``, ``--no-verify``), the privileged
    teacher's settings (``--doctor teacher``), ``--preset``, ``--premature-diagnosis``,
    ``--patient-bias``,
    ``--reward-spec`` (read once, here), ``--icd-map``, ``--knowledge-source``,
    ``--dataset``, ``--patient-persona`` and ``--exam-noise``. Flags a command does not
    have are left out.

    Raises:
        CLIError: a bad ``--reward-spec`` (:func:`reward_spec_option`), an ``--icd-map``,
            ``--dataset`` or ``--knowledge-source`` that is no file, or a setting the
            config refuses.
    """
    from pydantic import ValidationError

    from clinenv.env import EnvConfig

    def flag(name: str) -> Any:
        return getattr(args, name, None)

    values: dict[str, Any] = {"allow_download": bool(flag("allow_download")),
                              "verify": getattr(args, "verify", True)}
    if flag("data_dir") is not None:
        values["data_dir"] = str(args.data_dir)
    if flag("doctor") == "teacher":  # the tool view's settings (clinenv.cli.doctors)
        from clinenv.agents.teacher_doctor import TEACHER_ENV_SETTINGS

        values.update(TEACHER_ENV_SETTINGS)
    for key in ("preset", "premature_diagnosis", "patient_bias", "patient_persona"):
        if flag(key) is not None:
            values[key] = flag(key)
    noise = exam_noise_option(flag("exam_noise"))
    if noise is not None:
        values["exam_noise"] = noise
    reward_spec = reward_spec_option(flag("reward_spec"))
    if reward_spec is not None:
        values["reward_spec"] = reward_spec
    for option, key in (("--icd-map", "icd_map"), ("--dataset", "dataset"),
                        ("--knowledge-source", "knowledge_source")):
        path = flag(key)
        if path is not None and not path.is_file():
            raise CLIError(f"{option} {path}: no such file")
        if path is not None:
            values[key] = str(path)
    try:
        return EnvConfig(**values)
    except ValidationError as err:
        raise CLIError(_setting_error("the environment settings", err)) from None
    except ValueError as err:
        raise CLIError(str(err)) from None


def _setting_error(what: str, err: Any) -> str:
    """One line for a pydantic error: the first field and its message."""
    from clinenv.config_model import first_error

    field, message = first_error(err, "(settings)")
    return f"{what}: setting {field!r}: {message} ({err.title})"


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
    """The environment id to run and why it was chosen: ``(env_id, reason)``.

    ``auto`` falls back to the demo set only when the MedQA file is not found with
    ``$CLINENV_DATA_DIR`` unset.

    Args:
        requested: an environment id or ``"auto"``.
        data_dir: ``--data-dir``.
        allow_download: ``--allow-download`` (``auto`` may then download MedQA).
        verify: ``False`` (``--no-verify``) accepts MedQA records that differ from the pinned.

    Raises:
        CLIError: an unknown id or one another package registered; with ``auto``, a
            ``$CLINENV_DATA_DIR`` that cannot supply the MedQA file, a folder in its place,
            or records that differ from the pinned ones.
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


def make_env(env_id: str, config: Any = None, **seats: Any) -> Any:
    """``gym.make(env_id, ...)`` with the settings of ``config`` (an
    :class:`~clinenv.env.EnvConfig`, given as the keywords it maps from, so the run log
    records them as the keyword route does) and the ``seats`` (``patient="llm"``,
    ``patient_model=<ChatModel>``...); refuses a non-EGIP environment.

    Raises:
        CLIError: the dataset is missing or corrupt, gymnasium or the environment refuses
            the arguments (e.g. an examiner the protocol has no seat for), or the made
            environment is not an :class:`~clinenv.env.EGIPEnv` (it is closed).
    """
    import gymnasium as gym
    from pydantic import ValidationError

    from clinenv.env import EGIPEnv
    from clinenv.errors import ClinenvError

    kwargs = {} if config is None else config.to_kwargs()
    try:
        env = gym.make(env_id, **kwargs, **seats)
    except ClinenvError as err:
        raise CLIError(str(err)) from None
    except ValidationError as err:  # a protocol setting the id's protocol does not have
        raise CLIError(_setting_error(f"cannot make {env_id!r}", err)) from None
    except (gym.error.Error, ValueError) as err:  # ValueError: EGIPEnv's argument checks
        raise CLIError(f"cannot make {env_id!r}: {err}") from None
    if not isinstance(env.unwrapped, EGIPEnv):
        env.close()
        raise _not_egip(env_id)
    return env
