"""TRL through the server: ``GRPOTrainer(environment_factory=make_remote_env_factory(url))``
against a real ``clinenv serve`` on 127.0.0.1 (a free port), EGIP-Demo-v0 with the
``diagagent`` reward spec (so a cut-off episode earns a workup reward).

Runs in ``.venv-openenv``, which ``.ci/run`` builds with TRL and CPU torch beside openenv
(``pip install -e '.[test,openenv,trl]' torch==2.13.0``); elsewhere it skips. Rollouts
follow scripts (TRL's ``_generate_single_turn`` replaced, as in test_trl.py: the tiny
random model calls no tools); TRL's parsing, tool execution, rewards and the gradient step
are real. Sockets must close without a ResourceWarning, also left to the garbage
collector or to interpreter exit.
"""

from __future__ import annotations

import gc
import inspect
import json
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

pytest.importorskip("openenv", reason="openenv is not installed: run in .venv-openenv, "
                                      "as .ci/run builds it")
trl = pytest.importorskip("trl", reason="TRL is not installed: .ci/run installs it in "
                                         ".venv-openenv (clinenv[test,openenv,trl])")
transformers = pytest.importorskip("transformers")

from clinenv.integrations import tools as tool_view  # noqa: E402
from clinenv.integrations.openenv import make_remote_env_factory  # noqa: E402
from clinenv.integrations.tools import TOOL_SCHEMAS, TOOL_SYSTEM_PROMPT  # noqa: E402
from clinenv.integrations.trl import (  # noqa: E402
    TASK_INTRO,
    component_reward_funcs,
    make_env_factory,
    task_dataset,
)
from clinenv.reward_components import COMPONENTS  # noqa: E402
from clinenv.testing.rewards import gym_reward  # noqa: E402
from clinenv.testing.serve import ServeProcess, free_port  # noqa: E402
from clinenv.testing.tiny_models import chatml_tokenizer, tiny_qwen3  # noqa: E402

ENV_ID = "EGIP-Demo-v0"
SPEC = "diagagent"
ROOT = Path(__file__).resolve().parents[2]
# demo-01: an exam and a question, then a plain reply: cut off before any answer.
# demo-05: a question and the answer (twice: early end, then the scored answer).
SCRIPTS = {
    "demo-01": [("order_exam", {"exam": "Chest X-Ray"}),
                ("ask_patient", {"question": "How long have you had the cough?"})],
    "demo-05": [("ask_patient", {"question": "Where exactly is the pain?"}),
                ("list_exams", {}),
                ("submit_diagnosis", {"diagnosis": "Acute appendicitis"}),
                ("submit_diagnosis", {"diagnosis": "Acute appendicitis"})],
}
#: Leaks are errors here (tests/conftest.py leaves the extras' suites out of its filters).
pytestmark = [pytest.mark.filterwarnings("error::ResourceWarning"),
              pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = ServeProcess(tmp_path_factory.mktemp("serve"), "--env", ENV_ID,
                       "--reward-spec", SPEC, cwd=ROOT)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def tokenizer():
    episode = tool_view.ToolEpisode(ENV_ID)
    corpus = [TOOL_SYSTEM_PROMPT, TASK_INTRO, json.dumps(TOOL_SCHEMAS)]
    for case in episode.env.pool.cases:
        corpus.append(episode.reset(case.case_id, 0))
    return chatml_tokenizer(corpus, vocab_size=1000)


def sessions(log: str) -> tuple[int, int]:
    """(sessions opened, sessions closed) in the server's log."""
    return log.count(" open (" + ENV_ID), log.count(" close\n")


def all_closed(server, opened: int | None = None, timeout_s: float = 10.0) -> bool:
    """Whether the log shows as many closes as opens (``opened`` when given), waiting
    up to ``timeout_s`` for the server to log them."""
    deadline = time.monotonic() + timeout_s
    while True:
        now_opened, closed = sessions(server.log())
        if closed == now_opened == (opened if opened is not None else now_opened):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def test_remote_instances_play_as_in_process_ones(server):
    with pytest.raises(ConnectionError, match="no clinenv server"):  # checked at once
        make_remote_env_factory(f"ws://127.0.0.1:{free_port()}", connect_timeout_s=2)
    Remote = make_remote_env_factory("ws" + server.url[4:], env_id=ENV_ID)  # ws:// too
    local = make_env_factory(ENV_ID, reward_spec=SPEC)()
    remote = Remote()
    # the same tools for TRL: public functions, and the schemas built from them
    public = sorted(n for n, _ in inspect.getmembers(Remote, inspect.isfunction)
                    if not n.startswith("_"))
    assert public == ["ask_patient", "get_reward", "list_exams", "order_exam", "reset",
                      "submit_diagnosis"]  # no close(): TRL would offer it as a tool
    for schema in TOOL_SCHEMAS:
        built = transformers.utils.get_json_schema(getattr(remote, schema["function"]["name"]))
        assert json.dumps(built) == json.dumps(schema)
    with pytest.raises(ValueError, match="no episode"):
        remote.order_exam("T1")
    with pytest.raises(ValueError, match="the row is for 'EGIP-MedQA-v0'"):
        remote.reset(case_id="demo-03", seed=0, env_id="EGIP-MedQA-v0")
    row = task_dataset(ENV_ID, split=["demo-01"])[0]
    assert remote.reset(**row) == local.reset(**row)
    for name, args in SCRIPTS["demo-01"] + [("list_exams", {}),
                                             ("submit_diagnosis", {"diagnosis": "Asthma"})]:
        assert getattr(remote, name)(**args) == getattr(local, name)(**args)
        assert remote.get_reward() == pytest.approx(local.get_reward())  # cut off so far
        assert remote._reward_components() == local._reward_components()
    with pytest.raises(ValueError, match="evidence gathering is over") as far:
        remote.ask_patient("Any fever?")
    with pytest.raises(ValueError) as near:
        local.ask_patient("Any fever?")
    assert str(far.value) == str(near.value)  # the server's message, as in process
    del far, near  # their tracebacks hold the instances
    assert remote.submit_diagnosis("Lobar pneumonia") == local.submit_diagnosis(
        "Lobar pneumonia")
    assert remote.get_reward() == pytest.approx(local.get_reward())
    assert local.get_reward() > 0.9  # the right answer
    assert remote._text_answer_at_end("x") is False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del remote
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert all_closed(server)  # collected: its session closed


def scripted_turns(tok, objectives):
    """The model's sampling replaced by SCRIPTS' calls, then a plain reply (test_trl.py)."""

    def generate(self, prompt_ids, images, multimodal_fields, num_generations,
                 has_tool_images=False):
        out = []
        for ids in prompt_ids:
            text = tok.decode(ids)
            case = next(c for c, objective in objectives.items() if objective in text)
            turn = text.count("<tool_response>")
            if turn < len(SCRIPTS[case]):
                name, args = SCRIPTS[case][turn]
                reply = ("<tool_call>\n" + json.dumps({"name": name, "arguments": args})
                         + "\n</tool_call><|im_end|>")
            else:
                reply = "Thank you.<|im_end|>"
            out.append(tok.encode(reply, add_special_tokens=False))
        return out, None

    return generate


def test_grpo_step_through_the_server(server, tokenizer, tmp_path, monkeypatch):
    rows = task_dataset(ENV_ID, split=list(SCRIPTS))
    pool = tool_view.ToolEpisode(ENV_ID).env.pool
    objectives = {case_id: pool.case(case_id).objective for case_id in SCRIPTS}
    monkeypatch.setattr(trl.GRPOTrainer, "_generate_single_turn",
                        scripted_turns(tokenizer, objectives))
    opened_before, _ = sessions(server.log())
    funcs = component_reward_funcs()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        trainer = trl.GRPOTrainer(
            model=tiny_qwen3(tokenizer), processing_class=tokenizer, reward_funcs=funcs,
            train_dataset=rows,
            environment_factory=make_remote_env_factory(server.url, env_id=ENV_ID),
            args=trl.GRPOConfig(
                output_dir=str(tmp_path / "out"), max_steps=1, per_device_train_batch_size=4,
                num_generations=2, learning_rate=1e-4, logging_steps=1, report_to="none",
                use_cpu=True, save_strategy="no", seed=0, max_completion_length=4096,
                reward_weights=[0.0] * len(funcs)))
        assert trainer.reward_func_names == [*COMPONENTS, "ClinenvRemoteToolEnv"]
        trainer.train()
        assert trainer.state.global_step == 1
        logged = trainer.state.log_history[0]
        opened, _ = sessions(server.log())
        assert opened - opened_before == 4  # one session per rollout instance
        del trainer
        gc.collect()
    assert not [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert all_closed(server, opened)  # every session closed
    # the rewards TRL logged are the server's, equal to a plain env's with the spec
    expected = {c: gym_reward(ENV_ID, c, rows[i]["seed"],
                              [tool_view.tool_to_action(n, a) for n, a in SCRIPTS[c]
                               if n != "list_exams"], SPEC)
                for i, c in enumerate(rows["case_id"])}
    assert 0 < expected["demo-01"][0] < 0.5 < expected["demo-05"][0]  # cut off; finished
    mean = (expected["demo-01"][0] + expected["demo-05"][0]) / 2
    assert logged["rewards/ClinenvRemoteToolEnv/mean"] == pytest.approx(mean)
    assert logged["reward"] == pytest.approx(mean)
    assert logged["rewards/turns/mean"] == pytest.approx(
        sum(expected[c][1]["turns"] for c in SCRIPTS) / 2)
    assert logged["tools/call_frequency"] == pytest.approx(
        sum(len(s) for s in SCRIPTS.values()) / 2)
    assert logged["tools/failure_frequency"] == 0


def test_a_session_left_open_closes_at_exit(server):
    """No close and no collection: the finalizer closes the socket at interpreter exit,
    with ResourceWarnings as errors (an unraisable one would print to stderr)."""
    script = textwrap.dedent(f"""
        from clinenv.integrations.openenv import make_remote_env_factory
        env = make_remote_env_factory({server.url!r})()
        print(env.reset(case_id="demo-02", seed=1)[:6])
        env.list_exams()
    """)
    opened_before, _ = sessions(server.log())
    proc = subprocess.run([sys.executable, "-W", "error::ResourceWarning",
                           "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout == "# Task\n", proc.stderr
    assert "Warning" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
    assert all_closed(server, opened_before + 1)
