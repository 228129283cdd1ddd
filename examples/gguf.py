"""GGUF in Python: metadata and tensors of a GGUF file.
    python examples/gguf.py MODEL.gguf   (./scripts/fetch-model prints the default model's path)"""
import sys
import posenc

f = posenc.GgufFile(sys.argv[1])           # memory-mapped; a corrupt file is a ValueError
print(f.version, f.metadata["general.architecture"])
name, shape, type_name = f.tensors[0]      # shape in ggml order (contiguous dimension first)
w = f.dequantize(name)                     # float32, NumPy order: the ggml shape reversed, as gguf-py
assert w.shape == tuple(reversed(shape))
