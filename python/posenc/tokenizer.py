"""BPE tokenization from GGUF metadata.

:class:`BpeTokenizer` reads ``tokenizer.ggml.*`` from a GGUF model file, of
either model: ``"gpt2"`` (byte-level BPE: SmolLM2, Llama 3; the same token ids
as Hugging Face ``tokenizers``) or ``"llama"`` (SentencePiece BPE: Gemma; the
same token ids as Google's SentencePiece)::

    >>> from posenc.tokenizer import BpeTokenizer
    >>> tok = BpeTokenizer.from_gguf("SmolLM2-135M-Instruct.Q4_1.gguf")  # doctest: +SKIP
    >>> tok.decode(tok.encode("Hello, world!"))  # doctest: +SKIP
    'Hello, world!'

``encode`` matches special (control and user-defined) tokens as whole strings
and adds no BOS/EOS (``add_bos`` says whether the model wants BOS first);
``decode`` turns bytes that are not UTF-8 into U+FFFD and ``decode_bytes``
returns the raw bytes. Errors are ValueError, e.g.
``[tokenizer] id = 99999: must be a token id below the vocabulary size 49152``.
"""

from __future__ import annotations

import os
from typing import Any, List, Optional, Union

import numpy as np

from . import _args, _posenc, _tensors

__all__ = ["BpeTokenizer"]


class BpeTokenizer:
    """A BPE tokenizer built from a GGUF file's ``tokenizer.ggml.*`` metadata:
    byte-level (``model == "gpt2"``, token ids identical to Hugging Face
    ``tokenizers``) or SentencePiece (``model == "llama"``, token ids identical
    to Google's SentencePiece). Build it with :meth:`from_gguf`."""

    __slots__ = ("_core",)

    def __init__(self, core: Any) -> None:
        if not isinstance(core, _posenc.BpeTokenizer):
            raise ValueError(f"[tokenizer] core = {type(core).__name__}: use BpeTokenizer.from_gguf(path)")
        self._core = core

    @classmethod
    def from_gguf(cls, path: Union[str, os.PathLike]) -> "BpeTokenizer":
        """Reads the tokenizer of a GGUF model file."""
        path = os.fspath(path)
        return cls(_posenc.BpeTokenizer.from_gguf(path if isinstance(path, str) else os.fsdecode(path)))

    def encode(self, text: str) -> List[int]:
        """Token ids of ``text`` (special tokens matched, no BOS/EOS added)."""
        return self._core.encode(text)

    def decode(self, ids: Any) -> str:
        """The text of ``ids`` (any integer array-like); bytes that are not
        UTF-8 become U+FFFD."""
        return self._core.decode(self._ids(ids))

    def decode_bytes(self, ids: Any) -> bytes:
        """The bytes of ``ids``, as they are."""
        return self._core.decode_bytes(self._ids(ids))

    def token(self, id: int) -> str:
        """The vocabulary string of token ``id`` (a ValueError if the file
        holds bytes there that are not UTF-8, as GGUF strings must be)."""
        return self._core.token(self._id(id))

    def token_id(self, token: str) -> Optional[int]:
        """The id of the vocabulary string ``token``, or None."""
        return self._core.token_id(token)

    def is_special(self, id: int) -> bool:
        """Whether token ``id`` is a special (control) token."""
        return self._core.is_special(self._id(id))

    @property
    def vocab_size(self) -> int:
        return self._core.vocab_size

    @property
    def model(self) -> str:
        """``tokenizer.ggml.model``: ``"gpt2"`` or ``"llama"``."""
        return self._core.model

    @property
    def pre_tokenizer(self) -> Optional[str]:
        """The pre-tokenizer of a ``"gpt2"`` vocabulary; None for ``"llama"``."""
        return self._core.pre_tokenizer

    @property
    def bos_id(self) -> Optional[int]:
        return self._core.bos_id

    @property
    def eos_id(self) -> Optional[int]:
        return self._core.eos_id

    @property
    def unknown_id(self) -> Optional[int]:
        return self._core.unknown_id

    @property
    def padding_id(self) -> Optional[int]:
        return self._core.padding_id

    @property
    def add_bos(self) -> bool:
        """Whether a text starts with ``bos_id`` for this model
        (``tokenizer.ggml.add_bos_token``; Gemma sets it)."""
        return self._core.add_bos

    def __repr__(self) -> str:
        return (f"BpeTokenizer(model={self.model!r}, vocab_size={self.vocab_size}, "
                f"pre_tokenizer={self.pre_tokenizer!r})")

    # Ids beyond int32 would not reach the C++ tokenizer (which checks the
    # vocabulary range itself): the same rule, reported here.
    def _rule(self) -> str:
        return f"must be a token id below the vocabulary size {self.vocab_size}"

    def _id(self, value: Any) -> int:
        return _args.integer("tokenizer", "id", value, low=_args.INT32_MIN, high=_args.INT32_MAX, rule=self._rule())

    def _ids(self, ids: Any) -> np.ndarray:
        if hasattr(ids, "detach") and hasattr(ids, "numpy"):  # a torch tensor
            ids = ids.detach().cpu().numpy()
        if np.ndim(ids) != 1:
            raise _args.error("tokenizer", "ids.ndim", np.ndim(ids), "must be 1 (a sequence of token ids)")
        if np.size(ids) == 0:
            return np.zeros(0, np.int32)
        array = _args.int64_array("tokenizer", "ids", ids, dtype_rule="must be an integer type (token ids)",
                                  low=_args.INT32_MIN, high=_args.INT32_MAX, rule=self._rule())
        return np.ascontiguousarray(array, dtype=np.int32)

# Token ids as tensors (PyTorch, any DLPack array) too (_tensors.py).
_tensors.wrap_methods(BpeTokenizer, ["decode", "decode_bytes"])
