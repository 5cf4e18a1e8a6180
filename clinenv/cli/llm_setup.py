"""The LLM agents of ``clinenv run``: options, their checks, and the models they build.

The flags become one :class:`LLMConfig` (:func:`llm_config`), checked by
:func:`check_llm_config`; :class:`LLMSeats` builds one model per distinct name.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Literal

from clinenv.cli.argtypes import count, number
from clinenv.cli.doctors import DOCTORS, DoctorConfig, doctor_config
from clinenv.cli.errors import CLIError
from clinenv.config_model import ConfigModel
from clinenv.protocol.biases import DOCTOR_BIASES, PATIENT_BIASES

#: ``--backend`` choices (:func:`clinenv.llm.factory.make_chat_model`).
BACKENDS = ("openai", "vllm", "transformers")
#: ``--prompt`` choices (:data:`clinenv.agents.llm_doctor.PROMPTS`).
PROMPTS = ("egip", "agentclinic")
#: ``--examiner`` choices (``clinenv run``).
EXAMINERS = ("lookup", "llm")
#: Protocols whose diagnosis must come within the turns (the agentclinic prompt's loop).
NATIVE_PROTOCOLS = ("agentclinic", "medagentsim")
#: Help texts of the backend options, shared with ``clinenv cdeg build``.
LLM_HELP: dict[str, str] = {
    "backend": "chat-model backend (default: openai, any OpenAI-compatible server)",
    "base_url": "server URL for the openai backend, e.g. http://127.0.0.1:8000/v1",
    "model": "model name (as the server knows it) or local path",
    "api_key_env": "environment variable holding the API key (default: OPENAI_API_KEY); "
                   "the key is never logged",
    "timeout": "seconds per HTTP request before a retry (default: 60)",
    "max_retries": "retries per request on timeouts, 429 and 5xx (default: 3)",
}
#: ``--strategy`` choices (terminal strategies F, EGIP eq. 5, and MedAgentSim's discussion).
STRATEGIES = ("direct", "vote", "full", "discussion", "medagentsim")


def add_llm_arguments(run: argparse.ArgumentParser, *, patient: bool = True,
                      title: str = "LLM agents (--doctor llm, --patient llm, --judge llm)",
                      ) -> Any:
    """The LLM options of ``clinenv run`` (doctor, patient, judge, backend); returns
    their argument group (for :func:`add_examiner_arguments`).

    Args:
        run: the sub-command's parser.
        patient: add ``--patient`` / ``--patient-model``; without them (``clinenv
            replay``, which asks no patient) the namespace still carries their defaults
            (``"retrieval"``, ``None``).
        title: the group's title in ``--help``.
    """
    llm = run.add_argument_group(title)
    add_server_arguments(llm)
    llm.add_argument("--strategy", choices=STRATEGIES, default=None,
                     help="terminal decision strategy F (EGIP eq. 5; default: medagentsim on "
                          "the MedAgentSim-* ids, else direct); medagentsim: MedAgentSim's "
                          "published final turn (discussion, answer options, consensus); "
                          "discussion: the discussion without the option step")
    llm.add_argument("--prompt", choices=PROMPTS, default=None,
                     help="doctor prompt (default: agentclinic on the native ids "
                          "AgentClinic-* and MedAgentSim-*, else egip)")
    llm.add_argument("--doctor-bias", choices=DOCTOR_BIASES, default=None, metavar="NAME",
                     help="--doctor llm: one of AgentClinic's doctor biases, its text put "
                          "between the doctor's base prompt and the case (docs/protocols.md): "
                          f"{', '.join(DOCTOR_BIASES)}")
    llm.add_argument("--max-questions", type=count(1), default=None, metavar="N",
                     help="question budget stated by the agentclinic prompt (default: the "
                          "environment's acquisition rounds T, or its turns)")
    llm.add_argument("--temperature", type=number(0.0), default=None, metavar="T",
                     help="doctor sampling temperature (default: the backend config's, 0)")
    llm.add_argument("--max-tokens", type=count(1), default=None, metavar="N",
                     help="new tokens per doctor call (default: 200, EGIP appendix A.1)")
    llm.add_argument("--vote-temperature", type=number(0.0), default=None, metavar="T",
                     help="--strategy vote: temperature of its extra samples (default: the "
                          "doctor's --temperature, the shared settings of EGIP appendix "
                          "A.2)")
    add_connection_arguments(llm)
    if patient:
        add_seat_arguments(llm)
    else:
        run.set_defaults(patient="retrieval", patient_model=None)
        add_seat_arguments(llm, patient=False)
    return llm


def add_server_arguments(group: Any) -> None:
    """``--backend``, ``--base-url`` and ``--model`` (where the models run)."""
    group.add_argument("--backend", choices=BACKENDS, default="openai",
                       help=LLM_HELP["backend"])
    group.add_argument("--base-url", default=None, metavar="URL", help=LLM_HELP["base_url"])
    group.add_argument("--model", default=None, metavar="M", help=LLM_HELP["model"])


def add_seat_arguments(group: Any, *, patient: bool = True) -> None:
    """``--patient`` / ``--patient-model`` (unless ``patient`` is false) and ``--judge``
    / ``--judge-model``: the environment's seats a model may play."""
    if patient:
        group.add_argument("--patient", choices=("retrieval", "llm"), default="retrieval",
                           help="patient simulator (default: retrieval, deterministic)")
        group.add_argument("--patient-model", default=None, metavar="M",
                           help="model of the LLM patient (default: --model)")
        group.add_argument("--patient-bias", choices=PATIENT_BIASES, default=None,
                           metavar="NAME",
                           help="--patient llm: one of AgentClinic's patient biases, its "
                                "text put between the patient's base prompt and its facts "
                                f"(docs/protocols.md): {', '.join(PATIENT_BIASES)}")
    group.add_argument("--judge", choices=("deterministic", "llm"), default="deterministic",
                       help="answer scorer (default: deterministic)")
    group.add_argument("--judge-model", default=None, metavar="M",
                       help="model of the LLM judge (default: --model)")


def add_connection_arguments(group: Any) -> None:
    """Add ``--api-key-env``, ``--timeout`` and ``--max-retries`` (the model server
    connection; shared by ``run``, ``replay`` and ``cdeg build``) to an argument group."""
    group.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="NAME",
                       help=LLM_HELP["api_key_env"])
    group.add_argument("--timeout", type=number(0.0, above=True), default=60.0, metavar="S",
                       help=LLM_HELP["timeout"])
    group.add_argument("--max-retries", type=count(0), default=3, metavar="N",
                       help=LLM_HELP["max_retries"])


def add_examiner_arguments(group: Any) -> None:
    """``--examiner`` and ``--examiner-model`` (``clinenv run``), in the LLM ``group``."""
    group.add_argument("--examiner", choices=EXAMINERS, default=None,
                       help="examiner: lookup (record lookup O, EGIP only) or llm (the LLM "
                            "measurement agent; on EGIP ids the 'native measurement "
                            "access' ablation). Default: the environment's (lookup on "
                            "EGIP ids, the deterministic record reader on native ids)")
    group.add_argument("--examiner-model", default=None, metavar="M",
                       help="model of the LLM measurement agent (default: --model)")


def env_protocol(env_id: str, preset: str | None = None) -> str:
    """The protocol an environment id runs, read from its registration without making it:
    ``"egip"``, ``"agentclinic"`` or ``"medagentsim"`` (``"egip"`` for ``auto``, unknown
    ids and ids of other packages; :func:`clinenv.cli.env_choice.choose_env` refuses
    those). ``preset`` (``--preset``) replaces the id's own preset."""
    import gymnasium as gym

    from clinenv.protocol.presets import resolve_preset

    kwargs = dict(gym.spec(env_id).kwargs or {}) if env_id in gym.registry else {}
    if preset is not None:
        kwargs["preset"] = preset
    try:
        settings = resolve_preset(kwargs.get("preset"), {
            k: v for k, v in kwargs.items() if k == "protocol"})
    except ValueError:
        return "egip"
    return str(settings.get("protocol") or "egip")


class LLMConfig(ConfigModel):
    """The LLM seats of a command: backend, server, models, and the doctor.

    It holds the name of the API key's environment variable, never the key.

    Attributes:
        backend, base_url, model: ``--backend``, ``--base-url``, ``--model``.
        api_key_env, timeout, max_retries: the server connection.
        preload: ``"async"`` with ``--concurrency`` > 1, else ``"sync"``.
        log_messages, log_tokens: ``--log-messages``, ``--log-tokens``.
        doctor: the doctor (:class:`~clinenv.cli.doctors.DoctorConfig`).
        patient, judge, examiner: ``"llm"`` when a model plays the seat (``examiner``
            ``None``: the environment's own).
        patient_model, judge_model, examiner_model: their own models (``None``: ``model``).
        examiner_option: the command has ``--examiner`` (``clinenv run``).
    """

    backend: Literal["openai", "vllm", "transformers"] = "openai"
    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 60.0
    max_retries: int = 3
    preload: Literal["sync", "async"] = "sync"
    log_messages: bool = False
    log_tokens: bool = False
    doctor: DoctorConfig = DoctorConfig()
    patient: Literal["retrieval", "llm"] = "retrieval"
    patient_model: str | None = None
    judge: Literal["deterministic", "llm"] = "deterministic"
    judge_model: str | None = None
    examiner: Literal["lookup", "llm"] | None = None
    examiner_model: str | None = None
    examiner_option: bool = False

    def seat_models(self) -> dict[str, str | None]:
        """Seat -> the model it uses, for the seats a model plays (``doctor``,
        ``patient``, ``judge``, ``examiner``, in that order)."""
        return {seat: model for seat, on, model in (
            ("doctor", self.doctor.name == "llm", self.model),
            ("patient", self.patient == "llm", self.patient_model or self.model),
            ("judge", self.judge == "llm", self.judge_model or self.model),
            ("examiner", self.examiner == "llm", self.examiner_model or self.model)) if on}


def llm_config(args: argparse.Namespace) -> LLMConfig:
    """The :class:`LLMConfig` of the parsed flags (:func:`add_llm_arguments`,
    :func:`add_examiner_arguments`, ``--doctor`` and the doctor's options,
    ``--concurrency``, ``--log-messages``, ``--log-tokens``); a flag the command has not
    (``clinenv cdeg build`` has no seats) keeps the default."""
    given = {key: getattr(args, key) for key in (
        "backend", "base_url", "model", "api_key_env", "timeout", "max_retries",
        "patient", "patient_model", "judge", "judge_model", "examiner", "examiner_model")
        if getattr(args, key, None) is not None}
    return LLMConfig(**given, doctor=doctor_config(args),
                     preload="async" if getattr(args, "concurrency", 1) > 1 else "sync",
                     log_messages=bool(getattr(args, "log_messages", False)),
                     log_tokens=bool(getattr(args, "log_tokens", False)),
                     examiner_option=hasattr(args, "examiner"))


def doctor_prompt(doctor: DoctorConfig, protocol: str) -> str:
    """``--prompt``, or its default for an environment running ``protocol``:
    ``"agentclinic"`` under a native protocol, else ``"egip"``."""
    if doctor.prompt:
        return doctor.prompt
    return "agentclinic" if protocol in NATIVE_PROTOCOLS else "egip"


def doctor_strategy(doctor: DoctorConfig, protocol: str) -> str:
    """``--strategy``, or its default for an environment running ``protocol``:
    ``"medagentsim"`` under MedAgentSim, else ``"direct"``."""
    if doctor.strategy:
        return doctor.strategy
    return "medagentsim" if protocol == "medagentsim" else "direct"


def check_llm_config(config: LLMConfig, protocol: str = "egip") -> None:
    """Refuse, before anything is built, LLM options that cannot work.

    Args:
        config: the LLM seats (:func:`llm_config`).
        protocol: the protocol of the chosen environment (:func:`env_protocol`), which
            fixes the default ``--prompt`` and whether record lookup has a seat.

    Raises:
        CLIError: an LLM doctor, patient, judge or examiner without a model name; the
            openai backend without ``--base-url``; LLM-only options without any LLM
            agent; ``--examiner-model`` without ``--examiner llm``; ``--examiner lookup``
            on a native protocol (record lookup cannot answer its whole utterances);
            ``--max-questions`` without ``--doctor llm`` and the agentclinic prompt;
            ``--vote-temperature`` without ``--doctor llm`` and the vote strategy.
    """
    examiner, doctor = config.examiner, config.doctor
    if config.examiner_model and examiner != "llm":
        raise CLIError("--examiner-model is used only with --examiner llm")
    if examiner == "lookup" and protocol in NATIVE_PROTOCOLS:
        raise CLIError(f"--examiner lookup: the {protocol} protocol has no seat for record "
                       "lookup (its measurement agent answers whole utterances); use "
                       "--examiner llm, or leave it out for the record reader")
    wants = [name for name, on in (("--doctor llm", doctor.name == "llm"),
                                   ("--patient llm", config.patient == "llm"),
                                   ("--judge llm", config.judge == "llm"),
                                   ("--examiner llm", examiner == "llm")) if on]
    for flag, own in (("--doctor llm", None), ("--patient llm", config.patient_model),
                      ("--judge llm", config.judge_model),
                      ("--examiner llm", config.examiner_model)):
        if flag in wants and not (own or config.model):
            extra = "" if flag == "--doctor llm" else f" (or {flag.split()[0]}-model)"
            raise CLIError(f"{flag} needs --model M{extra}")
    if wants and config.backend == "openai" and not config.base_url:
        raise CLIError(f"{wants[0]} with --backend openai needs --base-url URL "
                       "(e.g. http://127.0.0.1:8000/v1 for `vllm serve`)")
    if doctor.max_questions is not None and (
            doctor.name != "llm" or doctor_prompt(doctor, protocol) != "agentclinic"):
        raise CLIError("--max-questions is used only with --doctor llm --prompt agentclinic "
                       "(the egip prompt has no question budget)")
    if doctor.vote_temperature is not None and (
            doctor.name != "llm" or doctor_strategy(doctor, protocol) != "vote"):
        raise CLIError("--vote-temperature is used only with --doctor llm --strategy vote")
    if not wants:
        given = [flag for flag, value in (("--model", config.model),
                                          ("--base-url", config.base_url),
                                          ("--patient-model", config.patient_model),
                                          ("--judge-model", config.judge_model)) if value]
        if given:
            seats = "--doctor llm, --patient llm or --judge llm"
            if config.examiner_option:
                seats = "--doctor llm, --patient llm, --judge llm or --examiner llm"
            raise CLIError(f"{given[0]} is used only with {seats}")


#: The environment keyword of each seat's model (:meth:`LLMSeats.env_kwargs`).
SEAT_MODEL_KEYS = {"patient": "patient_model", "judge": "judge_model",
                   "examiner": "examiner_model"}


class LLMSeats:
    """The chat models and the doctor factory of a command's LLM seats.

    One model object per distinct model name (shared by doctor, patient, judge and
    examiner, and by every concurrent worker); :meth:`close` closes them.

    Args:
        config: the LLM seats, already checked by :func:`check_llm_config`.
    """

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self.models: dict[str, Any] = {}
        self.observation_format = "view"
        self.acquisition_rounds: int | None = None
        self.cases: Any = None  # the environment's case pool: --doctor teacher's cases
        self.prompt = doctor_prompt(config.doctor, "egip")
        self.strategy = doctor_strategy(config.doctor, "egip")

    def match_env(self, env: Any) -> None:
        """Take the doctor's observation format, default prompt, default strategy and
        default question budget from the environment (an :class:`~clinenv.env.EGIPEnv`):
        its ``observation_format``, its ``protocol`` (:func:`doctor_prompt`,
        :func:`doctor_strategy`) and its acquisition rounds T (under a native protocol
        the turns before a decision); and its case pool, which only the privileged
        ``--doctor teacher`` is given (:mod:`clinenv.cli.doctors`)."""
        self.cases = getattr(env, "pool", None)
        self.observation_format = env.observation_format
        self.acquisition_rounds = env.config.acquisition_rounds
        protocol = getattr(env, "protocol", "egip")
        self.prompt = doctor_prompt(self.config.doctor, protocol)
        self.strategy = doctor_strategy(self.config.doctor, protocol)

    def model(self, name: str) -> Any:
        """The chat model named ``name`` on the config's backend (built once), logging
        its messages with ``log_messages`` (:attr:`~clinenv.llm.base.ChatModel.
        log_messages`). An ``openai`` model preloads only the client of the calls the
        run makes (``preload``: asynchronous with ``--concurrency`` > 1, else
        synchronous; :class:`~clinenv.llm.openai_backend.OpenAIChatModel`).

        Raises:
            CLIError: the backend's optional dependency is missing, or it refuses the
                arguments.
        """
        if name not in self.models:
            from clinenv.llm.base import LLMError
            from clinenv.llm.factory import make_chat_model

            config = self.config
            kwargs: dict[str, Any] = {}
            if config.backend == "openai":
                # --concurrency N > 1 makes only asynchronous calls (aiohttp): the openai
                # client, about a second to import, is then left out of the start
                kwargs = {"base_url": config.base_url, "timeout_s": config.timeout,
                          "max_retries": config.max_retries,
                          "api_key": os.environ.get(config.api_key_env) or "EMPTY",
                          "preload": config.preload}
            try:
                model = make_chat_model(config.backend, name, **kwargs)
            except (LLMError, ImportError, ValueError, OSError) as err:
                raise CLIError(f"--backend {config.backend} --model {name}: {err}") from None
            model.log_messages = config.log_messages
            model.log_tokens = config.log_tokens
            self.models[name] = model
        return self.models[name]

    def build(self) -> None:
        """Build the models the seats ask for.

        Raises:
            CLIError: as :meth:`model`.
        """
        for model in self.config.seat_models().values():
            self.model(str(model))

    def env_kwargs(self) -> dict[str, Any]:
        """The environment's seat keywords: each seat the flags name (``patient="llm"``,
        ``judge="llm"``, ``examiner=...``) followed by the model object of a seat a
        model plays (``patient_model``...), built once (:meth:`model`).

        Raises:
            CLIError: as :meth:`model`.
        """
        config, models = self.config, self.config.seat_models()
        chosen = {"patient": "llm" if config.patient == "llm" else None,
                  "judge": "llm" if config.judge == "llm" else None,
                  "examiner": config.examiner}
        kwargs: dict[str, Any] = {}
        for key, value in chosen.items():
            if value is None:
                continue
            kwargs[key] = value
            if value == "llm":
                kwargs[SEAT_MODEL_KEYS[key]] = self.model(str(models[key]))
        return kwargs

    def make_doctor(self) -> Any:
        """A fresh doctor (``config.doctor``; the registry's factories get the
        :class:`~clinenv.cli.doctors.DoctorConfig`, e.g. ``--exploration``). The LLM
        doctor uses the environment's observation format, ``--prompt`` and
        ``--strategy`` (defaults: by the environment's protocol; the vote strategy
        samples at ``--vote-temperature`` when given, else at the doctor's temperature)
        and, with the agentclinic prompt, states the question budget
        ``--max-questions`` (default: the environment's T; see :meth:`match_env`).
        ``--temperature`` / ``--max-tokens`` left out (``None``) keep
        :class:`~clinenv.llm.base.GenerationConfig`'s 0 and 200."""
        doctor = self.config.doctor
        if doctor.doctor_bias is not None and doctor.name != "llm":
            raise CLIError(f"--doctor-bias {doctor.doctor_bias}: the bias is a prompt text, "
                           f"and --doctor {doctor.name} has no prompt; use --doctor llm")
        if doctor.name == "teacher":  # privileged: the environment's cases (match_env)
            return DOCTORS["teacher"](doctor, cases=self.cases)
        if doctor.name != "llm":
            return DOCTORS[doctor.name](doctor)
        from clinenv.agents.llm_doctor import LLMDoctor, LLMDoctorConfig
        from clinenv.llm.base import GenerationConfig

        config = GenerationConfig().merged(temperature=doctor.temperature,
                                           max_tokens=doctor.max_tokens)
        budget = None
        if self.prompt == "agentclinic":
            budget = doctor.max_questions or self.acquisition_rounds
        strategy: Any = self.strategy
        if strategy == "vote" and doctor.vote_temperature is not None:
            from clinenv.agents.terminal_vote import Vote

            strategy = Vote(temperature=doctor.vote_temperature)
        settings = LLMDoctorConfig(prompt=self.prompt,
                                   observation_format=self.observation_format,
                                   max_questions=budget, bias=doctor.doctor_bias)
        return LLMDoctor(self.model(str(self.config.model)), strategy=strategy,
                         doctor_config=settings, config=config)

    def close(self) -> None:
        """Close every model (clients, engines)."""
        for model in self.models.values():
            model.close()
