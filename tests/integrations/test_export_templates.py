"""Export rows under the chat templates of released models.

Runs in the ``.venv-trl`` environment, which has TRL's copies of the templates as the
models ship them (``trl.chat_template_utils``: Qwen3, Llama 3, 3.1 and 3.2, Gemma 3);
elsewhere it skips. The rows are a teacher run's and a scripted run's on the demo set.
Rendered with ``apply_chat_template`` of a tokenizer built here (no model download):
no exception, and each tool call written exactly as the template writes a dict of
arguments, as often as the row makes it, never as a JSON string inside JSON.
"""
# issue 30

from __future__ import annotations

import json
from collections import Counter

import pytest

trl = pytest.importorskip("trl", reason="TRL is not installed: run in .venv-trl "
                                         "(pip install -e '.[test,trl]'), as .ci/run does")
transformers = pytest.importorskip("transformers")

from tokenizers import Tokenizer, models  # noqa: E402
from trl.chat_template_utils import (  # noqa: E402
    gemma3_chat_template,
    llama3_1_chat_template,
    llama3_2_chat_template,
    llama3_chat_template,
    qwen3_chat_template,
)

import clinenv  # noqa: F401,E402
from clinenv.cli import main  # noqa: E402
from clinenv.export import episode_rows  # noqa: E402
from clinenv.integrations.tools import TOOL_SCHEMAS  # noqa: E402
from clinenv.template_check import check_template  # noqa: E402

#: How each template writes one call: (name, arguments as JSON) -> text.
CALL_TEXT = {
    "qwen3": '{{"name": "{}", "arguments": {}}}',
    "llama3_1": '{{"name": "{}", "parameters": {}}}',
    "llama3_2": '{{"name": "{}", "parameters": {}}}',
}
TEMPLATES = {"qwen3": qwen3_chat_template, "llama3_1": llama3_1_chat_template,
             "llama3_2": llama3_2_chat_template, "gemma3": gemma3_chat_template}


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs")
    for doctor in ("teacher", "scripted"):
        assert main(["run", "--env", "EGIP-Demo-v0", "--doctor", doctor, "--episodes", "4",
                     "--quiet", "--out", str(folder / f"{doctor}.jsonl")]) == 0
    return [folder / "teacher.jsonl", folder / "scripted.jsonl"]


@pytest.fixture(scope="module")
def tokenizer():
    """A tokenizer object with no vocabulary to speak of: only its template renders."""
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")),
        bos_token="<bos>", eos_token="<eos>")


def render(tokenizer, messages, template, tools=None):
    return tokenizer.apply_chat_template(messages, tools=tools, chat_template=template,
                                         tokenize=False)


@pytest.mark.parametrize("name", sorted(CALL_TEXT))
def test_tools_rows_render_each_call_once(tokenizer, logs, name):
    rows = [r for kw in ({}, {"tool_results": "compact"})
            for r in episode_rows(logs, fmt="tools", **kw)]
    assert len(rows) == 16
    for row in rows:
        text = render(tokenizer, row["messages"], TEMPLATES[name], TOOL_SCHEMAS)
        calls = Counter(CALL_TEXT[name].format(c["function"]["name"], json.dumps(
            c["function"]["arguments"], ensure_ascii=False))
            for m in row["messages"] for c in m.get("tool_calls", []))
        assert sum(calls.values()) == row["num_turns"] > 3
        for call, n in calls.items():
            assert text.count(call) == n, call
        for call in row["tool_calls"]:  # never the JSON string of the arguments
            assert json.dumps(call["function"]["arguments"])[1:-1] not in text
        results = [m["content"] for m in row["messages"] if m["role"] == "tool"]
        # Llama 3.x writes a tool result as a JSON string (its content is iterable)
        assert all(r.strip() in text or json.dumps(r, ensure_ascii=False) in text
                   for r in results)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
@pytest.mark.parametrize("options", [{}, {"delta": True}],
                         ids=["view", "delta"])
def test_messages_rows_render_under_every_template(tokenizer, logs, name, options):
    """One system message, first (Gemma 3 raises on a second one)."""
    for row in episode_rows(logs, **options):
        text = render(tokenizer, row["messages"], TEMPLATES[name])
        assert [m["role"] for m in row["messages"]].count("system") == 1
        for message in row["messages"][1:]:
            assert message["content"].strip() in text


def test_check_template_on_the_released_templates():
    for name in ("qwen3", "llama3_1", "llama3_2"):
        assert check_template(TEMPLATES[name]) == [], name
    for template in (*TEMPLATES.values(), llama3_chat_template):
        assert check_template(template, fmt="messages") == []
    # Gemma 3 has no tool role; Llama 3 (before 3.1) reads only the content
    (gemma,) = check_template(gemma3_chat_template)
    assert gemma.startswith("it raises on tools-format rows: Conversation roles must "
                            "alternate")
    assert check_template(llama3_chat_template)[0].startswith(
        "it does not write a call's name once")
    # OpenAI-style string arguments are written twice encoded by Qwen3 and Llama 3.1
    assert "double-encoded" in " ".join(check_template(llama3_1_chat_template,
                                                       tool_arguments="json"))
