"""The tool view speaks tools (``action_format="tools"``) and can send compact results
(``tool_results="compact"``); the text protocol's views are unchanged."""
# issue 30

from __future__ import annotations

import hashlib

import gymnasium as gym
import pytest

import clinenv  # noqa: F401
from clinenv.integrations.tools import FINAL_RESULT, TOOL_SYSTEM_PROMPT, ToolEpisode
from clinenv.protocol.config import ProtocolConfig
from clinenv.runlog import env_spec_dict

TEXT_MARKERS = ("REQUEST TEST", "DIAGNOSIS READY", "plain text")


def _text_view_texts() -> list[str]:
    out = []
    for fmt in ("view", "delta"):
        for kw in ({}, {"show_menu": False}):
            env = gym.make("EGIP-Demo-v0", acquisition_rounds=3, observation_format=fmt, **kw)
            obs, _ = env.reset(seed=3, options={"case_id": 0})
            out.append(obs["text"])
            for a in ("What brings you in?", "REQUEST TEST: T1", "REQUEST TEST: Chest X-Ray",
                      "DIAGNOSIS READY: pneumonia"):
                obs, _, term, trunc, _ = env.step(a)
                out.append(obs["text"])
                if term or trunc:
                    break
    return out


def test_text_protocol_views_are_unchanged_byte_for_byte():
    # the digest of these texts as the code before action_format/tool_results renders them
    texts = _text_view_texts()
    digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()
    assert digest == "002e45131da5d2fe68dc5777dfbe0644c05d26e70db87ed80922927dc79c9e1c"
    assert "REQUEST TEST: <id or name> (for example REQUEST TEST: PE1)" in texts[0]
    assert ProtocolConfig().action_format == "text"
    assert ProtocolConfig().tool_results == "full"


def _play(episode: ToolEpisode, *, rounds: int = 3) -> list[str]:
    texts = [episode.reset(0, 1)]
    texts.append(episode.ask_patient("What brings you in?"))
    texts.append(episode.order_exam("T1"))
    texts.append(episode.ask_patient("Any fever?"))  # last round: e_T follows
    texts.append(episode.submit_diagnosis("Pneumonia"))
    return texts


@pytest.mark.parametrize("show_menu", [True, False])
def test_tool_view_speaks_tools(show_menu):
    episode = ToolEpisode("EGIP-Demo-v0", acquisition_rounds=3, show_menu=show_menu)
    texts = _play(episode)
    assert texts[-1] == FINAL_RESULT
    for text in [*texts, TOOL_SYSTEM_PROMPT]:
        for marker in TEXT_MARKERS:
            assert marker not in text, (marker, text)
    assert "call `ask_patient` with one question" in texts[0]
    assert ("call `order_exam` with an id or name" if show_menu
            else "call `order_exam` with an examination name") in texts[0]
    assert "call `submit_diagnosis` with your final answer" in texts[1]
    e_t = texts[3]  # the evidence interface after the last round
    assert "# Acquired observations" in e_t
    assert "Call `submit_diagnosis` with your final answer" in e_t
    assert episode.env.spec.kwargs["action_format"] == "tools"


def test_text_actions_still_parse_in_the_tool_view():
    episode = ToolEpisode("EGIP-Demo-v0", acquisition_rounds=3)
    episode.reset(0, 1)
    episode.step_text("REQUEST TEST: T1")
    assert episode.calls[-1].name == "order_exam"
    episode.step_text("DIAGNOSIS READY: Pneumonia")  # "decide": ends acquisition early
    assert episode.step_text("Pneumonia") == FINAL_RESULT


def test_compact_results_are_the_result_and_the_round():
    full = _play(ToolEpisode("EGIP-Demo-v0", acquisition_rounds=3))
    compact_episode = ToolEpisode("EGIP-Demo-v0", acquisition_rounds=3,
                                  tool_results="compact")
    compact = _play(compact_episode)
    assert compact[0] == full[0]  # the opening text keeps the menu and instructions
    assert compact[3] == full[3] and compact[4] == full[4]  # e_T and the final result
    assert compact[1].endswith("\n\nRound 2 of 3.")
    assert compact[2].endswith("\n\nRound 3 of 3.")
    assert compact[2].startswith("Examiner [T1 ")
    for short, long in zip(compact[1:3], full[1:3], strict=True):
        assert "# Available examinations" in long and "# Available examinations" not in short
        assert long.startswith(short[:-len("Round 2 of 3.")].rstrip())
        assert len(short) < len(long) / 2
    # the menu stays one call away
    compact_episode.reset(0, 1)
    assert "PE1  Vital Signs" in compact_episode.list_exams()


def test_settings_are_recorded_in_env_spec():
    episode = ToolEpisode("EGIP-Demo-v0", tool_results="compact")
    kwargs = env_spec_dict(episode.env)["kwargs"]
    assert kwargs["tool_results"] == "compact" and kwargs["action_format"] == "tools"
    with pytest.raises(ValueError):
        ToolEpisode("EGIP-Demo-v0", tool_results="short")


def test_compact_text_protocol_delta():
    env = gym.make("EGIP-Demo-v0", acquisition_rounds=3, observation_format="delta",
                   tool_results="compact")
    obs, _ = env.reset(seed=3, options={"case_id": 0})
    assert "REQUEST TEST:" in obs["text"]  # text wording, full opening
    obs, *_ = env.step("REQUEST TEST: T1")
    assert obs["text"].endswith("\n\nRound 2 of 3.") and "REQUEST TEST" not in obs["text"]


def test_text_answer_at_end():
    episode = ToolEpisode("EGIP-Demo-v0", acquisition_rounds=3)
    with pytest.raises(ValueError):
        episode.text_answer_at_end("x")
    episode.reset(0, 1)
    episode.ask_patient("What brings you in?")
    assert episode.text_answer_at_end("DIAGNOSIS READY: Pneumonia") is True
    assert episode.text_answer_at_end("  ") is False
    assert episode.text_answer_at_end(None) is False
    episode.submit_diagnosis("Pneumonia")
    episode.submit_diagnosis("Pneumonia")
    assert episode.done and episode.text_answer_at_end("Pneumonia") is False


# issue 30
def test_cpu_recipes_turn_bf16_off_and_budgets_hold_an_episode():
    """The TRL snippet and train_grpo.py (SFT and GRPO) set bf16 off with
    use_cpu; the snippet's budget holds a whole compact T = 19 episode."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "training.md").read_text(encoding="utf-8")
    snippet = doc.split("```python", 1)[1].split("```", 1)[0]
    assert "use_cpu=True, bf16=False" in snippet
    assert 'tool_results="compact"' in snippet
    budget = int(re.search(r"max_completion_length=(\d+)", snippet).group(1))
    assert budget >= 3072
    assert int(re.search(r"max_tool_calling_iterations=(\d+)", snippet).group(1)) >= 21
    bench = (root / "benchmarks" / "train_grpo.py").read_text(encoding="utf-8")
    assert bench.count('bf16=device == "cuda"') == 2  # SFTConfig and GRPOConfig


def _feedback_episode(actions, answer, **kwargs):
    """Play ``actions`` then ``answer`` (after filler questions up to the last round) in
    the tool view's environment; its texts and its interface events ``(kind, message)``."""
    from clinenv.protocol.history import InterfaceEvent

    env = gym.make("EGIP-Demo-v0", acquisition_rounds=len(actions) + 1,
                   observation_format="delta", action_format="tools", **kwargs).unwrapped
    obs, _ = env.reset(seed=1, options={"case_id": 0})
    texts = [obs["text"]]
    for action in actions:
        texts.append(env.step(action)[0]["text"])
    while env.runtime.phase == "acquire":
        texts.append(env.step("Any fever?")[0]["text"])
    texts.append(env.step(answer)[0]["text"])
    events = [(e.kind, e.message) for e in env.runtime.history if isinstance(e, InterfaceEvent)]
    return texts, events


#: Every feedback path of the EGIP runtime, played in the tool view (issue 30).
_FEEDBACK_PLAYS = [
    (["", "REQUEST TEST:", "REQUEST TEST: <id or name>", "REQUEST TEST: T1, T2",
      "REQUEST TEST: 1", "REQUEST TEST: for example ECG", "REQUEST TEST: T99",
      "REQUEST TEST: blood", "REQUEST TEST: Complete Blod Cnt", "REQUEST TEST: T1",
      "REQUEST TEST: T1", "DIAGNOSIS READY: pneumonia"],
     "I am not sure. " * 20, {}),
    (["REQUEST TEST: Complete Blood Count", "REQUEST TEST: Complete Blood Count",
      "REQUEST TEST: T1", "x" * 40], "DIAGNOSIS READY: [diagnosis]",
     {"clarify_repeats": False, "show_menu": False, "max_action_chars": 30}),
    (["request test: T1"], "Diagnosis ready: pneumonia", {"strict_markers": True}),
    (["DIAGNOSIS READY: pneumonia"], "pneumonia", {"premature_diagnosis": "decide"}),
]


def test_every_feedback_path_speaks_tools_in_the_tool_view():
    kinds, texts = set(), []
    for actions, answer, kwargs in _FEEDBACK_PLAYS:
        played, events = _feedback_episode(actions, answer, **kwargs)
        texts += played + [message for _, message in events]
        kinds |= {kind for kind, _ in events}
    assert kinds == {"empty_action", "empty_request", "placeholder_request",
                     "multiple_request", "invalid_request", "unclear_request",
                     "ambiguous_request", "repeated_request", "premature_diagnosis",
                     "clipped_action", "decision_phase", "no_answer", "placeholder_answer",
                     "format_miss", "early_stop"}
    for text in texts:
        for marker in TEXT_MARKERS:
            assert marker not in text, (marker, text)
    assert ("empty_request", "`order_exam` needs an examination name.") in _feedback_episode(
        ["REQUEST TEST:"], "x")[1]


def test_tool_calls_get_tool_feedback():
    episode = ToolEpisode("EGIP-Demo-v0", acquisition_rounds=4)
    episode.reset(0, 1)
    text = episode.order_exam("for example ECG")
    assert "Interface: Give `order_exam` only the examination's id or name" in text
    assert "Interface: `order_exam` needs an examination name." in episode.order_exam("**")
    for marker in TEXT_MARKERS:
        assert marker not in text


def test_text_feedback_is_unchanged():
    from clinenv.protocol.runtime import FEEDBACK

    assert FEEDBACK["text"] == {
        "empty_action": "No question or request was found. Ask the patient a question, "
                        "or write REQUEST TEST: <examination>.",
        "empty_request": "REQUEST TEST needs an examination name.",
        "unclear_request": "Write only the examination's id or name after REQUEST TEST:, "
                           "one examination at a time.",
        "format_miss": "The answer is not in the form 'DIAGNOSIS READY: <diagnosis>' that "
                       "strict mode requires."}
    env = gym.make("EGIP-Demo-v0", observation_format="delta")
    env.reset(seed=1, options={"case_id": 0})
    assert "Interface: REQUEST TEST needs an examination name." in env.step(
        "REQUEST TEST:")[0]["text"]


def test_the_tool_view_refuses_extra_actions_it_has_no_tool_for():
    with pytest.raises(ValueError, match="no tool for REVIEW HISTORY"):
        ToolEpisode("EGIP-Demo-v0", history_review=True)
    ToolEpisode("EGIP-Demo-v0", history_review=True, action_format="text")


def test_replay_renders_e_t_in_the_source_runs_wording(tmp_path):
    from clinenv.agents.scripted_doctor import ScriptedDoctor
    from clinenv.runs import RunSpec, replay_run, run

    seen = []

    class Recording(ScriptedDoctor):
        def act(self, obs, info):
            if info.get("phase") == "decide":
                seen.append(obs["text"])
            return super().act(obs, info)

    env = gym.make("EGIP-Demo-v0", action_format="tools", acquisition_rounds=3)
    run(lambda: env, Recording, RunSpec(out=tmp_path / "src.jsonl", episodes=1))
    replay_run(tmp_path / "src.jsonl", Recording, RunSpec(out=tmp_path / "replay.jsonl"))
    assert len(seen) == 2 and "Call `submit_diagnosis`" in seen[0]
    assert seen[1] == seen[0]
