"""The committed table docs/gallery/rope-configs/ (scripts/rope-configs: the
tool's `posenc rope freqs --hf-config CONFIG --seq-len N --json` for public
model configs) against Hugging Face's ROPE_INIT_FUNCTIONS, row by row, so
the numbers other stacks are invited to check against are HF's.

Each row's config is examples/configs/*.json read by transformers: through
the model's own config class where transformers 4.49 has one (Llama, Qwen2,
Phi-3), else through PretrainedConfig with the fields the model's code reads
(Gemma 3's global layers: head_dim, rope_theta and the linear rope_scaling;
InternLM2: dynamic). DeepSeek-V2/V3 are held to DeepSeek's published
definition instead (the checkpoints' modeling_deepseek.py, transcribed in
test_rope_frequencies_hf.deepseek_v2_yarn_oracle): transformers 4.49 has no
DeepSeek and its YaRN reads neither original_max_position_embeddings (it
ramps over max_position_embeddings, 163840) nor mscale/mscale_all_dim.

Tolerance: HF computes inv_freq in float32 (see test_rope_frequencies_hf.py:
its rounding stays below ~5e-7), so inv_freq within 1e-6 relative; the
attention factor is a Python float on both sides and must be equal.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, Phi3Config, PretrainedConfig, Qwen2Config
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from test_rope_frequencies_hf import deepseek_v2_yarn_oracle

ROOT = pathlib.Path(__file__).resolve().parents[2]
TABLE = ROOT / "docs" / "gallery" / "rope-configs"
ROWS = json.loads((TABLE / "index.json").read_text(encoding="utf-8"))["rows"]
CLASSES = {"llama": LlamaConfig, "qwen2": Qwen2Config, "phi3": Phi3Config}




def hf_config_of(path: pathlib.Path) -> PretrainedConfig:
    fields = json.loads(path.read_text(encoding="utf-8"))
    model_type = fields.pop("model_type")
    config = CLASSES[model_type](**fields) if model_type in CLASSES else PretrainedConfig(**fields)
    if config.rope_scaling:
        # The legacy key, as the rotary embeddings read it (Phi3Config keeps "type" only).
        config.rope_scaling.setdefault("rope_type", config.rope_scaling.get("type"))
    return config


def reference(row):
    """(inv_freq, attention factor) of a row from its outside oracle."""
    fields = json.loads((ROOT / row["config"]).read_text(encoding="utf-8"))
    if fields["model_type"].startswith("deepseek"):
        s = fields["rope_scaling"]
        return deepseek_v2_yarn_oracle(fields["qk_rope_head_dim"], float(fields["rope_theta"]), float(s["factor"]),
                                       s["original_max_position_embeddings"], s["beta_fast"], s["beta_slow"],
                                       s["mscale"], s["mscale_all_dim"])
    config = hf_config_of(ROOT / row["config"])
    rope_type = (config.rope_scaling or {}).get("rope_type", "default")
    seq_len = row["seq_len"] or None
    inv_freq, attention_factor = ROPE_INIT_FUNCTIONS[rope_type](config, torch.device("cpu"), seq_len=seq_len)
    return inv_freq.double().numpy(), attention_factor


@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_row_is_hugging_face(row):
    ours = json.loads((TABLE / f"{row['name']}.json").read_text(encoding="utf-8"))
    inv_freq, attention_factor = reference(row)
    np.testing.assert_allclose(np.array(ours["inv_freq"]), inv_freq, rtol=1e-6, atol=0)
    assert ours["attention_factor"] == attention_factor


def test_every_scaled_kind_is_a_row():
    """The table covers each kind of scaling the issue names."""
    kinds = {json.loads((TABLE / f"{r['name']}.json").read_text(encoding="utf-8"))["scaling"]["rope_type"]
             for r in ROWS}
    assert {"llama3", "yarn", "longrope", "linear", "dynamic"} <= kinds
