"""A model directory of one's own for the drift tests: the bundled MiniLM files copied, and a way
to change the model file the way an upstream update or a bad copy would (not a corrupted file:
one that loads and embeds, differently)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from daemon.embedding.embedder import assemble_default_model


def own_model_dir(target: Path) -> Path:
    """The bundled MiniLM's files (ONNX, tokenizer, config) copied to `target`."""
    bundled = assemble_default_model(target.parent / ".bundled-minilm")
    shutil.copytree(bundled, target)
    return target


def change_model_file(directory: Path, *, scale: float = 0.5, seed: int = 7) -> None:
    """Rewrite `directory`/model.onnx with noise (± `scale`, relative) on the embeddings'
    LayerNorm weights: the model still loads and embeds, but maps text elsewhere."""
    path = directory / "model.onnx"
    model = onnx.load(str(path))
    rng = np.random.default_rng(seed)
    for i, init in enumerate(model.graph.initializer):
        if init.name.endswith("embeddings.LayerNorm.weight"):
            weights = numpy_helper.to_array(init)
            noisy = weights * (1 + scale * rng.uniform(-1, 1, weights.shape)).astype(weights.dtype)
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(noisy, init.name))
            break
    else:
        raise AssertionError("no embeddings LayerNorm weight in the model")
    onnx.save(model, str(path))
