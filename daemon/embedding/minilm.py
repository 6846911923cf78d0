"""The bundled all-MiniLM-L6-v2, run on ONNX Runtime and `tokenizers` directly (no fastembed).

`MiniLM(directory).embed(texts)` returns exactly what fastembed's `TextEmbedding` returned for
this model (tests/embedding/test_minilm.py compares the two on the same texts, within 1e-5),
so every vector stored under its `EmbeddingInfo` stays valid: the same weights (model.onnx or
its lean form, `lean_graph`, both sha256-pinned and checked by `embedder.assemble_default_model`
before this loads them), the same session options
(every graph optimisation, one intra- and one inter-op thread, no CPU memory arena), the same
tokenizer (the shipped tokenizer.json, truncated at 256 tokens on the right, padded to the
longest text of the batch with [PAD] = 0), `token_type_ids` all zero, the first output
(`last_hidden_state`) mean-pooled over the attention mask in float64, then L2-normalised.

Why not fastembed: the embedding process that imports it is ~35 MiB larger for nothing this
model needs (its imports: requests, httpx, huggingface_hub, loguru, PIL, ...;
bench/bench_footprint.py). fastembed still loads MPNet and hub models (`embedder._OnnxModel`),
imported only when one is configured.

What stays resident once loaded (~73 MiB for the session, on top of ~57 MiB for the
interpreter, numpy, ONNX Runtime and tokenizers; bench/bench_footprint.py): the shipped file
holds the weights in int8 with a float scale (`Cast` + `Mul` before each use); ONNX Runtime's
constant folding turns them into float32 once, at load, so no query pays the dequantisation.
`lean_graph` keeps the word-embedding table out of that (int8, looked up first: 33 MiB less,
identical vectors); the layers' 36 matrices stay folded (40 MiB float32). Measured and not
taken: no folding at all (~40 MiB for the whole session, but a query ~10x as long: 157 ms
against 15 ms); the matrices as 8-bit `MatMulNBits` (-30 MiB, vectors within 2e-7, a query
3.6x as long); the session options `session.disable_prepacking`,
`session.use_device_allocator_for_initializers`, `enable_mem_pattern` off, a lower
`graph_optimization_level` than ALL (none moves the resident size by 0.1 MiB).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from daemon.embedding.embedder import BATCH, MAX_TOKENS
from daemon.native_memory import release_free_memory

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["MiniLM", "session_options"]

PAD_TOKEN, PAD_ID = "[PAD]", 0


def session_options() -> ort.SessionOptions:
    """One intra-op and one inter-op thread, no CPU memory arena, every graph optimisation.

    Without the arena ONNX Runtime allocates each run's activations from the heap and frees
    them after the run: with it, the largest batch ever run (8 × 256 tokens: ~290 MiB) stayed
    reserved for the life of the process; on one thread the arena saves no measurable time."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.enable_cpu_mem_arena = False
    return options


class MiniLM:
    """The loaded model: thread-safe (`embed` may run on several threads at once)."""

    def __init__(self, directory: Path, onnx_file: str = "model.onnx") -> None:
        """Load `directory`/`onnx_file` (model.onnx or its lean form, `lean_graph`) and
        `directory`/tokenizer.json (their hashes checked by the caller)."""
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        # The models were trained on 256 tokens or fewer; tokenizer.json's own settings (128,
        # fixed padding) are those of the upstream export, not of the model.
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS, direction="right")
        self.tokenizer.enable_padding(direction="right", pad_id=PAD_ID, pad_type_id=0, pad_token=PAD_TOKEN,
                                      length=None)
        self.session = ort.InferenceSession(str(directory / onnx_file), sess_options=session_options(),
                                            providers=["CPUExecutionProvider"])
        self._inputs = {node.name for node in self.session.get_inputs()}
        release_free_memory()  # the graph before constant folding: ~50 MiB glibc would keep

    def _batch(self, texts: list[str]) -> NDArray[np.float32]:
        encoded = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feed = {"input_ids": ids}
        if "attention_mask" in self._inputs:
            feed["attention_mask"] = mask
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = np.asarray(self.session.run(None, feed)[0])  # last_hidden_state [batch, tokens, 384]
        summed = np.sum(hidden, axis=1, where=mask[:, :, np.newaxis].astype(bool), dtype=np.float64)
        pooled = summed / np.maximum(np.sum(mask, axis=1, keepdims=True), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        unit: NDArray[np.float32] = (pooled / norms).astype(np.float32)
        return unit

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Unit vectors (float32, one row per text), in batches of `BATCH` texts."""
        batches = [self._batch(list(texts[i:i + BATCH])) for i in range(0, len(texts), BATCH)]
        if not batches:
            return np.zeros((0, 384), dtype=np.float32)
        return np.concatenate(batches, axis=0) if len(batches) > 1 else batches[0]
