"""Passkey retrieval (posenc.passkey_key, posenc.passkey_prompt,
posenc.DecoderModel.score_passkey).

* The prompt text against a transcription of the landmark-attention prompt
  as the YaRN repository's eval/passkey.py builds it (generate_prompt, from
  epfml/landmark-attention llama/run_test.py), written here from it: the
  task description, ``garbage_inf = " ".join([garbage] * N)``, a prefix of
  ``int(n_garbage * depth)`` characters and a suffix of the rest, the
  information line, the final question, joined by ``"\\n"``. posenc's
  prompt tokens are decoded, n_garbage is read off the decoded length, and
  the text must equal the transcription at depths 0, 0.3 and 1, with the
  tiny test tokenizer (random_llama_gguf.py) and SmolLM2's when it is there.
  The prompt is the longest that fits: one more filler character would not.
* The keys: five digits from SplitMix64 (Steele, Lea & Flood 2014), pinned
  by a transcription, so they are the same on every machine.
* A trial on the tiny model against the model's own full forward passes:
  the answer's NLL and argmax by teacher forcing from posenc.DecoderModel.logits
  over prompt + answer, and the generated text from an argmax loop.
  (SmolLM2 against Hugging Face: test_model_hf.py.)
"""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

import posenc
from random_llama_gguf import VOCAB, write_random_llama

ROOT = pathlib.Path(__file__).resolve().parents[2]
SMOLLM = ROOT / "build" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"

# ---- the YaRN repository's prompt ----------------------------------------------------------

TASK_DESCRIPTION = ("There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. "
                    "I will quiz you about the important information there.")
GARBAGE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
FINAL_QUESTION = "What is the pass key? The pass key is"


def generate_prompt_landmark(n_garbage: int, n_garbage_prefix: int, pass_key: str) -> str:
    n_garbage_suffix = n_garbage - n_garbage_prefix
    garbage_inf = " ".join([GARBAGE] * (n_garbage // len(GARBAGE) + 2))
    assert len(garbage_inf) >= n_garbage
    garbage_prefix = garbage_inf[:n_garbage_prefix]
    garbage_suffix = garbage_inf[:n_garbage_suffix]
    information_line = f"The pass key is {pass_key}. Remember it. {pass_key} is the pass key."
    lines = [TASK_DESCRIPTION, garbage_prefix, information_line, garbage_suffix, FINAL_QUESTION]
    return "\n".join(lines)


def fixed_characters(key: str) -> int:
    """The prompt's characters without filler: the three lines and four newlines."""
    return len(generate_prompt_landmark(0, 0, key))


# ---- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("passkey") / "random-llama.gguf"
    write_random_llama(path, tied=True, dtype="f32", seed=5)
    return path


@pytest.fixture(scope="module")
def tiny_tokenizer(tiny_path) -> posenc.BpeTokenizer:
    return posenc.BpeTokenizer.from_gguf(tiny_path)


@pytest.fixture(scope="module")
def random_model(tiny_path) -> posenc.DecoderModel:
    return posenc.DecoderModel(tiny_path)


@pytest.fixture(scope="module", params=["tiny", "smollm2"])
def tokenizer(request, tiny_tokenizer) -> posenc.BpeTokenizer:
    if request.param == "tiny":
        return tiny_tokenizer
    if not SMOLLM.is_file():
        pytest.skip(f"{SMOLLM} is missing (scripts/fetch-model; test_model_hf.py fetches it)")
    return posenc.BpeTokenizer.from_gguf(SMOLLM)


# ---- keys ------------------------------------------------------------------------------------


def splitmix64(x: int) -> int:
    mask = 2**64 - 1
    x = (x + 0x9E3779B97F4A7C15) & mask
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & mask
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & mask
    return x ^ (x >> 31)


def test_keys():
    for seed in (0, 1, 12345, 2**64 - 1):
        keys = [posenc.passkey_key(seed, trial) for trial in range(20)]
        for trial, key in enumerate(keys):
            assert re.fullmatch(r"[1-9][0-9]{4}", key)
            assert key == str(10000 + splitmix64(seed ^ splitmix64(trial)) % 90000)
            assert posenc.passkey_key(np.uint64(seed), np.int64(trial)) == key
        assert len(set(keys)) >= 19
    assert posenc.passkey_key(0, 0) == "27055"


def test_key_errors():
    with pytest.raises(ValueError, match=r"^\[passkey\] trial = -1: must be >= 0$"):
        posenc.passkey_key(0, -1)
    with pytest.raises(ValueError, match=r"^\[passkey\] seed = -1: must be in \[0, 2\^64 - 1\]"):
        posenc.passkey_key(-1, 0)
    with pytest.raises(ValueError, match=r"^\[passkey\] seed = 18446744073709551616: must be in"):
        posenc.passkey_key(2**64, 0)


# ---- the prompt against the YaRN repository's --------------------------------------------------


@pytest.mark.parametrize("depth", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("length,reserve", [(230, 12), (500, 0), (1200, 30)])
def test_prompt_is_the_landmark_prompt(tokenizer, depth, length, reserve):
    key = posenc.passkey_key(7, int(depth * 10) + length)
    p = posenc.passkey_prompt(tokenizer, length, depth, key, reserve)
    assert isinstance(p, posenc.PasskeyPrompt)
    assert (p.key, p.depth) == (key, depth)
    text = tokenizer.decode(p.prompt)
    n_garbage = len(text) - fixed_characters(key)
    assert n_garbage > 0
    expected = generate_prompt_landmark(n_garbage, int(n_garbage * depth), key)
    assert text == expected
    # The tokens are the text's (no BOS), and the longest such prompt within the budget.
    assert p.prompt == tokenizer.encode(expected)
    assert len(p.prompt) + reserve <= length
    longer = generate_prompt_landmark(n_garbage + 1, int((n_garbage + 1) * depth), key)
    assert len(tokenizer.encode(longer)) + reserve > length
    # The key line starts in the token at key_position.
    assert p.key_position == key_line_start(tokenizer, p.prompt, expected)
    assert tokenizer.decode(p.prompt[p.key_position:]).lstrip("\n").startswith(
        f"The pass key is {key}. Remember it.")
    # The answer: " K" as it follows the prompt.
    assert tokenizer.decode(p.answer) == " " + key
    assert tokenizer.encode(expected + " " + key)[:len(p.prompt) + len(p.answer)] == p.prompt + p.answer
    print(f"\n{length} tokens, depth {depth}: n_garbage {n_garbage}, prompt {len(p.prompt)} tokens, "
          f"key at token {p.key_position}")


def key_line_start(tokenizer, prompt, text: str) -> int:
    """The index of the prompt's first token of the key line: the first
    token that ends past the characters before it."""
    before = len(text[:text.index("The pass key is")])
    return next(i for i in range(len(prompt)) if len(tokenizer.decode(prompt[:i + 1])) > before)


@pytest.mark.parametrize("name", ["tiny", "smollm2"])
def test_key_position_is_exact(request, name):
    if name == "smollm2" and not SMOLLM.is_file():
        pytest.skip(f"{SMOLLM} is missing")
    tokenizer = request.getfixturevalue("tiny_tokenizer") if name == "tiny" else posenc.BpeTokenizer.from_gguf(SMOLLM)
    wrong = []
    for length in (230, 600):
        for depth in np.linspace(0, 1, 21):
            p = posenc.passkey_prompt(tokenizer, length, float(depth), "12345")
            start = key_line_start(tokenizer, p.prompt, tokenizer.decode(p.prompt))
            if p.key_position != start:
                wrong.append((length, round(float(depth), 2), p.key_position, start))
    assert not wrong, f"key_position != the key line's first token (length, depth, key_position, first token): {wrong}"


def test_prompt_depth_moves_the_key(tiny_tokenizer):
    key = posenc.passkey_key(0, 3)
    positions = [posenc.passkey_prompt(tiny_tokenizer, 600, d, key).key_position for d in (0, 0.25, 0.5, 0.75, 1)]
    assert positions == sorted(positions) and len(set(positions)) == 5
    first = posenc.passkey_prompt(tiny_tokenizer, 600, 0, key)
    assert tiny_tokenizer.decode(first.prompt[:first.key_position]) == TASK_DESCRIPTION + "\n\n"


def test_prompt_object(tiny_tokenizer):
    p = posenc.passkey_prompt(tiny_tokenizer, 200, 0.5, "12345", reserve=8)
    assert repr(p) == (f"PasskeyPrompt(key='12345', prompt=<{len(p.prompt)} tokens>, answer={p.answer}, "
                       f"key_position={p.key_position}, depth=0.5)")
    assert type(p).__module__ == "posenc.passkey" and posenc.passkey.PasskeyPrompt is posenc.PasskeyPrompt
    assert all(isinstance(t, int) for t in p.prompt + p.answer)
    with pytest.raises(AttributeError):
        p.key = "54321"
    assert posenc.passkey_prompt(tiny_tokenizer, 200, 0.5, "12345").prompt == \
        posenc.passkey_prompt(tiny_tokenizer, 200, 0.5, "12345", 12).prompt     # reserve defaults to 12


def test_prompt_errors(tiny_tokenizer):
    def raises(message):
        return pytest.raises(ValueError, match="^" + re.escape(message))

    with raises("[passkey] depth = 1.5: must be in [0, 1] (the share of the filler before the key)"):
        posenc.passkey_prompt(tiny_tokenizer, 200, 1.5, "12345")
    with raises("[passkey] depth = nan: must be in [0, 1]"):
        posenc.passkey_prompt(tiny_tokenizer, 200, float("nan"), "12345")
    with raises("[passkey] depth = '0.5': must be a number"):
        posenc.passkey_prompt(tiny_tokenizer, 200, "0.5", "12345")
    with raises('[passkey] key = "1234": must be five digits'):
        posenc.passkey_prompt(tiny_tokenizer, 200, 0.5, "1234")
    with raises("[passkey] key = 12345: must be a str of five digits"):
        posenc.passkey_prompt(tiny_tokenizer, 200, 0.5, 12345)
    with raises("[passkey] length = 10: must be at least the prompt's fixed parts ("):
        posenc.passkey_prompt(tiny_tokenizer, 10, 0.5, "12345")
    with raises("[passkey] reserve = -1: must be >= 0"):
        posenc.passkey_prompt(tiny_tokenizer, 200, 0.5, "12345", -1)
    with raises("[passkey] tokenizer = str: must be a posenc.BpeTokenizer"):
        posenc.passkey_prompt("tok", 200, 0.5, "12345")
    with raises("[passkey] length = 2.5: must be an integer"):
        posenc.passkey_prompt(tiny_tokenizer, 2.5, 0.5, "12345")


# ---- a trial on the tiny model -------------------------------------------------------------------


def log_softmax64(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


@pytest.mark.parametrize("method", ["none", "yarn", "self-extend", "lambda"])
def test_score_matches_full_forward_passes(random_model, tiny_tokenizer, method):
    """Past the training length (64): the trial's numbers from the model's own
    full forward passes, with the method planned for the same length."""
    max_new = 6
    p = posenc.passkey_prompt(tiny_tokenizer, 220, 0.4, posenc.passkey_key(1, 2), reserve=max_new)
    target = len(p.prompt) + max(len(p.answer), max_new)
    score = random_model.score_passkey(tiny_tokenizer, p, method=method, max_new_tokens=max_new)
    assert set(score) == {"generated_has_key", "answer_exact", "answer_nll", "generated", "seconds",
                          "prompt_tokens", "method"}
    assert score["prompt_tokens"] == len(p.prompt) and score["seconds"] > 0
    assert score["method"] == random_model.resolve_method(method, target)

    # Teacher forcing: logits of prompt + answer[:-1], rows predicting the answer.
    full = random_model.logits(p.prompt + p.answer[:-1], method=method, target_length=target)
    rows = full[len(p.prompt) - 1:]
    nll = -log_softmax64(rows)[np.arange(len(p.answer)), p.answer]
    assert score["answer_nll"] == pytest.approx(float(nll.mean()), rel=1e-5, abs=1e-6)
    assert score["answer_exact"] == bool((rows.argmax(-1) == p.answer).all())

    # Greedy generation from the prompt, stopping at end of text.
    ids = list(p.prompt)
    generated = []
    for _ in range(max_new):
        token = int(random_model.logits(ids, method=method, target_length=target)[-1].argmax())
        generated.append(token)
        ids.append(token)
        if token == tiny_tokenizer.eos_id:
            break
    assert score["generated"] == tiny_tokenizer.decode(generated)
    assert score["generated_has_key"] == (p.key in score["generated"])


def test_score_target_length_and_errors(random_model, tiny_tokenizer):
    p = posenc.passkey_prompt(tiny_tokenizer, 200, 0.5, "12345", reserve=6)
    a = random_model.score_passkey(tiny_tokenizer, p, method="yarn", max_new_tokens=6, target_length=320)
    assert a["method"] == "yarn:factor=5"            # 320 / 64
    b = random_model.score_passkey(tiny_tokenizer, p, method="yarn", max_new_tokens=6)
    assert b["method"] == random_model.resolve_method("yarn", len(p.prompt) + 6)
    with pytest.raises(ValueError, match=r"^\[passkey\] max_new_tokens = 0: must be >= 1$"):
        random_model.score_passkey(tiny_tokenizer, p, max_new_tokens=0)
    with pytest.raises(ValueError, match=r"^\[passkey\] target_length = 0: must be >= 1"):
        random_model.score_passkey(tiny_tokenizer, p, target_length=0)
    with pytest.raises(ValueError, match=r"^\[passkey\] max_new_tokens = 9223372036854775807: must be at most"):
        random_model.score_passkey(tiny_tokenizer, p, max_new_tokens=2**63 - 1)
    with pytest.raises(ValueError, match=r"^\[passkey\] prompt = list: must be a posenc.PasskeyPrompt"):
        random_model.score_passkey(tiny_tokenizer, p.prompt)
    with pytest.raises(ValueError, match=r"^\[passkey\] tokenizer = NoneType: must be a posenc.BpeTokenizer"):
        random_model.score_passkey(None, p)
    with pytest.raises(ValueError, match=r"^\[context extension\] method = \"nope\""):
        random_model.score_passkey(tiny_tokenizer, p, method="nope")
    with pytest.raises(TypeError):
        random_model.score_passkey(tiny_tokenizer, p, "none")      # method is keyword-only
    # A prompt from another tokenizer with ids beyond this model's vocabulary.
    if SMOLLM.is_file():
        big = posenc.passkey_prompt(posenc.BpeTokenizer.from_gguf(SMOLLM), 200, 0.5, "12345")
        if max(big.prompt) >= VOCAB:
            with pytest.raises(ValueError, match=r"token"):
                random_model.score_passkey(tiny_tokenizer, big)
