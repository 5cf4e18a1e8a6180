"""Client-side stop strings in the OpenAI-compatible backend: a real server on 127.0.0.1
that ignores ``stop``; the backend sends the first four stops and cuts every choice at the
earliest stop string itself.

Expected texts are written out by hand from the raw replies, never computed with
:func:`clinenv.protocol.turns.cut_turn`.
"""

from __future__ import annotations

import pytest

from clinenv.testing.fake_responders import cycling_responder
from clinenv.testing.fake_server import FakeChatServer

pytest.importorskip("openai")
from clinenv.llm.openai_backend import OpenAIChatModel  # noqa: E402

DOCTOR_STOPS = ("\nPatient:", "\nExaminer [", "<|im_end|>", "<|eot_id|>", "<end_of_turn>",
                "\nUser:")


def served(replies):
    """A fake server whose n-th choice overall is ``replies[n]`` (it ignores ``stop``)."""
    return FakeChatServer(cycling_responder(replies))


def openai_model(server, **kwargs):
    return OpenAIChatModel("fake", base_url=server.base_url, timeout_s=5.0, max_retries=0,
                           **kwargs)


@pytest.mark.parametrize(("raw", "kept"), [
    # ChatML: <|im_end|> is among the 4 stops sent; the server ignores it
    ("Any fever?<|im_end|>\n<|im_start|>user\nPatient: No.", "Any fever?"),
    # Llama 3: the 4th stop sent
    ("How long?<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nTwo days.",
     "How long?"),
    # Gemma: the 5th stop, never sent, enforced on the client only
    ("Any rash?<end_of_turn>\n<start_of_turn>user\nNo rash.", "Any rash?"),
    # a speaker line: the 1st stop
    ("Where is the pain?\nPatient: In my chest.", "Where is the pain?"),
    # the 6th stop (not sent), after a token that is no stop string at all
    ("Any cough? [/INST]\nUser: yes", "Any cough? [/INST]"),
])
def test_server_that_ignores_stop_is_cut_on_the_client(raw, kept):
    with served([raw]) as server:
        result = openai_model(server).generate([{"role": "user", "content": "hi"}],
                                               stop=DOCTOR_STOPS)
    assert server.requests[0]["stop"] == list(DOCTOR_STOPS[:4])
    (choice,) = result.choices
    assert (choice.text, choice.raw_text, choice.finish_reason) == (kept, raw, "stop")
    assert choice.stop_enforced and choice.wrote_past_turn
    record = result.to_log(flags=["unparsed"])
    assert record["flags"] == ["unparsed", "wrote_past_turn"]
    assert record["stop_enforced"] is True
    assert any("stop string" in w for w in record["warnings"])


def test_a_reply_cut_by_max_tokens_past_a_stop_string_ends_with_stop():
    with served([{"content": "Fine.\nDoctor: and then", "finish_reason": "length"}]) as server:
        result = openai_model(server).generate([{"role": "user", "content": "hi"}],
                                               stop=["\nDoctor"])
    assert (result.text, result.choices[0].finish_reason) == ("Fine.", "stop")
    assert not result.choices[0].truncated


def test_a_reply_within_its_turn_is_untouched():
    with served(["Does it hurt when you breathe?"]) as server:
        result = openai_model(server).generate([{"role": "user", "content": "hi"}],
                                               stop=DOCTOR_STOPS)
    (choice,) = result.choices
    assert (choice.text, choice.raw_text, choice.stop_enforced) == (
        "Does it hurt when you breathe?", None, False)
    record = result.to_log()
    assert "flags" not in record and record["stop_enforced"] is False


def test_every_choice_of_n_is_cut_on_its_own():
    with served(["A<|im_end|>x", "B", "C\nUser: y"]) as server:
        result = openai_model(server).generate([{"role": "user", "content": "hi"}], n=3,
                                               stop=DOCTOR_STOPS)
    assert result.texts == ["A", "B", "C"]
    assert [c.stop_enforced for c in result.choices] == [True, False, True]
