"""Reading GGUF model files (llama.cpp's format, versions 2 and 3).

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
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Tuple, Union

import numpy as np

from . import _posenc

__all__ = ["GgufFile"]


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
        F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K).

        Raises:
            ValueError: no such tensor, or a type posenc cannot dequantize.
        """
        if not isinstance(name, str):
            raise ValueError(f"[gguf] tensor = {name!r}: must be a tensor name (str)")
        return self._file.dequantize(name)

    def __repr__(self) -> str:
        return f"GgufFile({self.path!r}, version={self.version}, tensors={len(self.tensors)}, metadata={len(self.metadata)})"
