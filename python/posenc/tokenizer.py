"""Byte-level BPE tokenization from GGUF metadata.

:class:`BpeTokenizer` reads ``tokenizer.ggml.*`` from a GGUF model file and
gives the same token ids as Hugging Face ``tokenizers`` for that vocabulary::

    >>> from posenc.tokenizer import BpeTokenizer
    >>> tok = BpeTokenizer.from_gguf("SmolLM2-135M-Instruct.Q4_1.gguf")  # doctest: +SKIP
    >>> tok.decode(tok.encode("Hello, world!"))  # doctest: +SKIP
    'Hello, world!'

``encode`` matches special (control) tokens as whole strings and adds no
BOS/EOS; ``decode`` turns bytes that are not UTF-8 into U+FFFD and
``decode_bytes`` returns the raw bytes. Errors are ValueError.
"""

from ._posenc import BpeTokenizer

__all__ = ["BpeTokenizer"]
