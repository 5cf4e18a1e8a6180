"""``clinenv run --paper-settings``: the EGIP paper's decoding settings and repetitions.

EGIP section 4.1 and appendix A.1: 200 output tokens, three repetitions, temperature
0.05 (AgentClinic) or 0.2 (MedAgentSim). The run-log record: docs/llm-doctors.md.
"""

from __future__ import annotations

import argparse
from typing import Any

from clinenv.cli.doctors import DoctorConfig
from clinenv.cli.errors import CLIError
from clinenv.cli.llm_setup import doctor_strategy
from clinenv.config_model import ConfigModel

#: Sampling temperature of every model call, per framework (EGIP 4.1).
PAPER_TEMPERATURE: dict[str, float] = {"agentclinic": 0.05, "medagentsim": 0.2}
#: Stochastic repetitions per configuration (EGIP 4.1, appendix A.1).
PAPER_REPETITIONS = 3
#: Output tokens allowed per model call (EGIP 4.1, appendix A.1).
PAPER_MAX_TOKENS = 200
#: ``--framework`` choices.
FRAMEWORKS = tuple(PAPER_TEMPERATURE)
#: The framework an EGIP id takes without ``--framework``.
DEFAULT_FRAMEWORK = "agentclinic"
#: clinenv's repetitions without ``--paper-settings`` or ``--repetitions``.
DEFAULT_REPETITIONS = 1
#: Where the values come from, as written into the record.
SOURCE = "EGIP 4.1"


def add_paper_arguments(run: argparse.ArgumentParser) -> None:
    """Add ``--paper-settings`` and ``--framework`` to the ``run`` parser."""
    run.add_argument("--paper-settings", action="store_true",
                     help="use EGIP 4.1's settings: the LLM doctor's temperature by "
                          "framework (0.05 AgentClinic, 0.2 MedAgentSim), max tokens 200, "
                          "3 repetitions; --temperature, --max-tokens and --repetitions "
                          "given explicitly win. Recorded in the run log (paper_settings)")
    run.add_argument("--framework", choices=FRAMEWORKS, default=None,
                     help="--paper-settings on an EGIP-* id: whose temperature to use "
                          f"(default: {DEFAULT_FRAMEWORK}); changes the decoding only. "
                          "AgentClinic-* and MedAgentSim-* ids fix it themselves")


class PaperSettingsConfig(ConfigModel):
    """What :func:`paper_settings_config` decided.

    Attributes:
        repetitions: the run's repetitions (given, else :data:`PAPER_REPETITIONS` with
            ``--paper-settings``, else :data:`DEFAULT_REPETITIONS`).
        temperature, max_tokens: the LLM doctor's decoding (given, else the paper's
            with ``--paper-settings`` and ``--doctor llm``, else ``None``).
        record: the run-log record (docs/llm-doctors.md), or ``None`` without
            ``--paper-settings``.
        summary: one line for the terminal (``paper settings (EGIP 4.1): ...``), or
            ``None``.
        notes: ``note:`` lines for stderr (settings that cannot apply, a vote whose
            samples would all be greedy).
    """

    repetitions: int = DEFAULT_REPETITIONS
    temperature: float | None = None
    max_tokens: int | None = None
    record: dict[str, Any] | None = None
    summary: str | None = None
    notes: tuple[str, ...] = ()

    def apply(self, doctor: DoctorConfig) -> DoctorConfig:
        """``doctor`` with the resolved temperature and max tokens."""
        return doctor.replace(temperature=self.temperature, max_tokens=self.max_tokens)


def _framework(given: str | None, where: str, preset: str | None,
               protocol: str) -> tuple[str, str]:
    """``(framework, where it came from)``; refuses a ``--framework`` that the id or
    preset contradicts."""
    if protocol in FRAMEWORKS:
        if given is not None and given != protocol:
            raise CLIError(f"--framework {given}: {where} runs the {protocol} protocol, "
                           f"whose paper temperature is {PAPER_TEMPERATURE[protocol]:g}; "
                           "--framework is for EGIP-* ids")
        return protocol, "preset" if preset else "env id"
    if given is not None:
        return given, "--framework"
    return DEFAULT_FRAMEWORK, "default"


def paper_settings_config(args: argparse.Namespace, doctor: DoctorConfig,
                          protocol: str) -> PaperSettingsConfig:
    """Resolve ``--paper-settings`` and the defaults of the options it sets (``args`` is
    left as it is).

    Args:
        args: the parsed ``clinenv run`` options (``--paper-settings``, ``--framework``,
            ``--repetitions``, ``--env``, ``--preset``; ``--repetitions`` is ``None``
            when not given).
        doctor: the doctor as given (its ``temperature`` / ``max_tokens`` ``None``
            when not given).
        protocol: the protocol of ``--env`` / ``--preset``
            (:func:`clinenv.cli.llm_setup.env_protocol`).

    Returns:
        A :class:`PaperSettingsConfig`.

    Raises:
        CLIError: ``--framework`` without ``--paper-settings``, or one that contradicts
            the id's framework.
    """
    paper = bool(getattr(args, "paper_settings", False))
    framework_given = getattr(args, "framework", None)
    preset = getattr(args, "preset", None)
    if framework_given is not None and not paper:
        raise CLIError("--framework is used only with --paper-settings (it picks the "
                       "paper's temperature on an EGIP-* id)")
    temperature, max_tokens, repetitions = (doctor.temperature, doctor.max_tokens,
                                            args.repetitions)
    given = [flag for flag, value in (("--temperature", temperature),
                                      ("--max-tokens", max_tokens),
                                      ("--repetitions", repetitions))
             if value is not None]
    if repetitions is None:
        repetitions = PAPER_REPETITIONS if paper else DEFAULT_REPETITIONS
    notes: list[str] = []
    llm = doctor.name == "llm"
    if paper:
        where = f"--env {args.env}" + (f" --preset {preset}" if preset else "")
        framework, origin = _framework(framework_given, where, preset, protocol)
        wanted = {"temperature": PAPER_TEMPERATURE[framework],
                  "max_tokens": PAPER_MAX_TOKENS, "repetitions": PAPER_REPETITIONS}
        if llm:
            if temperature is None:
                temperature = wanted["temperature"]
            if max_tokens is None:
                max_tokens = wanted["max_tokens"]
        else:
            notes.append(f"--paper-settings with --doctor {doctor.name}: no model "
                         f"decodes the doctor's actions, so temperature "
                         f"{wanted['temperature']:g} and max tokens "
                         f"{wanted['max_tokens']} are not applied; the repetitions "
                         f"({repetitions}) are")
    if llm and doctor_strategy(doctor, protocol) == "vote" and \
            doctor.vote_temperature is None and not temperature:
        notes.append("--strategy vote at temperature 0: its extra samples use the "
                     "doctor's temperature, and greedy samples agree, so the vote is "
                     "the Direct answer; give --temperature, --vote-temperature or "
                     "--paper-settings")
    record = summary = None
    if paper:
        applied = {"temperature": temperature if llm else None,
                   "max_tokens": max_tokens if llm else None,
                   "repetitions": repetitions}
        record = {"source": SOURCE, "framework": framework, "framework_from": origin,
                  "paper": wanted, "applied": applied, "given": given,
                  "applies_to": "doctor" if llm else None, "notes": list(notes)}
        decoding = (f"temperature {applied['temperature']:g}, max tokens "
                    f"{applied['max_tokens']}" if llm else "no model decoding")
        flags = f"; given: {', '.join(given)}" if given else ""
        summary = (f"paper settings ({SOURCE}, {framework} framework): {decoding}, "
                   f"{repetitions} repetition(s){flags}")
    return PaperSettingsConfig(repetitions=repetitions, temperature=temperature,
                               max_tokens=max_tokens, record=record, summary=summary,
                               notes=tuple(notes))
