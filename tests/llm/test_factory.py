"""Building chat models by backend name, and the LLM layer's lazy imports."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from clinenv.llm import (
    BackendUnavailableError,
    GenerationConfig,
    ScriptedChatModel,
    make_chat_model,
)
from clinenv.testing.fake_responders import FALLBACK_QUESTION
from clinenv.testing.fake_server import FakeChatServer
from clinenv.testing.tiny_chat import user

HEAVY = ("openai", "httpx", "httpx2", "torch", "transformers", "vllm",
         "clinenv.testing.fake_server")


def test_import_clinenv_llm_imports_no_optional_dependency():
    code = ("import sys, json, clinenv.llm\n"
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_openai_backend_by_name(fake_server):  # noqa: F811
    model = make_chat_model(" OpenAI ", "fake-model", base_url=fake_server.base_url,
                            max_retries=0, config=GenerationConfig(max_tokens=9))
    assert model.backend == "openai" and model.max_retries == 0
    assert model.generate(user("hi")).text == "OK"
    assert fake_server.requests[0]["max_tokens"] == 9


def test_scripted_backend_defaults_to_the_offline_clinician():
    model = make_chat_model("scripted", "demo")
    assert isinstance(model, ScriptedChatModel) and model.model == "demo"
    view = ("# Task\nX\n\n# Available examinations (results hidden until requested)\n"
            "PE1  Vital Signs\n\n# Your turn\n")
    assert model.generate(user(view)).text == "REQUEST TEST: PE1"
    assert model.generate(user("hello")).text == FALLBACK_QUESTION
    assert make_chat_model("scripted", "judge", responder="yes").generate(user("?")).text == "Yes"
    assert make_chat_model("scripted", "s", replies=["a", "b"]).generate(user("?"), n=2).texts \
        == ["a", "b"]


def test_vllm_backend_by_name_with_an_injected_engine():
    class Engine:
        def chat(self, conversations, params, use_tqdm=False):
            raise AssertionError("not called")

    model = make_chat_model("vllm", "tiny", llm=Engine())
    assert model.backend == "vllm" and model.model == "tiny"


@pytest.mark.parametrize("name", ["transformers", "hf"])
def test_transformers_backend_by_name_reports_a_missing_extra(monkeypatch, name):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(BackendUnavailableError,
            match=r"pip install -e '\.\[hf\]' in a clinenv clone"):
        make_chat_model(name, "some/model")


def test_unknown_names_are_rejected_with_the_choices():
    with pytest.raises(ValueError, match="openai, vllm, transformers, hf, scripted"):
        make_chat_model("llamacpp", "m")
    with pytest.raises(ValueError, match="clinician"):
        make_chat_model("scripted", "m", responder="oracle")
    with pytest.raises(TypeError):
        make_chat_model("openai", "m", temperature=0.5)


def test_fake_server_is_exported():
    with FakeChatServer("yes") as server:
        assert server.base_url.startswith("http://127.0.0.1:")
