"""A GGUF llama model in Python: perplexity under a method, logits, a method's resolved form.
    python examples/model.py MODEL.gguf TEXT   (./scripts/fetch-model and ./scripts/fetch-texts print theirs)"""
import sys
import posenc
from posenc.tokenizer import BpeTokenizer

m = posenc.DecoderModel(sys.argv[1])
ids = BpeTokenizer.from_gguf(sys.argv[1]).encode(open(sys.argv[2], encoding="utf-8").read())
train = m.context_length
print(posenc.perplexity(m, ids, context=2 * train, method="ntk:logn", max_windows=1))   # {"ppl", "mean_nll", "scored", ...}
print(m.logits(ids[:128], method="rerope:window=16").shape)     # float32 [128, vocab]: keep the prefix short
print(m.resolve_method("yarn", 2 * train))                      # "yarn:factor=2"
