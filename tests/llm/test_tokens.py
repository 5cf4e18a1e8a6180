"""Token-level trajectories: ``clinenv run --log-tokens`` and
``clinenv export --format tokens``.

The fake server returns vLLM's ``token_ids`` / ``prompt_token_ids`` / ``logprobs``
fields when asked; a tiny ChatML tokenizer (trained in process) makes them real ids, so
the doctor's masked tokens can be decoded back to its replies.
"""
# issue 35 §2

from __future__ import annotations

import json
from pathlib import Path

import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.cli import main
from clinenv.export_tokens import NotPrefixError, call_token_rows
from clinenv.llm.openai_backend import OpenAIChatModel
from clinenv.llm.tokens import compact_prompt_ids, expand_prompt_ids
from clinenv.testing.clinic import clinic_responder
from clinenv.testing.fake_server import FakeChatServer, fake_logprob

CORPUS = ["The patient has a cough and fever.", "Order a chest X-ray.",
          "What brings you in today?", "Diagnosis: pneumonia"] * 10
REPLIES = ["What brings you in today?", "Order a chest X-ray.", "Diagnosis: pneumonia"]


@pytest.fixture(scope="module")
def tok():
    pytest.importorskip("transformers")
    from clinenv.testing.tiny_models import CHATML_TEMPLATE, chatml_tokenizer

    return chatml_tokenizer(CORPUS, vocab_size=300, chat_template=CHATML_TEMPLATE)


def _scripted(body, index):
    turns = sum(m["role"] == "assistant" for m in body["messages"])
    return REPLIES[turns]


def _play(model):
    """Three doctor calls; the history keeps the replies verbatim."""
    messages = [{"role": "system", "content": "You are a doctor."},
                {"role": "user", "content": "The patient has a cough and fever."}]
    records = []
    for turn in range(3):
        result = model.generate(messages)
        records.append(result.to_log(agent="doctor", turn=turn))
        messages += [{"role": "assistant", "content": result.text},
                     {"role": "user", "content": "The patient has a cough and fever."}]
    return records


def test_fake_server_sends_token_fields_only_when_asked():
    with FakeChatServer("ok") as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, api_key="x")
        plain = model.generate([{"role": "user", "content": "hi"}])
        model.log_tokens = True
        tokens = model.generate([{"role": "user", "content": "hi"}])
    assert "logprobs" not in server.requests[0] and "return_token_ids" not in server.requests[0]
    assert server.requests[1]["logprobs"] is True
    assert server.requests[1]["return_token_ids"] is True
    record = plain.to_log()
    assert not {"completion_ids", "logprobs", "prompt_ids"} & set(record)
    # byte ids without a tokenizer: "<|user|>hi\n<|assistant|>" and "OK\n"
    assert tokens.prompt_ids == tuple(b"<|user|>hi\n<|assistant|>")
    assert tokens.choices[0].token_ids == (79, 75, 10)
    assert tokens.choices[0].logprobs == (-0.125, -0.25, -0.375)
    record = tokens.to_log()
    assert record["completion_ids"] == [[79, 75, 10]]
    assert record["logprobs"] == [[-0.125, -0.25, -0.375]]
    assert record["prompt_ids"] == list(b"<|user|>hi\n<|assistant|>")


def test_compact_prompt_ids_round_trip_pinned():
    calls = [{"agent": "doctor", "prompt_ids": [1, 2], "completion_ids": [[3]]},
             {"agent": "patient", "prompt_ids": [9], "completion_ids": [[8]]},
             {"agent": "doctor", "prompt_ids": [1, 2, 3, 4], "completion_ids": [[5]]},
             {"agent": "doctor", "prompt_ids": [1, 7], "completion_ids": [[6]]}]
    compact = compact_prompt_ids(calls)
    assert [(c["prompt_ids_shared"], c["prompt_ids_new"]) for c in compact] == [
        (0, [1, 2]), (0, [9]), (3, [4]), (1, [7])]
    assert all("prompt_ids" not in c for c in compact)
    assert expand_prompt_ids(compact) == [[1, 2], [9], [1, 2, 3, 4], [1, 7]]
    with pytest.raises(ValueError, match=r"calls\[0\]"):
        expand_prompt_ids([{"prompt_ids_shared": 2, "prompt_ids_new": []}])


def test_masked_tokens_decode_to_exactly_the_doctors_turns(tok):
    with FakeChatServer(_scripted, tokenizer=tok) as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, api_key="x")
        model.log_tokens = True
        records = compact_prompt_ids(_play(model))
    # the log stores each prompt's new suffix only
    assert records[1]["prompt_ids_shared"] > 0
    [row] = call_token_rows(records)
    ids, mask, logprobs = row["input_ids"], row["assistant_mask"], row["logprobs"]
    assert len(ids) == len(mask) == len(logprobs)
    # the whole sequence is the last prompt rendered by the template, plus the reply
    last = [{"role": "system", "content": "You are a doctor."}]
    for reply in REPLIES[:2]:
        last += [{"role": "user", "content": "The patient has a cough and fever."},
                 {"role": "assistant", "content": reply}]
    last.append({"role": "user", "content": "The patient has a cough and fever."})
    text = tok.apply_chat_template(last, add_generation_prompt=True, tokenize=False)
    assert ids == tok.encode(text + REPLIES[2] + "<|im_end|>", add_special_tokens=False)
    # runs of mask 1 are the doctor's turns, exactly
    runs, current = [], []
    for token, bit in zip(ids, mask, strict=True):
        if bit:
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    runs.append(current)
    assert [tok.decode(r, skip_special_tokens=True) for r in runs] == REPLIES
    assert all(r[-1] == tok.convert_tokens_to_ids("<|im_end|>") for r in runs)
    expected = [fake_logprob(k) for r in runs for k in range(len(r))]
    assert [v for v in logprobs if v is not None] == expected
    assert [v is None for v in logprobs] == [not b for b in mask]


def test_a_non_prefix_history_is_refused_and_per_turn_still_works(tok):
    with FakeChatServer(_scripted, tokenizer=tok) as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, api_key="x")
        model.log_tokens = True
        records = []
        for turn in range(2):  # a stateless doctor: each prompt is a fresh view
            messages = [{"role": "system", "content": "You are a doctor."},
                        {"role": "user", "content": f"View {turn}: cough and fever."}]
            records.append(model.generate(messages).to_log(agent="doctor"))
    records = compact_prompt_ids(records)
    with pytest.raises(NotPrefixError, match="doctor call 1"):
        call_token_rows(records)
    rows = call_token_rows(records, per_turn=True)
    assert [r["turn_index"] for r in rows] == [0, 1]
    for row in rows:  # no assistant turn in either history: the first reply twice
        kept = [t for t, b in zip(row["input_ids"], row["assistant_mask"], strict=True) if b]
        assert tok.decode(kept, skip_special_tokens=True) == REPLIES[0]


def test_hf_backend_logprobs_match_an_independent_forward_pass(tok):
    torch = pytest.importorskip("torch")
    from clinenv.llm.hf_backend import TransformersChatModel
    from clinenv.testing.tiny_models import tiny_qwen3

    net = tiny_qwen3(tok)
    model = TransformersChatModel("tiny", tokenizer=tok, model_obj=net)
    messages = [{"role": "user", "content": "cough and fever"}]
    assert model.generate(messages, max_tokens=4).prompt_ids is None
    model.log_tokens = True
    result = model.generate(messages, max_tokens=4)
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert list(result.prompt_ids) == tok.encode(text, add_special_tokens=False)
    choice = result.choices[0]
    assert len(choice.token_ids) == len(choice.logprobs) == result.completion_tokens
    ids = torch.tensor([[*result.prompt_ids, *choice.token_ids]])
    with torch.no_grad():
        table = net(ids).logits.float().log_softmax(-1)[0]
    start = len(result.prompt_ids) - 1
    expected = [table[start + k, t].item() for k, t in enumerate(choice.token_ids)]
    assert choice.logprobs == pytest.approx(expected, abs=1e-5)


def test_vllm_conversion_reads_ids_and_sampled_logprobs():
    from types import SimpleNamespace as NS

    from clinenv.llm.base import GenerationConfig
    from clinenv.llm.vllm_backend import sampling_kwargs, to_chat_result

    assert sampling_kwargs(GenerationConfig(), tokens=True)["logprobs"] == 0
    assert "logprobs" not in sampling_kwargs(GenerationConfig())
    out = NS(prompt_token_ids=[5, 6], outputs=[NS(
        text="ab", finish_reason="stop", token_ids=[7, 8],
        logprobs=[{7: NS(logprob=-0.5), 3: NS(logprob=-1.0)}, {8: NS(logprob=-0.25)}])])
    result = to_chat_result(out, GenerationConfig(), model="m", tokens=True)
    assert result.prompt_ids == (5, 6)
    assert result.choices[0].token_ids == (7, 8)
    assert result.choices[0].logprobs == (-0.5, -0.25)
    plain = to_chat_result(out, GenerationConfig(), model="m")
    assert plain.prompt_ids is None and plain.choices[0].token_ids is None


def _run(server, out, *extra):
    return main(["run", "--env", "EGIP-Demo-v0", "--doctor", "llm", "--patient", "llm",
                 "--base-url", server.base_url, "--model", "fake", "--episodes", "2",
                 "--quiet", "--out", out, *extra])


def test_cli_log_tokens_and_export(workdir, capsys):
    with FakeChatServer(clinic_responder()) as server:
        assert _run(server, "plain.jsonl") == 0
        assert _run(server, "tokens.jsonl", "--log-tokens") == 0
    plain = [json.loads(x) for x in Path("plain.jsonl").read_text().splitlines()]
    lines = [json.loads(x) for x in Path("tokens.jsonl").read_text().splitlines()]
    for line in plain:
        for call in line["llm"]["calls"]:
            assert not {"completion_ids", "logprobs", "prompt_ids_new"} & set(call)
    for line in lines:
        for call in line["llm"]["calls"]:
            assert "prompt_ids" not in call  # compacted
            assert {"completion_ids", "logprobs", "prompt_ids_shared",
                    "prompt_ids_new"} <= set(call)
    # EGIP's Direct decision call has its own system prompt: not a prefix chain
    capsys.readouterr()
    assert main(["export", "tokens.jsonl", "--format", "tokens", "--out", "ep.jsonl"]) == 0
    text = capsys.readouterr().out
    assert "exported 0 episode(s)" in text and "refused 2 episode(s)" in text
    assert main(["export", "tokens.jsonl", "--format", "tokens", "--per-turn",
                 "--out", "turns.jsonl"]) == 0
    rows = [json.loads(x) for x in Path("turns.jsonl").read_text().splitlines()]
    doctor = [c for line in lines for c in line["llm"]["calls"] if c["agent"] == "doctor"]
    assert len(rows) == len(doctor)
    for row, call in zip(rows, doctor, strict=True):
        kept = bytes(t for t, b in zip(row["input_ids"], row["assistant_mask"],
                                       strict=True) if b)
        assert kept == bytes(call["completion_ids"][0]) and kept.endswith(b"\n")
        assert row["reward_components"] and isinstance(row["reward"], float)
    # without --log-tokens the export says how to get token ids
    assert main(["export", "plain.jsonl", "--format", "tokens", "--out", "x.jsonl"]) != 0
    assert "--log-tokens" in capsys.readouterr().err
    assert main(["export", "tokens.jsonl", "--format", "tokens", "--delta",
                 "--out", "x.jsonl"]) != 0
