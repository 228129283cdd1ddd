"""The Python snippets of README.md and docs/ are the files under examples/
(scripts/readme-examples copies them into the pages, checks the copies, and
refuses a snippet from anywhere else): each runs here as a script, from the
repository root as a reader of the pages would, the model ones on a tiny
random-weight GGUF (random_llama_gguf.py) and a text long enough for their
windows; test_every_example_is_run keeps a new file from going unrun."""

import pathlib
import runpy
import sys

import pytest

from random_llama_gguf import write_random_llama

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def random_model(tmp_path_factory) -> pathlib.Path:
    return write_random_llama(tmp_path_factory.mktemp("examples") / "random-llama.gguf", tied=True)


def run_example(name, monkeypatch, *args):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "argv", [str(EXAMPLES / name), *map(str, args)])
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")


@pytest.mark.parametrize("name", ["rope.py", "attention.py", "encodings.py", "analysis.py", "torch_gradients.py",
                                  "hf_patch.py", "tiny_llm_rope.py", "torch_devices.py"])
def test_example_without_model(name, monkeypatch):
    run_example(name, monkeypatch)


@pytest.mark.parametrize("name", ["gguf.py", "tokenizer.py"])
def test_example_on_a_model(name, random_model, monkeypatch):
    run_example(name, monkeypatch, random_model)


def test_model_example(random_model, tmp_path, monkeypatch):
    text = tmp_path / "text.txt"
    text.write_text((ROOT / "LICENSE").read_text(encoding="utf-8"), encoding="utf-8")
    run_example("model.py", monkeypatch, random_model, text)


def test_every_example_is_run():
    """A new examples/*.py is added to the tests above, not left unrun."""
    run = {"rope.py", "attention.py", "encodings.py", "analysis.py", "gguf.py", "tokenizer.py", "model.py",
           "torch_gradients.py", "hf_patch.py", "tiny_llm_rope.py", "torch_devices.py"}
    assert {p.name for p in EXAMPLES.glob("*.py")} == run
