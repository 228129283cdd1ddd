"""Reading GGUF model files (llama.cpp's format, versions 2 and 3), and
writing them (version 3: metadata and float32 tensors, e.g. checkpoints).

:class:`GgufFile` memory-maps a file and checks every length, count and
offset against the bytes that are really there: a truncated or corrupt file
raises ValueError naming the path and the problem, never crashes.

Shapes: GGUF stores tensor shapes in ggml order (the contiguous dimension
first: a matrix of ``rows`` rows of ``cols`` values is ``(cols, rows)``).
:attr:`GgufFile.tensors` reports that order as stored; :meth:`GgufFile.dequantize`
returns the array in NumPy order, the ggml shape reversed (``[rows, cols]``),
which is what gguf-py's ``GGUFReader`` and ``gguf.quants.dequantize`` give.

Example::

    >>> import posenc
    >>> f = posenc.GgufFile("model.gguf")                       # doctest: +SKIP
    >>> f.metadata["llama.rope.freq_base"]                      # doctest: +SKIP
    500000.0
    >>> name, shape, type_name = f.tensors[0]                   # doctest: +SKIP
    >>> f.dequantize(name).shape == tuple(reversed(shape))      # doctest: +SKIP
    True

Writing (:func:`write_gguf`), read back by :class:`GgufFile` and by gguf-py::

    >>> import numpy as np
    >>> posenc.write_gguf("ckpt.gguf", {"general.architecture": "llama",
    ...                                 "llama.context_length": np.uint32(256)},
    ...                   {"token_embd.weight": np.zeros((100, 64), np.float32)})  # doctest: +SKIP
    >>> posenc.GgufFile("ckpt.gguf").tensors                   # doctest: +SKIP
    [('token_embd.weight', (64, 100), 'F32')]
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Tuple, Union

import numpy as np

from . import _args, _posenc, _tensors

__all__ = ["GgufFile", "write_gguf"]


class GgufFile:
    """A GGUF file, open for reading (memory-mapped, read-only).

    Args:
        path: the file (str or os.PathLike).

    Attributes:
        path: the path as given.
        version: the GGUF version (2 or 3).
        alignment: the data section alignment in bytes (``general.alignment``, 32 by default).
        metadata: dict of key -> value, sorted by key. Values are ``bool``,
            ``int`` (every integer type; uint64 values above 2^63 - 1 are an
            error), ``float`` (f32 values exactly as stored, widened), ``str``,
            or a list of one of these (arrays of bools read as ints 0/1). A
            string value (or array item) whose bytes are not valid UTF-8 is
            returned as ``bytes``, exactly as stored (llama.cpp does not check
            the encoding, so such files exist and stay readable).
        tensors: list of ``(name, shape, type)`` in file order; ``shape`` is a
            tuple in ggml order (see the module docstring), ``type`` the ggml
            type name (``"F32"``, ``"Q4_K"``, ...).

    Raises:
        ValueError: the file cannot be opened or is not a valid GGUF file,
            e.g. ``model.gguf: [gguf] version = 1: must be 2 or 3 ...``; a
            metadata key or tensor name that is not valid UTF-8 is an error
            too, e.g. ``model.gguf: [gguf] metadata key = "general.n\\xffme":
            is not valid UTF-8 (invalid byte at offset 9)``.
    """

    def __init__(self, path: Union[str, os.PathLike]):
        self.path = os.fspath(path)
        if not isinstance(self.path, str):
            self.path = os.fsdecode(self.path)
        self._file = _posenc.GgufFile(self.path)
        self.version: int = self._file.version
        self.alignment: int = self._file.alignment
        self.metadata: Dict[str, Any] = self._file.metadata(self.path)
        self.tensors: List[Tuple[str, Tuple[int, ...], str]] = self._file.tensors(self.path)

    def tensor_names(self) -> List[str]:
        return [name for name, _, _ in self.tensors]

    def dequantize(self, name: str) -> np.ndarray:
        """The tensor ``name`` as a new float32 array in NumPy order (the ggml
        shape reversed). Exact: each block is decoded as ggml does (F32,
        F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K).

        Raises:
            ValueError: no such tensor, a type posenc cannot dequantize, or a
                block whose scale is inf or NaN.
        """
        if not isinstance(name, str):
            raise ValueError(f"[gguf] tensor = {name!r}: must be a tensor name (str)")
        return self._file.dequantize(name)

    def __repr__(self) -> str:
        return f"GgufFile({self.path!r}, version={self.version}, tensors={len(self.tensors)}, metadata={len(self.metadata)})"


_OP = "gguf write"
_ARRAY_DTYPES = {np.dtype(np.int32): "int32", np.dtype(np.int64): "int64", np.dtype(np.float32): "float32"}
_VALUE_RULE = ("must be a str, bool, int, float, a NumPy int32/uint32/int64/float32/float64 scalar, a non-empty list "
               "of str, of int or of float, or a 1-D NumPy array of int32, int64, float32 or str")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _utf8(name: str, text: str) -> str:
    """``text``, checked to be writable as UTF-8 (GGUF's strings): a lone
    surrogate such as ``"\\ud800"`` is a ValueError naming ``name``, not
    pybind11's TypeError listing signatures."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise _args.error(_OP, name, _shown(text), f"is not valid Unicode ({e.reason} at index {e.start}): "
                          "GGUF strings are UTF-8") from None
    return text


def _mapping(name: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _args.error(_OP, name, _shown(value), "must be a dict (a mapping of name -> value)")
    return value


def _file_name(path: Union[str, bytes, os.PathLike]) -> bytes:
    """``path`` as the bytes of a file name (a str is encoded as os.fsencode
    does, so names of undecodable bytes round-trip); a NUL byte, which
    would cut the name short, is an error."""
    try:
        name = os.fsencode(path)
    except (TypeError, UnicodeEncodeError) as e:
        raise _args.error(_OP, "path", _shown(path), f"must be a file name (str, bytes or os.PathLike): {e}") from None
    if b"\0" in name:
        raise _args.error(_OP, "path", _shown(path), "must not contain a NUL byte")
    return name


def _add_value(writer: Any, key: str, value: Any) -> None:
    """Adds `value` under `key` with the GGUF type its Python type maps to
    (the table in :func:`write_gguf`)."""
    name = f"metadata[{key!r}]"
    # NumPy scalars first: numpy.float64 is a float and numpy.bool_ is not a bool.
    if isinstance(value, (bool, np.bool_)):
        writer.add_bool(key, bool(value))
    elif isinstance(value, np.uint32):
        writer.add_uint32(key, int(value))
    elif isinstance(value, np.int32):
        writer.add_int32(key, int(value))
    elif isinstance(value, np.int64):
        writer.add_int64(key, int(value))
    elif isinstance(value, np.float32):
        writer.add_float32(key, float(value))
    elif isinstance(value, np.float64):
        writer.add_float64(key, float(value))
    elif isinstance(value, np.generic):
        raise _args.error(_OP, f"{name}.dtype", value.dtype,
                          "NumPy scalars must be int32, uint32, int64, float32, float64 or bool")
    elif isinstance(value, int):
        writer.add_int64(key, _args.integer(_OP, name, value))
    elif isinstance(value, float):
        writer.add_float32(key, value)
    elif isinstance(value, str):
        writer.add_string(key, _utf8(name, value))
    elif isinstance(value, np.ndarray):
        if value.ndim != 1:
            raise _args.error(_OP, f"{name}.shape", value.shape, "a metadata array must be 1-D")
        if value.dtype.kind == "U":
            writer.add_string_array(key, [_utf8(f"{name}[{i}]", item) for i, item in enumerate(value.tolist())])
        elif value.dtype.newbyteorder("=") in _ARRAY_DTYPES:
            kind = _ARRAY_DTYPES[value.dtype.newbyteorder("=")]
            getattr(writer, f"add_{kind}_array")(key, np.ascontiguousarray(value, dtype=kind))
        else:
            raise _args.error(_OP, f"{name}.dtype", value.dtype,
                              "a metadata array must be int32, int64, float32 or str")
    elif isinstance(value, (list, tuple)):
        _add_list(writer, key, name, value)
    else:
        raise _args.error(_OP, name, _shown(value), _VALUE_RULE)


def _add_list(writer: Any, key: str, name: str, items: Any) -> None:
    if not items:
        raise _args.error(_OP, name, _shown(items), "an empty list has no item type: pass an empty NumPy array of "
                          "int32, int64 or float32 (or leave the key out)")
    if all(isinstance(item, str) for item in items):
        writer.add_string_array(key, [_utf8(f"{name}[{i}]", item) for i, item in enumerate(items)])
    elif all(isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_)) for item in items):
        writer.add_int64_array(key, _args.int64_array(_OP, name, [int(item) for item in items]))
    elif all(isinstance(item, (float, np.floating)) for item in items):
        writer.add_float32_array(key, np.array(items, dtype=np.float32))
    else:
        raise _args.error(_OP, name, _shown(items), "list items must be all str, all int or all float "
                          "(bools and mixed lists have no GGUF array type here)")


def write_gguf(path: Union[str, os.PathLike], metadata: Mapping[str, Any], tensors: Mapping[str, np.ndarray], *,
               alignment: int = 32) -> None:
    """Writes a GGUF file (version 3) that :class:`GgufFile`, gguf-py's
    ``GGUFReader`` and llama.cpp read: the metadata, then the tensors as F32,
    each in the order of its dict, laid out as gguf-py's ``GGUFWriter`` does.

    The file appears whole or not at all: it is written to a temporary file
    beside ``path``, flushed to disk and renamed onto it, so an error (a
    missing directory, ``path`` a directory, a full disk) leaves an existing
    file as it was and no temporary behind. A symlink's target is written
    (the link stays); a character device such as ``/dev/null`` is written
    through, never replaced; a FIFO, socket or block device is refused (the
    rules of ``include/posenc/output_file.h``).

    Args:
        path: the file to write (replaced if it exists): str, bytes or
            os.PathLike, without a NUL byte.
        metadata: key -> value. The GGUF type of each value is taken from
            its Python type:

            ========================================  ==================
            ``str``                                   string
            ``bool`` (or ``numpy.bool_``)             bool
            ``int``                                   int64
            ``float``                                 float32
            ``numpy.uint32`` / ``int32`` / ``int64``  uint32 / int32 / int64
            ``numpy.float32`` / ``float64``           float32 / float64
            list of ``str``                           array of string
            list of ``int``                           array of int64
            list of ``float``                         array of float32
            1-D NumPy array of int32, int64,          array of that type
            float32 or str
            ========================================  ==================

            A Python ``int`` is written as int64, which holds every value
            that fits 64 bits with a sign and which posenc and gguf-py read
            as they read any integer; llama.cpp itself wants uint32 for its
            counts and lengths (``llama.context_length``,
            ``llama.block_count``, ...): pass those as ``numpy.uint32(n)``.
            A ``float`` becomes float32 (rounded to nearest), as gguf-py
            does; pass ``numpy.float64(x)`` to keep all of its bits. An
            empty list has no item type and is an error; an empty NumPy
            array is written as an empty array of its dtype.
            ``general.alignment`` is not a key here: use ``alignment``.
        tensors: name -> float32 array in NumPy order (``[rows, cols]``),
            1 to 4 dims, none of them 0; written as F32 with the ggml
            shape, the NumPy shape reversed (what gguf-py writes), so
            ``GgufFile(path).dequantize(name)`` returns the same array.
            Arrays of another dtype are refused rather than rounded: convert
            them with ``.astype(numpy.float32)``. Names are at most 63 bytes
            (llama.cpp's limit).
        alignment: of the tensor data, a power of two from 8 to 2^20;
            written as ``general.alignment`` (uint32) when it is not the
            default 32.

    Raises:
        ValueError: a value of a type without a GGUF mapping, an empty or
            too long key or name, a tensor that is not float32 or has no
            dims, more than 4 or a zero one, or a file that cannot be
            written, e.g. ``[gguf write] tensors['w'].dtype = float64: must
            be float32 ...`` or ``[gguf write] path = "out/x.gguf": cannot be
            written: No such file or directory``; ``metadata`` or
            ``tensors`` that is not a dict, and a key, name or string that
            is not valid Unicode (a lone surrogate), are ValueErrors naming
            them too.
    """
    file_name = _file_name(path)
    writer = _posenc.GgufWriter(_args.integer(_OP, "alignment", alignment, allow_bool=False, low=0, high=2**32 - 1,
                                              rule="must be a power of two from 8 to 1048576"))
    for key, value in _mapping("metadata", metadata).items():
        if not isinstance(key, str):
            raise _args.error(_OP, "metadata key", _shown(key), "must be a str")
        _add_value(writer, _utf8("metadata key", key), value)
    for name, value in _mapping("tensors", tensors).items():
        if not isinstance(name, str):
            raise _args.error(_OP, "tensor name", _shown(name), "must be a str")
        _utf8("tensor name", name)
        array = np.asarray(value)
        if array.dtype.kind != "f" or array.dtype.itemsize != 4:
            raise _args.error(_OP, f"tensors[{name!r}].dtype", array.dtype,
                              "must be float32 (convert with .astype(numpy.float32): posenc does not round silently)")
        if not 1 <= array.ndim <= 4 or 0 in array.shape:
            raise _args.error(_OP, f"tensors[{name!r}].shape", array.shape, "must have 1 to 4 dims, each >= 1")
        writer.add_tensor(name, list(reversed(array.shape)), np.ascontiguousarray(array, dtype=np.float32))
    writer.write(file_name)

# Tensors (PyTorch, any DLPack array) in (_tensors.py).
_tensors.wrap_functions(globals(), ["write_gguf"])
