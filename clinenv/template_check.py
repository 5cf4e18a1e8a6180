"""Does a chat template render exported rows? :func:`check_template`.

A template without tool support renders tool-call turns empty without raising;
``clinenv export --chat-template FILE`` warns about it before writing.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["check_template"]

# Probe texts that no template writes by itself.
_QUESTION = "Where exactly does it hurt (probe q-7c1)?"
_EXAM = "T7c1"
_DIAGNOSIS = "probe diagnosis d-7c1"
_REPLY = "Patient: probe reply r-7c1"
_RESULT = "probe result s-7c1"


def _tools_probe(arguments: str) -> list[dict[str, Any]]:
    def call(index: int, name: str, args: dict[str, str]) -> dict[str, Any]:
        return {"id": f"call_{index}", "type": "function", "function": {
            "name": name, "arguments": args if arguments == "dict" else json.dumps(args)}}

    calls = [call(0, "ask_patient", {"question": _QUESTION}),
             call(1, "order_exam", {"exam": _EXAM}),
             call(2, "submit_diagnosis", {"diagnosis": _DIAGNOSIS})]
    messages: list[dict[str, Any]] = [{"role": "system", "content": "probe system s-0"},
                                      {"role": "user", "content": "probe task u-0"}]
    for entry, result in zip(calls, (_REPLY, _RESULT, "probe final f-7c1"), strict=True):
        messages.append({"role": "assistant", "content": "", "tool_calls": [entry]})
        messages.append({"role": "tool", "content": result, "tool_call_id": entry["id"],
                         "name": entry["function"]["name"]})
    return messages


def _messages_probe() -> list[dict[str, Any]]:
    return [{"role": "system", "content": "probe system s-0"},
            {"role": "user", "content": "probe task u-0"},
            {"role": "assistant", "content": _QUESTION},
            {"role": "user", "content": _REPLY},
            {"role": "assistant", "content": f"DIAGNOSIS READY: {_DIAGNOSIS}"}]


def check_template(chat_template: str, *, fmt: str = "tools",
                   tool_arguments: str = "dict") -> list[str]:
    """The problems of rendering export rows of ``fmt`` with ``chat_template`` (a Jinja
    string, as ``tokenizer.chat_template``); ``[]`` when there are none.

    A probe episode is rendered as ``apply_chat_template`` renders it; each problem is one
    line: the template raises, a call or result does not appear exactly once, arguments are
    encoded twice, or a text turn is missing.

    Args:
        chat_template: the template text.
        fmt: ``"tools"`` or ``"messages"``.
        tool_arguments: ``"dict"`` or ``"json"``, as exported.

    Raises:
        ValueError: an unknown ``fmt`` or ``tool_arguments``.
        ImportError: transformers is not installed.
    """
    if fmt not in ("messages", "tools"):
        raise ValueError(f"fmt must be 'messages' or 'tools', got {fmt!r}")
    if tool_arguments not in ("dict", "json"):
        raise ValueError(f"tool_arguments must be 'dict' or 'json', got {tool_arguments!r}")
    try:
        from transformers.utils.chat_template_utils import render_jinja_template
    except ImportError:
        raise ImportError("check_template needs transformers (pip install "
                          "transformers)") from None
    from clinenv.integrations.tools import TOOL_SCHEMAS  # not imported by the core

    tools = TOOL_SCHEMAS if fmt == "tools" else None
    messages = _tools_probe(tool_arguments) if fmt == "tools" else _messages_probe()

    def render(conversation: list[dict[str, Any]]) -> str:
        # apply_chat_template passes the special tokens too; templates read bos_token
        return render_jinja_template([conversation], tools=tools,
                                     chat_template=chat_template, bos_token="<bos>",
                                     eos_token="<eos>")[0][0]

    try:
        text = render(messages)
        opening = render(messages[:2])
    except Exception as err:  # noqa: BLE001  (Jinja's TemplateError and what filters raise)
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        return [f"it raises on {fmt}-format rows: {first}"]
    if fmt == "messages":
        return [f"it drops the {m['role']} turn {m['content'][:30]!r}" for m in messages
                if m["content"] not in text]
    names, values, doubled = [], [], []
    for message in messages[2::2]:
        function = message["tool_calls"][0]["function"]
        name, args = function["name"], function["arguments"]
        ((key, value),) = (args if isinstance(args, dict) else json.loads(args)).items()
        if text.count(name) != opening.count(name) + 1:
            names.append(name)
        if text.count(value) != 1:
            values.append(value)
        if f'\\"{key}\\"' in text:
            doubled.append(name)
    results = [m["content"] for m in messages[3::2] if text.count(m["content"]) != 1]
    problems = []
    if names:
        problems.append(f"it does not write a call's name once ({', '.join(names)}): a "
                        "template without tool support renders tool-call turns empty")
    if values:
        problems.append(f"it does not write a call's arguments once ({len(values)} of "
                        f"{len(messages[2::2])} calls)")
    if doubled:
        problems.append("it writes the arguments as a JSON string inside JSON "
                        "(double-encoded): export dict arguments")
    if results:
        problems.append(f"it does not write a tool result once ({len(results)} of "
                        f"{len(messages[3::2])})")
    return problems
