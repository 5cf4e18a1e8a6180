"""Reply decoding with the reasoning tags kept (clinenv.llm.decoding), on the tiny ChatML
tokenizer, which marks <think> and </think> special as some released tokenizers do."""

from __future__ import annotations

import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("transformers")

from clinenv.llm.decoding import decode_reply  # noqa: E402
from clinenv.protocol.parser import split_reasoning  # noqa: E402
from clinenv.testing.tiny_models import CHATML_TEMPLATE, chatml_tokenizer  # noqa: E402

REPLY = "<think>fever and cough: check the chest</think>\nREQUEST TEST: T4"


@pytest.fixture(scope="module")
def tok():
    return chatml_tokenizer([REPLY, "What brings you here today?"], vocab_size=300,
                            chat_template=CHATML_TEMPLATE)


def test_tags_marked_special_are_kept_and_the_end_of_turn_dropped(tok):
    ids = tok.encode(REPLY, add_special_tokens=False) + [tok.eos_token_id]
    plain = tok.decode(ids, skip_special_tokens=True)
    assert plain == "fever and cough: check the chest\nREQUEST TEST: T4"  # tags lost
    assert decode_reply(tok, ids) == REPLY
    assert split_reasoning(decode_reply(tok, ids)) == (
        "REQUEST TEST: T4", "fever and cough: check the chest")


def test_without_tags_it_is_the_plain_decode(tok):
    ids = tok.encode("What brings you here today?", add_special_tokens=False)
    assert decode_reply(tok, ids + [tok.eos_token_id]) == "What brings you here today?"
    assert decode_reply(tok, []) == ""


def test_an_unterminated_think_stays_reasoning(tok):
    ids = tok.encode("<think>fever and cough", add_special_tokens=False)
    assert decode_reply(tok, ids) == "<think>fever and cough"
    assert split_reasoning(decode_reply(tok, ids))[0] == ""


def test_metaspace_spacing_is_the_tokenizers_own():
    """A SentencePiece-style (Metaspace) tokenizer with the tags special: decode_reply
    equals the full decode with special tokens kept, spaces included (decoding the pieces
    apart would drop the space after each tag)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    text = "<think> fever and cough</think> REQUEST TEST: T4"
    raw = Tokenizer(models.BPE(unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Metaspace()
    raw.decoder = decoders.Metaspace()
    raw.train_from_iterator([text, "What brings you here today?"] * 5, trainers.BpeTrainer(
        vocab_size=200, special_tokens=["<unk>", "</s>", "<think>", "</think>"]))
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="<unk>", eos_token="</s>",
                                  additional_special_tokens=["<think>", "</think>"])
    ids = tok.encode(text, add_special_tokens=False) + [tok.eos_token_id]
    assert decode_reply(tok, ids) == "<think> fever and cough</think> REQUEST TEST: T4"
    assert tok.decode(ids, skip_special_tokens=True) == "fever and cough REQUEST TEST: T4"
