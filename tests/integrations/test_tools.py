"""The tool view of the doctor's actions (clinenv.integrations.tools); no trainer needed.

Expected texts are written out by hand from the text protocol (EGIP section 3.2, the
parser's accepted forms); episode checks compare the tool view against plain
environments stepped with the same action texts.
"""

from __future__ import annotations

import multiprocessing
import random
import re
from concurrent.futures import ThreadPoolExecutor

import gymnasium as gym
import numpy as np
import pytest

import clinenv  # noqa: F401
from clinenv.integrations.tools import (
    FINAL_RESULT,
    TOOL_NAMES,
    TOOL_SCHEMAS,
    ToolCall,
    ToolEpisode,
    action_to_tool,
    tool_docstring,
    tool_to_action,
)
from clinenv.protocol.parser import parse_action

ENV_ID = "EGIP-Demo-v0"


def test_schemas_are_openai_functions_with_string_arguments():
    # name order: the order TRL lists an environment's methods (inspect.getmembers)
    assert TOOL_NAMES == ("ask_patient", "list_exams", "order_exam", "submit_diagnosis")
    assert [s["function"]["name"] for s in TOOL_SCHEMAS] == list(TOOL_NAMES)
    params = {s["function"]["name"]: s["function"]["parameters"] for s in TOOL_SCHEMAS}
    assert params["ask_patient"]["required"] == ["question"]
    assert params["order_exam"]["required"] == ["exam"]
    assert params["submit_diagnosis"]["required"] == ["diagnosis"]
    assert params["list_exams"] == {"type": "object", "properties": {}}
    for schema in TOOL_SCHEMAS:
        assert schema["type"] == "function" and schema["function"]["description"]
        for prop in schema["function"]["parameters"]["properties"].values():
            assert prop["type"] == "string" and prop["description"]
    assert tool_docstring("order_exam").endswith(
        "\n\nArgs:\n    exam: The examination's id from the list (such as PE1 or T3) or its name.")
    assert "Args:" not in tool_docstring("list_exams")
    with pytest.raises(ValueError, match="unknown tool 'diagnose'"):
        tool_docstring("diagnose")


def test_schemas_are_what_transformers_builds_from_the_trl_adapter():
    """TOOL_SCHEMAS is the list TRL renders for make_env_factory's class: each public
    method but reset and get_reward in inspect.getmembers order (trl 1.16,
    GRPOTrainer.__init__), through transformers' get_json_schema (which
    apply_chat_template applies to callables), key order included, since chat templates
    write the tools with tojson. The TRL venv compares the rendered prompts
    (tests/integrations/test_trl.py)."""
    import inspect
    import json

    get_json_schema = pytest.importorskip("transformers.utils").get_json_schema
    from clinenv.integrations.trl import make_env_factory

    cls = make_env_factory(ENV_ID)
    env = cls()
    methods = [getattr(env, name) for name, _ in inspect.getmembers(cls, inspect.isfunction)
               if not name.startswith("_") and name not in ("reset", "get_reward")]
    built = [get_json_schema(method) for method in methods]
    assert json.dumps(built) == json.dumps(TOOL_SCHEMAS)
    # written out by hand: the tool without arguments
    assert TOOL_SCHEMAS[1] == {"type": "function", "function": {
        "name": "list_exams",
        "description": "List the examinations you can still order (ids and names). Uses "
                       "no round.",
        "parameters": {"type": "object", "properties": {}},
        "return": {"type": "string"}}}
    assert list(TOOL_SCHEMAS[2]["function"]) == ["name", "description", "parameters",
                                                 "return"]


@pytest.mark.parametrize(("name", "args", "text"), [
    ("ask_patient", {"question": "How long have you had the cough?"},
     "How long have you had the cough?"),
    ("ask_patient", {"question": "  Any recent travel?  "}, "Any recent travel?"),
    ("ask_patient", {"question": "Do you smoke? How much?"}, "Do you smoke? How much?"),
    ("order_exam", {"exam": "T4"}, "REQUEST TEST: T4"),
    ("order_exam", {"exam": "Chest X-Ray"}, "REQUEST TEST: Chest X-Ray"),
    ("order_exam", {"exam": "Complete Blood Count (Blood Tests)"},
     "REQUEST TEST: Complete Blood Count (Blood Tests)"),
    ("submit_diagnosis", {"diagnosis": "Lobar pneumonia"}, "DIAGNOSIS READY: Lobar pneumonia"),
    ("submit_diagnosis", {"diagnosis": "C"}, "DIAGNOSIS READY: C"),
    ("submit_diagnosis", '{"diagnosis": "Acute gout"}', "DIAGNOSIS READY: Acute gout"),
    ("list_exams", {}, None),
    ("list_exams", None, None),
])
def test_tool_call_to_action_text(name, args, text):
    assert tool_to_action(name, args) == text


@pytest.mark.parametrize(("name", "args", "message"), [
    ("diagnose", {"x": "y"}, "unknown tool"),
    ("ask_patient", {}, "ask_patient takes question; got none"),
    ("ask_patient", {"question": "Why?", "why": "x"}, "takes question; got question, why"),
    ("ask_patient", {"question": ""}, "non-empty string"),
    ("ask_patient", {"question": 3}, "non-empty string"),
    ("ask_patient", {"question": "T3"}, "reads as another action .test_request.; use order_exam"),
    ("ask_patient", {"question": "[PE1]"}, "use order_exam"),
    ("ask_patient", {"question": "REQUEST TEST: CBC please"}, "use order_exam"),
    ("ask_patient", {"question": "Diagnosis ready: flu"}, "use submit_diagnosis"),
    ("order_exam", {"exam": "T1\nT2"}, "one line"),
    ("order_exam", {"exam": "   "}, "non-empty string"),
    ("order_exam", {"exam": "T1 DIAGNOSIS READY: flu"}, "reads as another action"),
    ("submit_diagnosis", {"diagnosis": "Gout\nor pseudogout"}, "one line"),
    ("submit_diagnosis", "{not json", "arguments are not JSON"),
    ("submit_diagnosis", "[1]", "arguments must be an object"),
    ("list_exams", {"all": "yes"}, "list_exams takes no argument"),
])
def test_tool_calls_that_do_not_map_are_refused(name, args, message):
    with pytest.raises(ValueError, match=message):
        tool_to_action(name, args)


@pytest.mark.parametrize(("text", "call"), [
    ("What brings you in today?",
     ToolCall("ask_patient", {"question": "What brings you in today?"})),
    ("Doctor: Any chest pain?", ToolCall("ask_patient", {"question": "Any chest pain?"})),
    ("REQUEST TEST: T4", ToolCall("order_exam", {"exam": "T4"})),
    ("request test: chest x-ray.", ToolCall("order_exam", {"exam": "chest x-ray"})),
    ("[PE1]", ToolCall("order_exam", {"exam": "PE1"})),
    ("t3", ToolCall("order_exam", {"exam": "T3"})),
    ("<think>fever, cough</think>\nREQUEST TEST: Sputum Culture",
     ToolCall("order_exam", {"exam": "Sputum Culture"})),
    ("**DIAGNOSIS READY:** **Acute pancreatitis**",
     ToolCall("submit_diagnosis", {"diagnosis": "Acute pancreatitis"})),
    ("DIAGNOSIS READY: Gout\nREQUEST TEST: T2", ToolCall("order_exam", {"exam": "T2"})),
    ("", None),
    ("<think>only thinking</think>", None),
])
def test_action_text_to_tool_call_in_acquisition(text, call):
    assert action_to_tool(text) == call


@pytest.mark.parametrize(("text", "answer"), [
    ("DIAGNOSIS READY: Lobar pneumonia", "Lobar pneumonia"),
    ("Final diagnosis: Acute gout.", "Acute gout"),
    ("Nephrotic syndrome", "Nephrotic syndrome"),
    ("DIAGNOSIS READY: Gout\nREQUEST TEST: T2", "Gout"),
    # read as the runtime reads a final answer: speaker lines do not end it
    ("Key findings:\nPatient: joint pain, malar rash.\nDIAGNOSIS READY: Lupus", "Lupus"),
])
def test_action_text_to_tool_call_at_the_decision(text, answer):
    assert action_to_tool(text, phase="decide") == ToolCall("submit_diagnosis",
                                                            {"diagnosis": answer})


def test_strict_markers_read_lower_case_markers_as_questions():
    call = action_to_tool("request test: CBC", strict=True)
    assert call == ToolCall("ask_patient", {"question": "request test: CBC"})
    with pytest.raises(ValueError, match="phase must be"):
        action_to_tool("x", phase="done")


#: Replies that hold a template placeholder where the payload should be (issue 29 §3),
#: each marker form the parser reads, and replies that are not placeholders.
PLACEHOLDER_REPLIES = [
    "DIAGNOSIS READY: [diagnosis]", "DIAGNOSIS READY: <single diagnosis>",
    "DIAGNOSIS READY: N/A", "DIAGNOSIS READY: {diagnosis}", "DIAGNOSIS READY: ...",
    "DIAGNOSIS READY: your diagnosis here", "**DIAGNOSIS READY:** <one diagnosis>",
    "### Diagnosis ready: [diagnosis]", "diagnosis ready: TBD",
    "DIAGNOSIS READY: <single diagnosis> (e.g. Gout)",
    "DIAGNOSIS READY: followed by the diagnosis",
    "REQUEST TEST: <id or name>", "REQUEST TEST: [examination]",
    "REQUEST TEST: <id or name> (for example", "request tests: <test>",
]
#: Placeholders only during acquisition, where a reply with both markers is its request.
ACQUISITION_PLACEHOLDERS = ["REQUEST TEST: <id or name>\nDIAGNOSIS READY: Gout"]
#: Placeholders only at the decision step, where bare and ``Diagnosis:`` lines answer.
DECISION_PLACEHOLDERS = ["FINAL DIAGNOSIS: [diagnosis]", "Final diagnosis: ...",
                         "Diagnosis: <one diagnosis>", "N/A", "your diagnosis here",
                         "<single diagnosis>", "DIAGNOSIS READY: [diagnosis]\nREQUEST TEST: T1"]
NOT_PLACEHOLDERS = ["DIAGNOSIS READY: <Tuberculosis>", "DIAGNOSIS READY: E", "[PE1]",
                    "REQUEST TEST: T1", "DIAGNOSIS READY: Gout", "What is your name?"]


def refused_as_placeholder(text, phase, strict=False):
    """Whether a plain environment in ``phase`` answers ``text`` as a placeholder."""
    env = gym.make(ENV_ID, premature_diagnosis="decide", strict_markers=strict,
                   acquisition_rounds=1 if phase == "decide" else 5).unwrapped
    env.reset(seed=0, options={"case_id": "demo-15"})
    if phase == "decide":
        env.step("How are you?")
    assert env.runtime.phase == phase
    *_, info = env.step(text)
    return bool({"placeholder_request", "placeholder_answer"} & set(info["action_flags"]))


@pytest.mark.parametrize("phase", ["acquire", "decide"])
@pytest.mark.parametrize("text", PLACEHOLDER_REPLIES + ACQUISITION_PLACEHOLDERS
                         + DECISION_PLACEHOLDERS + NOT_PLACEHOLDERS)
def test_a_placeholder_is_no_tool_call_as_the_environment_refuses_it(text, phase):
    placeholder = text in PLACEHOLDER_REPLIES or text in (
        ACQUISITION_PLACEHOLDERS if phase == "acquire" else DECISION_PLACEHOLDERS)
    assert refused_as_placeholder(text, phase) == placeholder
    call = action_to_tool(text, phase=phase)
    assert (call is None) == placeholder, call
    if phase == "acquire" and text == "DIAGNOSIS READY: [diagnosis]\nREQUEST TEST: T1":
        assert call == ToolCall("order_exam", {"exam": "T1"})  # the request it routes


@pytest.mark.parametrize("phase", ["acquire", "decide"])
@pytest.mark.parametrize(("text", "placeholder"), [
    ("DIAGNOSIS READY: [diagnosis]", True), ("REQUEST TEST: <test>", True),
    ("diagnosis ready: [diagnosis]", False), ("N/A", False),  # no exact marker: not read
])
def test_strict_markers_read_placeholders_as_the_strict_environment(text, placeholder, phase):
    assert refused_as_placeholder(text, phase, strict=True) == placeholder
    assert (action_to_tool(text, phase=phase, strict=True) is None) == placeholder


def test_step_text_records_no_call_for_a_placeholder():
    episode = ToolEpisode(ENV_ID)
    episode.reset("demo-01", 0)
    for text in ("DIAGNOSIS READY: [diagnosis]", "REQUEST TEST: <id or name>"):
        result = episode.step_text(text)
        assert result.startswith("Interface: That is the template's placeholder")
        assert episode.calls == [] and episode.env.runtime.phase == "acquire"
    assert episode.env.runtime.turn == 2 and episode.info["action_kind"] == "placeholder"
    episode.step_text("DIAGNOSIS READY: pneumonia")  # a real one ends acquisition
    assert episode.calls == [ToolCall("submit_diagnosis", {"diagnosis": "pneumonia"})]
    assert episode.step_text("DIAGNOSIS READY: N/A") == FINAL_RESULT
    assert episode.done and episode.info["verdict"] == "unscored"
    assert episode.info["answer_status"] == "placeholder"
    assert episode.calls == [ToolCall("submit_diagnosis", {"diagnosis": "pneumonia"})]


def test_a_placeholder_tool_call_is_stepped_but_not_recorded():
    """call() with a template placeholder argument: the environment answers it as the
    same text (feedback during acquisition, no answer at the decision step), and the
    call is not recorded, as step_text records no call for it."""
    episode, text_twin = ToolEpisode(ENV_ID), ToolEpisode(ENV_ID)
    episode.reset("demo-01", 0)
    text_twin.reset("demo-01", 0)
    for name, args, text in (
            ("submit_diagnosis", {"diagnosis": "[diagnosis]"}, "DIAGNOSIS READY: [diagnosis]"),
            ("order_exam", {"exam": "<id or name>"}, "REQUEST TEST: <id or name>")):
        assert episode.call(name, args) == text_twin.step_text(text)
        assert episode.calls == [] and episode.info == text_twin.info
    assert episode.env.runtime.turn == 2 and episode.info["action_kind"] == "placeholder"
    episode.call("submit_diagnosis", {"diagnosis": "pneumonia"})
    assert episode.call("submit_diagnosis", {"diagnosis": "N/A"}) == FINAL_RESULT
    assert episode.info["answer_status"] == "placeholder"
    assert episode.calls == [ToolCall("submit_diagnosis", {"diagnosis": "pneumonia"})]


ACTIONS = ["How old are you?", "REQUEST TEST: T4", "[pe2]", "T1", "REQUEST TEST: Urea.",
           "DIAGNOSIS READY: Lobar pneumonia", "### Diagnosis ready: **Herpes zoster**",
           "<think>hmm</think>Have you lost weight?", "Is the pain worse when you breathe in?",
           "REQUEST TEST: Complete Blood Count (Blood Tests)", "Doctor: Any rash?",
           "DIAGNOSIS READY: B", "REQUEST TEST: Chest_X-Ray", "Do you drink alcohol? Daily?"]


@pytest.mark.parametrize("text", ACTIONS)
def test_both_ways_keep_the_action(text):
    call = action_to_tool(text)
    back = tool_to_action(call.name, call.arguments)
    assert (parse_action(back).kind, parse_action(back).payload) == (
        parse_action(text).kind, parse_action(text).payload)
    assert action_to_tool(back) == call


def plain_env(**kw):
    # the tool view's wording (action_format="tools"): the same texts as the tool view
    return gym.make(ENV_ID, premature_diagnosis="decide",
                    **{"action_format": "tools", **kw}).unwrapped


def test_submit_during_acquisition_returns_e_t_then_scores():
    episode = ToolEpisode(ENV_ID)
    opening = episode.reset("demo-01", 5)
    env = plain_env()  # the same actions as text, complete views
    obs, _ = env.reset(seed=5, options={"case_id": "demo-01"})
    assert opening == obs["text"]
    episode.ask_patient("How long have you had the cough?")
    env.step("How long have you had the cough?")
    episode.order_exam("T4")
    env.step("REQUEST TEST: T4")
    result = episode.submit_diagnosis("pneumonia")
    obs, reward, terminated, _, _ = env.step("DIAGNOSIS READY: pneumonia")
    assert (reward, terminated) == (0.0, False)
    assert result == ("Interface: Acquisition ended early at your request; give your final "
                      "answer on the acquired evidence.\n\n" + obs["text"])
    assert obs["text"].startswith("# Objective (S0)")
    assert "[O2] Measurement T4 Chest X-Ray (Imaging):" in result
    # e_T in the tool view's wording (issue 30)
    assert result.endswith("Call `submit_diagnosis` with your final answer: a single "
                           "diagnosis.")
    assert "DIAGNOSIS READY" not in result
    assert episode.reward == 0.0 and not episode.done
    assert episode.list_exams() == "No examinations: evidence gathering is over."
    with pytest.raises(ValueError, match="evidence gathering is over"):
        episode.order_exam("T1")
    assert episode.submit_diagnosis("Lobar pneumonia") == FINAL_RESULT
    assert (episode.reward, episode.done, episode.info["verdict"]) == (1.0, True, "correct")
    assert episode.info["answer"] == "Lobar pneumonia"


def test_acquisition_that_runs_out_shows_e_t_and_only_submit_is_accepted():
    episode = ToolEpisode(ENV_ID, acquisition_rounds=2)
    episode.reset("demo-10", 0)
    assert "Round 2 of 2." in episode.ask_patient("Which joint hurts?")
    last = episode.order_exam("T99")  # an unknown id still uses the round
    assert last.startswith("Interface: There is no examination with id 'T99'.")
    assert "Interface: Evidence acquisition is over. Give your final answer." in last
    assert "# Acquired observations\n[O1] Patient, asked \"Which joint hurts?\"" in last
    with pytest.raises(ValueError, match="call submit_diagnosis"):
        episode.ask_patient("Anything else?")
    episode.submit_diagnosis("Rheumatoid arthritis")
    assert (episode.reward, episode.info["verdict"]) == (0.0, "wrong")


def test_list_exams_shows_the_displayed_menu_and_uses_no_round():
    episode = ToolEpisode(ENV_ID, menu_limit=3)
    episode.reset("demo-01", 0)
    assert episode.list_exams() == ("PE1  Vital Signs\nPE2  Respiratory Examination\n"
                                    "PE3  Cardiovascular Examination\n... and 6 more; any "
                                    "recorded examination can be requested by name.")
    assert episode.env.runtime.turn == 0
    episode.order_exam("PE2")
    assert episode.list_exams().startswith("PE1  Vital Signs\nPE3  Cardiovascular")
    hidden = ToolEpisode(ENV_ID, show_menu=False)
    hidden.reset("demo-01", 0)
    assert "order an examination by its name" in hidden.list_exams()


def test_calls_before_reset_after_the_end_and_refused_calls():
    episode = ToolEpisode(ENV_ID)
    with pytest.raises(ValueError, match="no episode"):
        episode.ask_patient("Hello?")
    episode.reset("demo-04", 1)
    with pytest.raises(ValueError, match="use order_exam"):
        episode.ask_patient("T2")
    assert episode.calls == [] and episode.env.runtime.turn == 0  # refused: nothing changed
    episode.submit_diagnosis("DKA")
    episode.submit_diagnosis("Diabetic ketoacidosis")
    assert episode.reward == 1.0
    for name, args in [("ask_patient", {"question": "More?"}), ("order_exam", {"exam": "T1"}),
                       ("submit_diagnosis", {"diagnosis": "x"}), ("list_exams", {})]:
        with pytest.raises(ValueError, match="the episode is over"):
            episode.call(name, args)
    assert episode.reset("demo-04", 1) == ToolEpisode(ENV_ID).reset("demo-04", 1)
    assert (episode.reward, episode.done, episode.calls) == (0.0, False, [])


def test_options_the_tool_view_cannot_use_are_refused():
    with pytest.raises(ValueError, match="observation_format='delta'"):
        ToolEpisode(ENV_ID, observation_format="view")
    with pytest.raises(ValueError, match="premature_diagnosis='decide'"):
        ToolEpisode(ENV_ID, premature_diagnosis="clarify")
    for env_id in ("EGIP-Demo-Menu-v0", "AgentClinic-Demo-v0"):
        with pytest.raises(ValueError, match="needs an EGIP text environment"):
            ToolEpisode(env_id)
    with pytest.raises(gym.error.Error):
        ToolEpisode("EGIP-Nowhere-v0")


SCRIPT = [("ask_patient", {"question": "When did it start?"}), ("order_exam", {"exam": "PE1"}),
          ("ask_patient", {"question": "Any other symptoms?"}), ("order_exam", {"exam": "T2"}),
          ("list_exams", {}), ("submit_diagnosis", {"diagnosis": "unsure"}),
          ("submit_diagnosis", {"diagnosis": "Acute appendicitis"})]
ROWS = [(f"demo-{i:02d}", seed) for i in range(1, 18) for seed in (0, 12345)]


def transcript(row):
    """Opening text and every tool result of :data:`SCRIPT` on one row, and the reward."""
    episode = ToolEpisode(ENV_ID)
    texts = [episode.reset(*row)]
    texts += [episode.call(name, args) for name, args in SCRIPT]
    return texts, episode.reward


def test_same_row_same_episode_across_threads_and_processes():
    serial = [transcript(row) for row in ROWS]
    assert len({texts[0] for texts, _ in serial}) == 17  # one opening per case
    assert sum(reward for _, reward in serial) == 2.0  # demo-05, both seeds
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(transcript, ROWS * 2)) == serial * 2
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        assert pool.map(transcript, ROWS[::5]) == serial[::5]


def test_one_instance_used_from_many_threads_stays_consistent():
    episode = ToolEpisode(ENV_ID)
    episode.reset("demo-02", 0)
    questions = [f"Question number {i}?" for i in range(12)]
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(episode.ask_patient, questions))
    rounds = sorted(int(re.search(r"Round (\d+) of 19", r).group(1)) for r in results)
    assert rounds == list(range(2, 14))  # each call had a round of its own
    assert episode.env.runtime.turn == 12 and len(episode.calls) == 12


def test_no_global_random_state_is_used():
    random.seed(3)
    np.random.seed(3)
    before = (random.getstate(), np.random.get_state()[1].copy())
    transcript(("demo-07", 9))
    assert random.getstate() == before[0]
    assert np.array_equal(np.random.get_state()[1], before[1])


def body(delta):
    """The new events of a delta observation: the text before the round footer or e_T."""
    return re.split(r"\n*# (?:Available examinations|Your turn|Objective \(S0\))", delta)[0]


def test_delta_observations_never_rewrite_earlier_turns():
    actions = ["When did it start?", "REQUEST TEST: PE1", "REQUEST TEST: PE1",
               "REQUEST TEST: T99", "Any other symptoms?", "REQUEST TEST: Imaging",
               "Where is the pain?"]
    episode = ToolEpisode(ENV_ID)
    opening = episode.reset("demo-05", 0)
    deltas = [episode.call(c.name, c.arguments) for c in map(action_to_tool, actions)]
    view = plain_env()
    view.reset(seed=0, options={"case_id": "demo-05"})
    for text in actions:
        obs, *_ = view.step(text)
    # the complete view's history holds each delta's new events once, in order
    history = obs["text"].split("# Interaction so far\n", 1)[1].split("\n\n# Available")[0]
    kept = [line for line in history.split("\n")
            if not re.match(r"\[round \d+\]$|Doctor: ", line)]
    assert "\n".join(kept) == "\n".join(body(d) for d in deltas)
    assert obs["text"].startswith(opening.split("\n\n# Available")[0])
    for i, delta in enumerate(deltas):  # no delta repeats an earlier one's events
        assert body(delta) and all(body(delta) not in d for d in deltas[:i] + [opening])
    assert "replaced by a fixed clarification question" in deltas[2]


def test_the_core_never_imports_the_integrations():
    import subprocess
    import sys

    code = ("import importlib, pkgutil, sys\n"
            "def walk(name):\n"
            "    try:\n"
            "        module = importlib.import_module(name)\n"
            "    except ImportError:  # an optional dependency\n"
            "        return\n"
            "    for m in pkgutil.iter_modules(getattr(module, '__path__', [])):\n"
            "        if m.name not in ('integrations', '__main__'):\n"
            "            walk(f'{name}.{m.name}')\n"
            "for top in ('clinenv', 'clinenv.agents', 'clinenv.wrappers'):\n"
            "    walk(top)\n"
            "print(len(sys.modules), sorted(n for n in sys.modules if 'integrations' in n))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert int(out[0]) > 100 and out[1:] == ["[]"]


# Issue 29 §1: the same reward for the same episode, finished or cut off. demo-01's
# catalog holds 9 exams; the Chest X-Ray (T4) is an imaging exam (cost 3).
CUT = ["REQUEST TEST: Chest X-Ray", "How long have you had the cough?"]  # then it stops
FINISHED = CUT + ["DIAGNOSIS READY: pneumonia", "DIAGNOSIS READY: Lobar pneumonia"]
CUT_CALLS = [("order_exam", {"exam": "Chest X-Ray"}),
             ("ask_patient", {"question": "How long have you had the cough?"})]
FINISHED_CALLS = CUT_CALLS + [("submit_diagnosis", {"diagnosis": "pneumonia"}),
                              ("submit_diagnosis", {"diagnosis": "Lobar pneumonia"})]


def gym_episode(texts, **kw):
    """A plain Gym env stepped with ``texts`` on demo-01: (the spec's reward of its
    components so far, the sum of its step rewards, the components, the last info)."""
    env = gym.make(ENV_ID, observation_format="delta", premature_diagnosis="decide", **kw)
    env.reset(seed=7, options={"case_id": "demo-01"})
    total, info = 0.0, {}
    for text in texts:
        _, reward, _, _, info = env.step(text)
        total += float(reward)
    u = env.unwrapped
    return u.reward_spec.reward(u.reward_components()), total, u.reward_components(), info


@pytest.mark.parametrize("spec", ["accuracy", "diagagent", "cost-aware"])
@pytest.mark.parametrize("finished", [False, True])
def test_episode_reward_is_the_gym_reward_cut_off_or_finished(spec, finished):
    texts, calls = (FINISHED, FINISHED_CALLS) if finished else (CUT, CUT_CALLS)
    want, total, components, info = gym_episode(texts, reward_spec=spec)
    by_text = ToolEpisode(ENV_ID, reward_spec=spec)
    by_tool = ToolEpisode(ENV_ID, reward_spec=spec)
    by_text.reset("demo-01", 7)
    by_tool.reset("demo-01", 7)
    for text in texts:
        by_text.step_text(text)
    for name, args in calls:
        by_tool.call(name, args)
    for episode in (by_text, by_tool):
        assert episode.done is finished and episode.reward_spec.name == spec
        assert episode.reward_components() == components
        assert episode.episode_reward() == want
    if finished:  # the Gym env's own return, and its terminal info
        assert total == want and info["reward_components"] == components.to_dict()
    else:
        assert total == 0.0 and "reward_components" not in info


def test_diagagent_values_by_hand():
    """recall 1/9, precision 1, F1 2 * (1/9) / (10/9) = 0.2; reward 1.0 * diagnosis +
    0.5 * F1 - 0.01 * turns."""
    cut = ToolEpisode(ENV_ID, reward_spec="diagagent")
    cut.reset("demo-01", 7)
    for text in CUT:
        cut.step_text(text)
    c = cut.reward_components()
    assert (c.diagnosis, c.format, c.turns, c.exam_spend, c.invalid_actions) == (0, 0, 2, 3, 0)
    assert (c.workup_recall, c.workup_precision) == (pytest.approx(1 / 9), 1.0)
    assert c.workup_f1 == pytest.approx(0.2)
    assert cut.episode_reward() == pytest.approx(0.5 * 0.2 - 0.01 * 2)  # 0.08
    for text in FINISHED[len(CUT):]:
        cut.step_text(text)
    assert cut.reward_components().turns == 3  # the early stop's round counts
    assert cut.episode_reward() == pytest.approx(1.0 + 0.5 * 0.2 - 0.01 * 3)  # 1.07


@pytest.mark.parametrize("finished", [False, True])
def test_legacy_per_step_charges_add_to_the_spec_reward(finished):
    texts = FINISHED if finished else CUT + ["REQUEST TEST: T99"]  # T99: invalid
    legacy = {"exam_cost": 0.05, "invalid_action_penalty": 0.2}
    want, total, _, _ = gym_episode(texts, reward_spec="diagagent", **legacy)
    episode = ToolEpisode(ENV_ID, reward_spec="diagagent", **legacy)
    episode.reset("demo-01", 7)
    for text in texts:
        episode.step_text(text)
    if finished:
        assert episode.episode_reward() == pytest.approx(total)
        assert total == pytest.approx(want - 0.05)
    else:
        assert episode.reward == pytest.approx(-0.05 - 0.2)  # the charges so far
        assert episode.episode_reward() == pytest.approx(want - 0.05 - 0.2)


def test_rewards_need_an_episode_and_reset_clears_them():
    episode = ToolEpisode(ENV_ID, reward_spec="diagagent")
    for read in (episode.reward_components, episode.episode_reward):
        with pytest.raises(ValueError, match="no episode"):
            read()
    episode.reset("demo-01", 7)
    for text in FINISHED:
        episode.step_text(text)
    episode.reset("demo-01", 7)
    assert episode.episode_reward() == 0.0
    assert episode.reward_components().turns == 0


def test_component_metrics_name_every_component():
    from clinenv.integrations.tools import component_metrics
    from clinenv.reward_components import COMPONENTS

    episode = ToolEpisode(ENV_ID)
    episode.reset("demo-01", 7)
    episode.step_text("How long have you had the cough?")  # no exam: precision undefined
    metrics = component_metrics(episode.reward_components())
    assert list(metrics) == [f"reward_components/{name}" for name in COMPONENTS]
    assert metrics["reward_components/workup_precision"] is None
    assert metrics["reward_components/turns"] == 1.0
    assert all(isinstance(v, float) for k, v in metrics.items() if "precision" not in k)
