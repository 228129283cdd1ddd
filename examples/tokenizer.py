"""The BPE tokenizer of a GGUF file (byte-level or SentencePiece).
    python examples/tokenizer.py MODEL.gguf   (./scripts/fetch-model prints the default model's path)"""
import sys
from posenc.tokenizer import BpeTokenizer

tok = BpeTokenizer.from_gguf(sys.argv[1])
ids = tok.encode("user\nHi! 12345")        # no BOS/EOS added; special tokens such as <|im_start|> are cut out whole
print(ids, tok.decode(ids), tok.decode_bytes(ids), tok.eos_id)
assert tok.decode(ids) == "user\nHi! 12345"
