"""Template placeholders: which texts are placeholders, and every template span or marker
template in a shipped text is one."""

from __future__ import annotations

import importlib
import pkgutil
import re

import gymnasium as gym
import pytest

from clinenv.protocol.parser import parse_action
from clinenv.protocol.placeholders import is_placeholder, placeholder_spans

PLACEHOLDERS = ["[diagnosis]", "<single diagnosis>", "<diagnosis>", "{diagnosis}",
                "your diagnosis here", "...", "…", "N/A", "n/a", "TBD", "<one diagnosis>",
                "**[Final Diagnosis]**", "<Diagnosis Here>", "[insert diagnosis]",
                "<examination id or name>", "<id or name>", "{exam}", "X", "???",
                "Diagnosis", "<the most likely diagnosis>"]


NOT_PLACEHOLDERS = ["Tuberculosis", "<Tuberculosis>", "[PE1]", "T3", "Type 2 diabetes (T2DM)",
                    "Chest X-ray", "Test results", "Diagnosis of exclusion: sarcoidosis",
                    "Hepatitis B", "None of the above: Lyme disease", "A", "E", "G",
                    "(C)", "Option A", "Answer: B", "e."]


@pytest.mark.parametrize("text", PLACEHOLDERS)
def test_placeholders_are_recognised(text):
    assert is_placeholder(text)


@pytest.mark.parametrize("text", NOT_PLACEHOLDERS)
def test_content_is_not_a_placeholder(text):
    assert not is_placeholder(text)


def _shipped_texts() -> list[tuple[str, str]]:
    """Every module-level string constant of the packages that write model-facing text
    (prompts, views, feedback, policy wrappers' interventions), and the texts an episode
    shows the doctor."""
    texts = []
    packages = [importlib.import_module(f"clinenv.{name}")
                for name in ("agents", "protocol", "wrappers")]
    for module_info in (m for p in packages
                        for m in pkgutil.walk_packages(p.__path__, p.__name__ + ".")):
        try:
            module = importlib.import_module(module_info.name)
        except ImportError:  # an optional backend's dependency
            continue
        for name, value in vars(module).items():
            if name.isupper() and isinstance(value, str):
                texts.append((f"{module_info.name}.{name}", value))
    for env_id in ("EGIP-Demo-v0", "AgentClinic-Demo-v0", "MedAgentSim-Demo-v0"):
        env = gym.make(env_id, acquisition_rounds=3) if env_id.startswith("EGIP") else \
            gym.make(env_id)
        obs, _ = env.reset(seed=0)
        texts.append((env_id, obs["text"]))
        for action in ("", "REQUEST TEST:", "REQUEST TEST: <id or name>", "T99"):
            obs, *_ = env.step(action)
            texts.append((env_id, obs["text"]))
    return texts


def test_every_shipped_placeholder_is_rejected():
    """A new prompt cannot reopen the hole: each ``<...>`` template span in a shipped
    text, and its bare inner text, is a placeholder."""
    seen = set()
    for where, text in _shipped_texts():
        for span in placeholder_spans(text):
            if not re.fullmatch(r"<[a-z][^<>|]*>", span):
                continue  # not a template shape (a regex class, "[O1]", "<|im_end|>")
            seen.add(span)
            assert is_placeholder(span), (where, span)
            assert is_placeholder(span[1:-1]), (where, span)
            for marker in ("DIAGNOSIS READY: ", "REQUEST TEST: "):
                assert "placeholder" in parse_action(marker + span).flags, (where, span)
    assert {"<single diagnosis>", "<one diagnosis>", "<id or name>",
            "<examination id or name>"} <= seen


def test_every_shipped_marker_template_is_rejected():
    """Template text after a marker in a shipped prompt (``REQUEST TEST: followed by its
    name``, ``DIAGNOSIS READY: <one diagnosis>``) is a placeholder; an example given
    with it (``for example REQUEST TEST: PE1``) is not."""
    seen = set()
    marker = re.compile(r"(for example |e\.g\. )?(?:REQUEST TEST|DIAGNOSIS READY):[ \t]*"
                        r"([^,.;\n()]*)")
    for where, text in _shipped_texts():
        if where.endswith("_ACTION"):
            continue  # an action clinenv writes itself (ABSTENTION_ACTION), not a prompt
        for m in marker.finditer(text):
            payload = m.group(2).strip()
            if m.group(1) or not payload or "{" in payload:
                continue  # an example, or a format field filled before sending
            seen.add(payload)
            assert is_placeholder(payload), (where, payload)
    assert {"followed by its name", "followed by the diagnosis"} <= seen
