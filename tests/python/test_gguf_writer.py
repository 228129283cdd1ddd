"""posenc.write_gguf against gguf-py (llama.cpp's `gguf` package, pinned in
python/requirements.txt) as reader and as writer.

* gguf.GGUFReader reads what posenc writes: every key with the GGUF type its
  Python type maps to and its value (float32 values bit for bit), every
  tensor as F32 with its ggml shape, its data bit for bit in NumPy order, at
  an offset that is a multiple of the alignment;
* gguf.GGUFWriter, given the same metadata and tensors, writes the same
  bytes (the layout is gguf-py's);
* posenc.GgufFile reads it too; and bad arguments and unwritable targets
  are ValueErrors that leave nothing behind.

(The other direction, gguf-py writing and posenc reading, is
test_gguf_oracle.py.)
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

import posenc

F32_SPECIALS = np.array([-0.0, np.inf, -np.inf, np.finfo(np.float32).max, np.finfo(np.float32).tiny,
                         np.finfo(np.float32).smallest_subnormal], np.float32)
NAN_WITH_PAYLOAD = np.array([0x7FC12345], np.uint32).view(np.float32)[0]

# key -> (value given to write_gguf, GGUF type, item type for arrays, value gguf-py reads back)
METADATA = {
    "general.architecture": ("llama", V.STRING, None, "llama"),
    "general.name": ("", V.STRING, None, ""),
    "posenc.scheme": ("rope:yarn,factor=4 ▁é", V.STRING, None, "rope:yarn,factor=4 ▁é"),
    "posenc.trained": (True, V.BOOL, None, True),
    "posenc.frozen": (np.bool_(False), V.BOOL, None, False),
    "posenc.step": (-(2**63), V.INT64, None, -(2**63)),
    "posenc.tokens_seen": (2**63 - 1, V.INT64, None, 2**63 - 1),
    "llama.context_length": (np.uint32(2**32 - 1), V.UINT32, None, 2**32 - 1),
    "posenc.i32": (np.int32(-(2**31)), V.INT32, None, -(2**31)),
    "posenc.i64": (np.int64(-5), V.INT64, None, -5),
    "posenc.learning_rate": (3e-4, V.FLOAT32, None, float(np.float32(3e-4))),
    "llama.rope.freq_base": (np.float32(500000.0), V.FLOAT32, None, 500000.0),
    "posenc.nan": (NAN_WITH_PAYLOAD, V.FLOAT32, None, float(NAN_WITH_PAYLOAD)),
    "posenc.loss": (np.float64(0.1), V.FLOAT64, None, 0.1),
    "tokenizer.ggml.tokens": (["<s>", "", "héllo", "▁the", "\x00nul"], V.ARRAY, V.STRING,
                              ["<s>", "", "héllo", "▁the", "\x00nul"]),
    "posenc.lengths": ([512, -(2**63), 2**63 - 1], V.ARRAY, V.INT64, [512, -(2**63), 2**63 - 1]),
    "tokenizer.ggml.scores": ([0.1, -1.5, 1e-40, float("inf")], V.ARRAY, V.FLOAT32,
                              [float(x) for x in np.array([0.1, -1.5, 1e-40, np.inf], np.float32)]),
    "tokenizer.ggml.token_type": (np.array([1, 2, -3, 2**31 - 1], np.int32), V.ARRAY, V.INT32, [1, 2, -3, 2**31 - 1]),
    "posenc.i64s": (np.array([2**40, -1], np.int64), V.ARRAY, V.INT64, [2**40, -1]),
    "posenc.f32s": (np.concatenate([F32_SPECIALS, [NAN_WITH_PAYLOAD]]).astype(np.float32), V.ARRAY, V.FLOAT32,
                    [float(x) for x in np.concatenate([F32_SPECIALS, [NAN_WITH_PAYLOAD]]).astype(np.float32)]),
    "posenc.strs": (np.array(["a", "bc"]), V.ARRAY, V.STRING, ["a", "bc"]),
    "posenc.big_endian": (np.array([1, -2], ">i4"), V.ARRAY, V.INT32, [1, -2]),
    "posenc.no_ints": (np.zeros(0, np.int32), V.ARRAY, None, []),
}


def odd_tensors(rng: np.random.Generator) -> dict:
    """Float32 tensors of 1 to 4 dims in NumPy order, none a multiple of the
    alignment in bytes, special values included, one non-contiguous and one
    big-endian (both converted without rounding)."""
    tensors = {}
    for name, shape in [("token_embd.weight", (13, 7)), ("blk.0.attn_norm.weight", (7,)),
                        ("blk.0.ffn_up.weight", (5, 3, 7)), ("blk.0.one", (1,)), ("blk.0.ones", (1, 1, 1, 1)),
                        ("output.weight", (3, 2, 1, 9)), ("eight", (8,))]:
        array = rng.standard_normal(shape).astype(np.float32)
        flat = array.reshape(-1)
        flat[: min(flat.size, F32_SPECIALS.size)] = F32_SPECIALS[: flat.size]
        flat[-1] = NAN_WITH_PAYLOAD if flat.size > 1 else flat[-1]
        tensors[name] = array
    tensors["transposed"] = rng.standard_normal((6, 5)).astype(np.float32).T  # a strided view
    tensors["big_endian"] = rng.standard_normal((3, 4)).astype(">f4")
    return tensors


def bits(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array, dtype=np.float32).view(np.uint32)


@pytest.mark.parametrize("alignment", [32, 8, 64, 4096])
def test_gguf_py_reads_every_key_and_tensor(tmp_path, rng, alignment):
    path = tmp_path / "ckpt.gguf"
    tensors = odd_tensors(rng)
    posenc.write_gguf(path, {key: given for key, (given, *_) in METADATA.items()}, tensors, alignment=alignment)

    reader = gguf.GGUFReader(path)
    fields = {name: field for name, field in reader.fields.items() if not name.startswith("GGUF.")}
    expected_keys = list(METADATA) if alignment == 32 else ["general.alignment", *METADATA]
    assert list(fields) == expected_keys  # in the order given
    if alignment != 32:
        assert fields["general.alignment"].types == [V.UINT32]
        assert fields["general.alignment"].contents() == alignment
    assert reader.alignment == alignment
    for key, (_, value_type, item_type, expected) in METADATA.items():
        field = fields[key]
        assert field.types[0] == value_type, key
        if item_type is not None:
            assert field.types[-1] == item_type, key
        got = field.contents()
        if value_type == V.FLOAT32 or item_type == V.FLOAT32:
            assert bits(np.array(got, np.float32)).tolist() == bits(np.array(expected, np.float32)).tolist(), key
        elif value_type == V.FLOAT64:
            assert np.array(got).view(np.uint64) == np.array(expected).view(np.uint64), key
        else:
            assert got == expected, key
            assert type(got) is type(expected), key

    assert [t.name for t in reader.tensors] == list(tensors)
    for t in reader.tensors:
        array = tensors[t.name]
        assert t.tensor_type == Q.F32, t.name
        assert t.shape.tolist() == list(reversed(array.shape)), t.name  # ggml order
        assert t.data.shape == array.shape, t.name  # NumPy order
        assert np.array_equal(bits(t.data), bits(array)), t.name
        assert t.data_offset % alignment == 0, t.name
    # The file ends with the last tensor's padding.
    last = reader.tensors[-1]
    assert os.path.getsize(path) == last.data_offset + -(-last.n_bytes // alignment) * alignment


def test_posenc_reads_what_it_wrote(tmp_path, rng):
    path = tmp_path / "ckpt.gguf"
    tensors = odd_tensors(rng)
    posenc.write_gguf(path, {key: given for key, (given, *_) in METADATA.items()}, tensors)
    f = posenc.GgufFile(path)
    assert f.version == 3 and f.alignment == 32
    assert sorted(f.metadata) == sorted(METADATA)
    for key, (_, value_type, item_type, expected) in METADATA.items():
        if value_type == V.FLOAT32 or item_type == V.FLOAT32:
            assert bits(np.array(f.metadata[key], np.float32)).tolist() == bits(np.array(expected, np.float32)).tolist()
        else:
            assert f.metadata[key] == expected, key
    assert [name for name, _, _ in f.tensors] == list(tensors)
    for name, shape, type_name in f.tensors:
        assert type_name == "F32" and shape == tuple(reversed(tensors[name].shape))
        assert np.array_equal(bits(f.dequantize(name)), bits(tensors[name])), name


def test_same_bytes_as_gguf_py_writer(tmp_path, rng):
    # gguf-py skips empty strings and arrays and puts general.architecture
    # first (its constructor adds it): the same content, typed explicitly.
    metadata = {key: value for key, value in METADATA.items()
                if value[3] != "" and value[3] != []}
    tensors = odd_tensors(rng)
    ours = tmp_path / "posenc.gguf"
    posenc.write_gguf(ours, {key: given for key, (given, *_) in metadata.items()}, tensors)

    theirs = tmp_path / "gguf_py.gguf"
    writer = gguf.GGUFWriter(theirs, arch="llama")
    for key, (_, value_type, item_type, expected) in metadata.items():
        if key != "general.architecture":
            writer.add_key_value(key, expected, value_type, sub_type=item_type)
    for name, array in tensors.items():
        writer.add_tensor(name, np.ascontiguousarray(array, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert ours.read_bytes() == theirs.read_bytes()


def test_metadata_only_and_empty(tmp_path):
    posenc.write_gguf(tmp_path / "a.gguf", {"general.architecture": "llama"}, {})
    reader = gguf.GGUFReader(tmp_path / "a.gguf")
    assert reader.fields["general.architecture"].contents() == "llama"
    assert len(reader.tensors) == 0
    posenc.write_gguf(tmp_path / "b.gguf", {}, {})
    assert os.path.getsize(tmp_path / "b.gguf") == 32  # the 24-byte header, padded
    assert posenc.GgufFile(tmp_path / "b.gguf").metadata == {}


@pytest.mark.parametrize("metadata, message", [
    ({"k": None}, "[gguf write] metadata['k'] = None: must be a str, bool, int, float"),
    ({"k": b"bytes"}, "metadata['k'] = b'bytes': must be a str, bool"),
    ({"k": {"a": 1}}, "metadata['k'] = {'a': 1}: must be"),
    ({"k": 2**63}, "[gguf write] metadata['k'] = 9223372036854775808: must fit in a signed 64-bit integer"),
    ({"k": np.uint64(1)}, "metadata['k'].dtype = uint64: NumPy scalars must be int32, uint32, int64, float32"),
    ({"k": np.float16(1)}, "metadata['k'].dtype = float16: NumPy scalars must be"),
    ({"k": []}, "metadata['k'] = []: an empty list has no item type"),
    ({"k": [1, 2.5]}, "metadata['k'] = [1, 2.5]: list items must be all str, all int or all float"),
    ({"k": [True, False]}, "list items must be all str, all int or all float (bools"),
    ({"k": ["a", 1]}, "list items must be all str"),
    ({"k": [1, 2**64]}, "metadata['k'][1] = 18446744073709551616: must fit in a signed 64-bit integer"),
    ({"k": np.zeros((2, 2), np.int32)}, "metadata['k'].shape = (2, 2): a metadata array must be 1-D"),
    ({"k": np.zeros(2, np.float64)}, "metadata['k'].dtype = float64: a metadata array must be int32, int64"),
    ({1: "x"}, "[gguf write] metadata key = 1: must be a str"),
    ({"": "x"}, '[gguf write] key = "": must not be empty'),
    ({"general.alignment": np.uint32(64)}, 'key = "general.alignment": is set by GgufWriter\'s alignment'),
])
def test_metadata_errors(tmp_path, metadata, message):
    with pytest.raises(ValueError) as error:
        posenc.write_gguf(tmp_path / "x.gguf", metadata, {})
    assert message in str(error.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("tensors, message", [
    ({"w": np.zeros(3)}, "[gguf write] tensors['w'].dtype = float64: must be float32 (convert with .astype("),
    ({"w": np.zeros(3, np.float16)}, "tensors['w'].dtype = float16: must be float32"),
    ({"w": [1.0, 2.0]}, "tensors['w'].dtype = float64: must be float32"),
    ({"w": np.float32(1)}, "[gguf write] tensors['w'].shape = (): must have 1 to 4 dims, each >= 1"),
    ({"w": np.zeros((1, 1, 1, 1, 2), np.float32)}, "tensors['w'].shape = (1, 1, 1, 1, 2): must have 1 to 4 dims"),
    ({"w": np.zeros((0, 3), np.float32)}, "tensors['w'].shape = (0, 3): must have 1 to 4 dims, each >= 1"),
    ({"": np.zeros(3, np.float32)}, '[gguf write] tensor name = "": must not be empty'),
    ({"n" * 64: np.zeros(3, np.float32)}, "must be at most 63 bytes (llama.cpp's GGML_MAX_NAME - 1)"),
    ({2: np.zeros(3, np.float32)}, "[gguf write] tensor name = 2: must be a str"),
])
def test_tensor_errors(tmp_path, tensors, message):
    with pytest.raises(ValueError) as error:
        posenc.write_gguf(tmp_path / "x.gguf", {}, tensors)
    assert message in str(error.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("alignment", [0, 4, 48, 2**21, 2**32, True, 32.0])
def test_alignment_errors(tmp_path, alignment):
    with pytest.raises(ValueError, match=r"^\[gguf write\] alignment = "):
        posenc.write_gguf(tmp_path / "x.gguf", {}, {}, alignment=alignment)


def test_unwritable_targets_leave_nothing(tmp_path):
    tensors = {"w": np.ones(4, np.float32)}
    target = tmp_path / "missing" / "x.gguf"
    with pytest.raises(ValueError, match="cannot be written: No such file or directory"):
        posenc.write_gguf(target, {}, tensors)
    (tmp_path / "dir.gguf").mkdir()
    with pytest.raises(ValueError, match=r"dir\.gguf\": is a directory, not a file that can be replaced"):
        posenc.write_gguf(tmp_path / "dir.gguf", {}, tensors)
    assert [p.name for p in tmp_path.iterdir()] == ["dir.gguf"]
    assert list((tmp_path / "dir.gguf").iterdir()) == []


def test_replaces_an_existing_file(tmp_path):
    path = tmp_path / "ckpt.gguf"
    path.write_bytes(b"an older checkpoint")
    posenc.write_gguf(path, {"step": 2}, {"w": np.arange(3, dtype=np.float32)})
    assert posenc.GgufFile(path).metadata == {"step": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.gguf"]


# What a path may be (include/posenc/output_file.h): the real /dev/full and
# /dev/null are written only after a symlink to /dev/full has shown that
# devices are written through (a writer that renamed would replace the link).
def test_a_fifo_is_refused_a_symlinks_target_is_written_and_devices_are_written_through(tmp_path):
    tensors = {"w": np.ones(4, np.float32)}
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r'^\[gguf write\] path = ".*pipe\.gguf": is a FIFO \(named pipe\), not a '
                                         r"regular file"):
        posenc.write_gguf(fifo, {}, tensors)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    (tmp_path / "real.gguf").write_bytes(b"old")
    (tmp_path / "link.gguf").symlink_to("real.gguf")
    posenc.write_gguf(tmp_path / "link.gguf", {"k": 1}, tensors)
    assert (tmp_path / "link.gguf").is_symlink()
    assert posenc.GgufFile(tmp_path / "real.gguf").metadata == {"k": 1}
    (tmp_path / "full.gguf").symlink_to("/dev/full")
    with pytest.raises(ValueError, match=r'full\.gguf": cannot be written: No space left on device'):
        posenc.write_gguf(tmp_path / "full.gguf", {}, tensors)
    assert (tmp_path / "full.gguf").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full.gguf", "link.gguf", "pipe.gguf", "real.gguf"]
    devices = {path: os.stat(path).st_rdev for path in ("/dev/full", "/dev/null")}
    with pytest.raises(ValueError, match=r'^\[gguf write\] path = "/dev/full": cannot be written: No space left'):
        posenc.write_gguf("/dev/full", {}, tensors)
    posenc.write_gguf("/dev/null", {}, tensors)
    for path, rdev in devices.items():
        assert stat.S_ISCHR(os.lstat(path).st_mode) and os.stat(path).st_rdev == rdev, path


@pytest.mark.parametrize("path", ["out\0.gguf", b"out\0.gguf"])
def test_a_nul_in_the_path_is_refused(tmp_path, path):
    full = os.path.join(os.fsencode(tmp_path) if isinstance(path, bytes) else str(tmp_path), path)
    with pytest.raises(ValueError, match=r"^\[gguf write\] path = .*: must not contain a NUL byte$"):
        posenc.write_gguf(full, {}, {"w": np.ones(2, np.float32)})
    assert list(tmp_path.iterdir()) == []


def test_a_path_of_undecodable_bytes_is_written_as_given(tmp_path):
    name = os.path.join(os.fsencode(tmp_path), b"\xff.gguf")
    posenc.write_gguf(name, {"k": 1}, {})
    posenc.write_gguf(os.fsdecode(name), {"k": 2}, {})  # the same name, as str (surrogateescape)
    posenc.write_gguf(tmp_path / "expected.gguf", {"k": 2}, {})
    assert sorted(os.listdir(os.fsencode(tmp_path))) == [b"expected.gguf", b"\xff.gguf"]
    with open(name, "rb") as written:
        assert written.read() == (tmp_path / "expected.gguf").read_bytes()


@pytest.mark.parametrize("metadata, tensors, message", [
    ({"\ud800": 1}, {}, "[gguf write] metadata key = '\\ud800': is not valid Unicode (surrogates not allowed at "
                        "index 0): GGUF strings are UTF-8"),
    ({"k": "a\udc80"}, {}, "[gguf write] metadata['k'] = 'a\\udc80': is not valid Unicode"),
    ({"k": ["a", "\ud800"]}, {}, "[gguf write] metadata['k'][1] = '\\ud800': is not valid Unicode"),
    ({"k": np.array(["a", "\ud800"])}, {}, "[gguf write] metadata['k'][1] = '\\ud800': is not valid Unicode"),
    ({}, {"w\ud800": np.ones(2, np.float32)}, "[gguf write] tensor name = 'w\\ud800': is not valid Unicode"),
    ([("k", 1)], {}, "[gguf write] metadata = [('k', 1)]: must be a dict (a mapping of name -> value)"),
    ({}, [np.ones(2, np.float32)], "[gguf write] tensors = [array([1., 1.], dtype=float32)]: must be a dict"),
    (None, {}, "[gguf write] metadata = None: must be a dict"),
])
def test_names_that_are_not_unicode_and_arguments_that_are_not_dicts(tmp_path, metadata, tensors, message):
    with pytest.raises(ValueError) as error:
        posenc.write_gguf(tmp_path / "x.gguf", metadata, tensors)
    assert message in str(error.value)
    assert list(tmp_path.iterdir()) == []


def test_a_killed_writers_temporary_is_removed_by_the_next_write(tmp_path):
    dead = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True).stdout.strip()
    stale = tmp_path / f".x.gguf.{socket.gethostname()}-{dead}-0.tmp"
    stale.write_bytes(b"half a checkpoint")
    posenc.write_gguf(tmp_path / "x.gguf", {}, {})
    assert [p.name for p in tmp_path.iterdir()] == ["x.gguf"]
