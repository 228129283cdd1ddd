"""posenc.GgufFile against gguf-py (the `gguf` package of llama.cpp, pinned
in python/requirements.txt) as writer and oracle.

Files are written with gguf.GGUFWriter: metadata of every GGUF value type
(scalars at their extremes, strings, arrays of every item type) and tensors
of F32/F16/BF16 (special values included), Q4_0/Q4_1/Q5_0/Q5_1/Q8_0
(quantized by gguf.quants.quantize) and Q2_K/Q3_K/Q4_K/Q5_K/Q6_K (random block
bytes with finite f16 scales: gguf-py cannot quantize K types). The oracles:

* metadata: gguf.GGUFReader's fields (ReaderField.contents()), value by value;
* tensors: gguf.quants.dequantize on the same bytes, compared bit for bit
  (posenc decodes blocks exactly as ggml does, in float32), and the shape:
  posenc reports the ggml order like GGUFReader and dequantizes to the
  reversed (NumPy) order like gguf-py.
"""

from __future__ import annotations

import math
import re
import struct

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V
from gguf import quants

import posenc

# key -> (value type, value, item type for arrays)
METADATA = {
    "test.u8": (V.UINT8, 255, None),
    "test.i8": (V.INT8, -128, None),
    "test.u16": (V.UINT16, 65535, None),
    "test.i16": (V.INT16, -32768, None),
    "test.u32": (V.UINT32, 2**32 - 1, None),
    "test.i32": (V.INT32, -(2**31), None),
    "test.u64": (V.UINT64, 2**63 - 1, None),    # the largest uint64 posenc accepts (it reads int64)
    "test.i64": (V.INT64, -(2**63), None),
    "test.f32": (V.FLOAT32, 0.1, None),          # not representable: read back as float32(0.1)
    "test.f32_inf": (V.FLOAT32, -math.inf, None),
    "test.f32_tiny": (V.FLOAT32, 1e-45, None),   # a float32 subnormal
    "test.f64": (V.FLOAT64, 1 / 3, None),
    "test.true": (V.BOOL, True, None),
    "test.false": (V.BOOL, False, None),
    "test.string": (V.STRING, "RoPE θ = 10⁴ — ünïcode", None),
    "test.empty_string": (V.STRING, "", None),
    "test.arr_u8": (V.ARRAY, [0, 1, 255], V.UINT8),
    "test.arr_i8": (V.ARRAY, [-128, 0, 127], V.INT8),
    "test.arr_u16": (V.ARRAY, [0, 65535], V.UINT16),
    "test.arr_i16": (V.ARRAY, [-32768, 32767], V.INT16),
    "test.arr_u32": (V.ARRAY, [0, 2**32 - 1], V.UINT32),
    "test.arr_i32": (V.ARRAY, [-(2**31), 2**31 - 1], V.INT32),
    "test.arr_u64": (V.ARRAY, [0, 2**63 - 1], V.UINT64),
    "test.arr_i64": (V.ARRAY, [-(2**63), 2**63 - 1], V.INT64),
    "test.arr_f32": (V.ARRAY, [0.1, -2.5, 1e30], V.FLOAT32),
    "test.arr_f64": (V.ARRAY, [0.1, -2.5, 1e300], V.FLOAT64),
    "test.arr_bool": (V.ARRAY, [True, False, True], V.BOOL),
    "test.arr_string": (V.ARRAY, ["a", "", "llama.rope.freq_base"], V.STRING),
    "llama.rope.freq_base": (V.FLOAT32, 500000.0, None),
    "llama.context_length": (V.UINT32, 131072, None),
}

# The f16 scale fields of each quantized type's block: name (as ggml's) -> byte offset.
SCALES = {
    Q.Q4_0: {"d": 0}, Q.Q4_1: {"d": 0, "m": 2}, Q.Q5_0: {"d": 0}, Q.Q5_1: {"d": 0, "m": 2}, Q.Q8_0: {"d": 0},
    Q.Q2_K: {"d": 80, "dmin": 82}, Q.Q3_K: {"d": 108}, Q.Q4_K: {"d": 0, "dmin": 2}, Q.Q5_K: {"d": 0, "dmin": 2},
    Q.Q6_K: {"d": 208},
}
# The K types (QK_K = 256 values per block) are tested on random block bytes.
K_TYPES = (Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K)


def f16_special_values() -> np.ndarray:
    return np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 6.1e-5, 5.96e-8, -5.96e-8, 65504.0, -65504.0, 1.0, -2.0],
                    np.float32)


def tensors(rng: np.random.Generator) -> dict:
    """name -> (NumPy-order array as stored by GGUFWriter, ggml type)."""
    out = {}
    x = rng.standard_normal((3, 256)).astype(np.float32)
    special = np.concatenate([f16_special_values(), rng.standard_normal(256 - 12).astype(np.float32)])
    out["f32"] = (np.stack([special, x[0], x[1]]), Q.F32)
    out["f32_3d"] = (rng.standard_normal((2, 3, 64)).astype(np.float32), Q.F32)   # ggml shape (64, 3, 2)
    out["f16"] = (np.stack([special, x[0]]).astype(np.float16), Q.F16)
    out["bf16"] = (quants.quantize(np.stack([special, x[0] * 1e-30, x[1] * 1e30]), Q.BF16), Q.BF16)
    for qtype in (Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0):
        # Scaled rows and a zero row (a block with scale 0).
        data = np.concatenate([x * np.array([[1.0], [1e-3], [100.0]], np.float32), np.zeros((1, 256), np.float32)])
        out[qtype.name.lower()] = (quants.quantize(data, qtype), qtype)
    out["q8_0_4d"] = (quants.quantize(rng.standard_normal((2, 2, 3, 64)).astype(np.float32), Q.Q8_0), Q.Q8_0)
    for qtype in K_TYPES:
        out[qtype.name.lower()] = (random_blocks(rng, qtype, (4, 2)), qtype)   # 4 rows of 512 values
    return out


def random_blocks(rng: np.random.Generator, qtype, shape) -> np.ndarray:
    """Random bytes of an array of `shape` blocks, the blocks of the last
    dimension side by side in one row of bytes, with finite f16 scales."""
    block_bytes = gguf.GGML_QUANT_SIZES[qtype][1]
    blocks = rng.integers(0, 256, size=(*shape, block_bytes), dtype=np.uint8)
    for offset in SCALES[qtype].values():
        f16 = (rng.standard_normal(shape) * 0.05).astype(np.float16)
        blocks[..., offset:offset + 2] = f16.view(np.uint8).reshape(*shape, 2)
    return blocks.reshape(*shape[:-1], shape[-1] * block_bytes)


def write_gguf(path, rng, alignment=None) -> dict:
    writer = gguf.GGUFWriter(str(path), "llama")
    if alignment is not None:
        writer.add_custom_alignment(alignment)
    for key, (vtype, value, sub_type) in METADATA.items():
        writer.add_key_value(key, value, vtype, sub_type=sub_type)
    stored = tensors(rng)
    for name, (array, qtype) in stored.items():
        if qtype in (Q.F32, Q.F16):
            writer.add_tensor(name, array)
        else:
            writer.add_tensor(name, array, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return stored


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "all_types.gguf"
    stored = write_gguf(path, np.random.default_rng(7))
    return path, stored


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.ascontiguousarray(a, np.float32), np.ascontiguousarray(b, np.float32)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def reader_value(field):
    """The value of a GGUFReader field as plain Python."""
    value = field.contents()
    if isinstance(value, np.generic):
        value = value.item()
    return value


def test_header(written):
    path, stored = written
    f = posenc.GgufFile(path)
    r = gguf.GGUFReader(path)
    assert f.version == 3 == int(r.fields["GGUF.version"].parts[-1][0])
    assert f.alignment == 32
    assert [name for name, _, _ in f.tensors] == [t.name for t in r.tensors] == list(stored)


def test_metadata_every_type(written):
    path, _ = written
    f = posenc.GgufFile(path)
    r = gguf.GGUFReader(path)
    user_keys = [k for k in r.fields if not k.startswith("GGUF.")]
    assert sorted(f.metadata) == sorted(user_keys)
    assert list(f.metadata) == sorted(f.metadata)          # documented: sorted by key
    for key in user_keys:
        expected = reader_value(r.fields[key])
        actual = f.metadata[key]
        vtype = r.fields[key].types[0]
        item = r.fields[key].types[-1]
        if vtype == V.ARRAY:
            assert isinstance(actual, list) and len(actual) == len(expected), key
            for a, e in zip(actual, expected):
                check_scalar(key, item, a, e)
        else:
            check_scalar(key, vtype, actual, expected)
    # Values as written, where they are exact.
    assert f.metadata["test.u64"] == 2**63 - 1 and f.metadata["test.i64"] == -(2**63)
    assert f.metadata["test.f32"] == float(np.float32(0.1))
    assert f.metadata["test.f32_tiny"] == float(np.float32(1e-45)) > 0
    assert f.metadata["test.string"] == "RoPE θ = 10⁴ — ünïcode"
    assert f.metadata["test.empty_string"] == ""
    assert f.metadata["test.arr_string"] == ["a", "", "llama.rope.freq_base"]


def check_scalar(key, vtype, actual, expected):
    if vtype == V.BOOL:
        # Scalars are bool; array items read as ints 0/1 (documented).
        assert actual == int(expected) and isinstance(actual, (bool, int)), key
    elif vtype in (V.FLOAT32, V.FLOAT64):
        assert isinstance(actual, float) and (actual == expected or (math.isnan(actual) and math.isnan(expected))), key
    elif vtype == V.STRING:
        assert isinstance(actual, str) and actual == expected, key
    else:
        assert isinstance(actual, int) and not isinstance(actual, bool) and actual == expected, key


@pytest.mark.parametrize("name", list(tensors(np.random.default_rng(7))))
def test_dequantize_bitwise(written, name):
    path, stored = written
    f = posenc.GgufFile(path)
    r = gguf.GGUFReader(path)
    (info,) = [t for t in r.tensors if t.name == name]
    array, qtype = stored[name]
    expected = quants.dequantize(np.asarray(info.data), info.tensor_type)
    actual = f.dequantize(name)
    assert actual.dtype == np.float32
    # Shape: ggml order in .tensors (as GGUFReader), reversed by dequantize (as gguf-py).
    (ggml_shape,) = [s for n, s, _ in f.tensors if n == name]
    (type_name,) = [t for n, _, t in f.tensors if n == name]
    assert ggml_shape == tuple(int(d) for d in info.shape)
    assert type_name == qtype.name == info.tensor_type.name
    assert actual.shape == tuple(reversed(ggml_shape)) == expected.shape
    assert same_bits(actual, expected), f"{name}: max |diff| {np.nanmax(np.abs(actual - expected))}"
    # And against the bytes we wrote (not only the reader's view of them).
    if qtype in (Q.F32, Q.F16):
        assert same_bits(actual, array.astype(np.float32))
    else:
        assert same_bits(actual, quants.dequantize(array, qtype).reshape(actual.shape))


def test_k_blocks_are_not_trivial(written):
    """The random K blocks give a spread of values (a decoder reading the
    wrong bytes would not match gguf-py by chance)."""
    path, _ = written
    f = posenc.GgufFile(path)
    for name in (qtype.name.lower() for qtype in K_TYPES):
        values = f.dequantize(name)
        assert np.isfinite(values).all() and len(np.unique(values)) > 100


def test_version_2_and_custom_alignment(tmp_path):
    """GGUF v2 has v3's layout: the same file with version 2 in its header
    reads the same. general.alignment = 64 moves the data section."""
    path = tmp_path / "aligned.gguf"
    stored = write_gguf(path, np.random.default_rng(8), alignment=64)
    data = bytearray(path.read_bytes())
    assert struct.unpack_from("<I", data, 4)[0] == 3
    struct.pack_into("<I", data, 4, 2)
    v2 = tmp_path / "v2.gguf"
    v2.write_bytes(bytes(data))
    f3, f2 = posenc.GgufFile(path), posenc.GgufFile(v2)
    assert (f3.version, f2.version) == (3, 2)
    assert f3.alignment == f2.alignment == 64 and f3.metadata["general.alignment"] == 64
    assert f2.metadata == f3.metadata and f2.tensors == f3.tensors
    r = gguf.GGUFReader(v2)
    for name in stored:
        (info,) = [t for t in r.tensors if t.name == name]
        assert same_bits(f2.dequantize(name), quants.dequantize(np.asarray(info.data), info.tensor_type))


def raises_verbatim(message: str):
    return pytest.raises(ValueError, match="^" + re.escape(message) + "$")


def write_raw_tensor(path, blocks: np.ndarray, qtype) -> None:
    """A GGUF file with one tensor "w" of raw `qtype` block bytes."""
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tensor("w", blocks, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.parametrize("qtype, field", [(qtype, field) for qtype in SCALES for field in SCALES[qtype]],
                         ids=lambda x: getattr(x, "name", x))
def test_non_finite_block_scale(tmp_path, qtype, field):
    """A block scale that is inf or NaN is an error naming the tensor, the
    type, the block and the field. gguf-py decodes that block, and only that
    one, to inf or NaN: the offsets in SCALES are the scales it reads."""
    blocks = random_blocks(np.random.default_rng(3), qtype, (1, 3))
    block_bytes = gguf.GGML_QUANT_SIZES[qtype][1]
    bad = np.float16(np.inf if field == "d" else np.nan)   # inf for d, NaN for the others: both kinds
    start = 2 * block_bytes + SCALES[qtype][field]   # in the third block
    blocks[0, start:start + 2] = np.array([bad]).view(np.uint8)
    with np.errstate(invalid="ignore"):   # inf * 0
        decoded = quants.dequantize(blocks, qtype).reshape(3, -1)
    assert np.isfinite(decoded[:2]).all() and not np.isfinite(decoded[2]).any()
    path = tmp_path / "bad_scale.gguf"
    write_raw_tensor(path, blocks, qtype)
    rule = ("a K-quant super-block scale must be finite" if qtype in K_TYPES
            else "a block's scale and min must be finite")
    with raises_verbatim(f"[gguf] w ({qtype.name}) block 2 {field} = {'inf' if field == 'd' else 'nan'}: {rule}"):
        posenc.GgufFile(path).dequantize("w")


def test_errors(written, tmp_path):
    path, _ = written
    f = posenc.GgufFile(path)
    with pytest.raises(ValueError, match=r'^\[gguf\] tensor = "nope": is not in the file$'):
        f.dequantize("nope")
    with pytest.raises(ValueError, match=r"cannot be opened"):
        posenc.GgufFile(tmp_path / "missing.gguf")
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ValueError, match=r"truncated\.gguf: .*extends past the end of the file"):
        posenc.GgufFile(truncated)
    # A type posenc knows but cannot dequantize (gguf-py cannot either): listed,
    # and a clear error on dequantize.
    q8k = tmp_path / "q8k.gguf"
    write_raw_tensor(q8k, np.random.default_rng(0).integers(0, 256, (2, 292), dtype=np.uint8), Q.Q8_K)
    f = posenc.GgufFile(q8k)
    assert f.tensors == [("w", (256, 2), "Q8_K")]
    with raises_verbatim('[gguf] w.type = "Q8_K": cannot be dequantized by posenc yet'):
        f.dequantize("w")
    # A type number posenc does not know: the file does not open.
    info = struct.pack("<Q", 1) + b"w" + struct.pack("<IQQ", 2, 256, 2)   # name, n_dims, shape; then the type
    data = q8k.read_bytes()
    assert data.count(info + struct.pack("<I", Q.Q8_K)) == 1
    unknown = tmp_path / "unknown.gguf"
    unknown.write_bytes(data.replace(info + struct.pack("<I", Q.Q8_K), info + struct.pack("<I", 99)))
    with pytest.raises(ValueError, match=r"unknown\.gguf: \[gguf\] tensor type = 99: unsupported ggml type"):
        posenc.GgufFile(unknown)
    # A uint64 above 2^63 - 1 does not fit the int64 posenc reads integers as.
    big = tmp_path / "big.gguf"
    writer = gguf.GGUFWriter(str(big), "llama")
    writer.add_uint64("test.big", 2**64 - 1)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    assert gguf.GGUFReader(big).fields["test.big"].contents() == 2**64 - 1
    with pytest.raises(ValueError, match=r"test\.big = 18446744073709551615: does not fit a signed 64-bit integer"):
        posenc.GgufFile(big)
