"""GGUF strings whose bytes are not valid UTF-8.

GGUF strings are bytes; llama.cpp does not check their encoding. posenc.GgufFile
returns a metadata value (or array item) that is not UTF-8 as ``bytes``, exactly
as stored, and rejects a key or tensor name that is not UTF-8 with a ValueError
naming the file, the key and where the first bad byte is. An error message that
quotes such bytes from the file is a ValueError too, with them as ``\\xNN``.

Files are written with gguf-py and then patched: a placeholder string of the
same length is replaced by the bad bytes.
"""

from __future__ import annotations

import re

import gguf
import numpy as np
import pytest

import posenc


def write_patched(path, build, patches):
    """Writes a GGUF with gguf-py (``build(writer)`` adds keys and tensors),
    then replaces each placeholder (bytes) by bytes of the same length."""
    writer = gguf.GGUFWriter(str(path), "llama")
    build(writer)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    data = path.read_bytes()
    for placeholder, replacement in patches.items():
        assert len(placeholder) == len(replacement) and data.count(placeholder) == 1
        data = data.replace(placeholder, replacement)
    path.write_bytes(data)
    return path


def test_string_values_not_utf8_are_bytes(tmp_path):
    def build(w):
        w.add_string("general.name", "abXcd")
        w.add_string("test.cut", "euroYY")           # a 3-byte character cut after 2 bytes
        w.add_string("test.fine", "RoPE θ")
        w.add_array("test.list", ["ok", "bZd", "θ"])
        w.add_tensor("w", np.arange(4, dtype=np.float32))

    path = write_patched(tmp_path / "values.gguf", build,
                         {b"abXcd": b"ab\xffcd", b"euroYY": b"euro\xe2\x82", b"bZd": b"b\xe9d"})
    f = posenc.GgufFile(path)
    assert f.metadata["general.name"] == b"ab\xffcd"
    assert f.metadata["test.cut"] == b"euro\xe2\x82"
    assert f.metadata["test.fine"] == "RoPE θ"
    assert f.metadata["test.list"] == ["ok", b"b\xe9d", "θ"]
    assert f.metadata["general.architecture"] == "llama"
    np.testing.assert_array_equal(f.dequantize("w"), np.arange(4, dtype=np.float32))
    # gguf-py's reader sees the same bytes.
    raw = gguf.GGUFReader(path).fields["general.name"]
    assert bytes(raw.parts[raw.data[0]]) == b"ab\xffcd"


def test_key_not_utf8_is_an_error(tmp_path):
    def build(w):
        w.add_string("test.kXy", "value")
        w.add_tensor("w", np.zeros(4, dtype=np.float32))

    path = write_patched(tmp_path / "key.gguf", build, {b"test.kXy": b"test.k\xffy"})
    expected = f'{path}: [gguf] metadata key = "test.k\\xffy": is not valid UTF-8 (invalid byte at offset 6)'
    with pytest.raises(ValueError, match="^" + re.escape(expected) + "$"):
        posenc.GgufFile(path)


def test_tensor_name_not_utf8_is_an_error(tmp_path):
    def build(w):
        w.add_tensor("blk.Q.w", np.zeros(4, dtype=np.float32))

    path = write_patched(tmp_path / "tensor.gguf", build, {b"blk.Q.w": b"blk.\xc3.w"})
    expected = f'{path}: [gguf] tensor name = "blk.\\xc3.w": is not valid UTF-8 (invalid byte at offset 4)'
    with pytest.raises(ValueError, match="^" + re.escape(expected) + "$"):
        posenc.GgufFile(path)


def test_library_error_quoting_bytes_that_are_not_utf8(tmp_path):
    # The reader's own error for this key quotes it: still a ValueError.
    def build(w):
        w.add_uint64("test.bXg", 2**64 - 1)

    path = write_patched(tmp_path / "big.gguf", build, {b"test.bXg": b"test.b\xffg"})
    with pytest.raises(ValueError, match=r"test\.b\\xffg = 18446744073709551615: does not fit a signed 64-bit integer"):
        posenc.GgufFile(path)
