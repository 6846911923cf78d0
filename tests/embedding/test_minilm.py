"""The bundled MiniLM without fastembed (daemon/embedding/minilm.py), on its lean graph
(daemon/embedding/lean_graph.py: the word embeddings looked up in int8), gives fastembed's
vectors: the same texts through both, in the same process, agree within 1e-5 (so every vector
stored under the space's `EmbeddingInfo` stays valid), in batches mixing short and long
(truncated) texts; the lean file is written as pinned and replaced when corrupt; and loading
the model imports neither fastembed nor onnx. The real bundled model."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from daemon.embedding import embedder
from daemon.embedding.catalogue import sha256_file
from daemon.embedding.embedder import (
    BATCH,
    DEFAULT_MODEL,
    LEAN_ONNX,
    LEAN_ONNX_SHA256,
    MAX_TOKENS,
    assemble_default_model,
    get_embedder,
    preprocess,
)
from daemon.embedding.minilm import MiniLM
from tests.helpers.polling import eventually

ROOT = Path(__file__).resolve().parents[2]

WORDS = ["liquidation", "arbitrum", "gas", "gwei", "pool", "reentrancy", "oracle", "validator", "slashing", "bridge",
         "rollup", "sequencer", "mempool", "frontrun", "sandwich", "vault", "collateral", "governance", "proposal"]


def varied_texts() -> list[str]:
    """~50 texts: single words, sentences, punctuation, digits, unicode, accents, code, empty-ish,
    and long ones well past 256 tokens (truncated), in an order that mixes lengths in a batch."""
    texts = [
        "a", "gas", "Gas price spike on Arbitrum during a liquidation", "  leading and trailing spaces  ",
        "UPPER CASE SHOUTING ABOUT THE BRIDGE", "naïve café résumé — déjà vu", "日本語のテキストと English mixed",
        "emoji 🚀🔥 in the sequencer logs", "0x7f3a9c2b1d4e5f60718293a4b5c6d7e8f9012345", "1234567890 3.14159 -42 1e-9",
        "def drain(pool): return pool.withdraw(amount=2**256 - 1)", "?!?!...;;;:::", "tab\tand\nnewline\r\ntext",
        "the validator was slashed for double signing at epoch 10432",
        "[CLS] [SEP] [PAD] [MASK] [UNK] literal specials",
        "https://example.org/path?query=1&x=y#frag",
        "C'est la vie, n'est-ce pas ? Ça va.", "Ελληνικά και Русский текст",
    ]
    for i in range(20):
        count = (i * 7) % 23 + 1
        texts.append(" ".join(WORDS[(i + j) % len(WORDS)] for j in range(count)) + f" #{i}")
    texts += [
        "word " * 300,  # > 256 tokens
        "the pool on arbitrum was drained through a reentrancy in its callback " * 40,
        " ".join(f"token{i}" for i in range(600)),
        "unbroken" * 400,  # one very long word: many word pieces
        ("Der Validator wurde wegen doppelter Signatur bestraft. " * 30),
        "x " * 255, "x " * 254, "x " * 256,  # around the truncation limit
    ]
    texts += ["short", "a much longer text about governance proposals and timelocks " * 8, "mid length sentence"] * 2
    return texts


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return assemble_default_model(tmp_path_factory.mktemp("minilm") / "embedder", wait_for_lean=True)


def test_vectors_are_fastembeds_within_1e_5(model_dir: Path) -> None:
    fastembed = pytest.importorskip("fastembed")
    texts = [preprocess(t) for t in varied_texts()]
    assert len(texts) >= 50
    reference = fastembed.TextEmbedding(model_name=DEFAULT_MODEL, specific_model_path=str(model_dir), threads=1,
                                        enable_cpu_mem_arena=False)
    reference.model.tokenizer.enable_truncation(max_length=MAX_TOKENS)  # as the embedder did with fastembed
    expected = np.asarray(list(reference.embed(texts, batch_size=BATCH)), dtype=np.float32)
    got = MiniLM(model_dir, LEAN_ONNX).embed(texts)
    assert got.dtype == np.float32 and got.shape == expected.shape == (len(texts), 384)
    assert np.abs(got - expected).max() <= 1e-5
    assert np.abs(MiniLM(model_dir).embed(texts) - expected).max() <= 1e-5  # the shipped graph, unchanged
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
    # one at a time (padding to a batch's longest changes nothing), and through the embedder
    model = MiniLM(model_dir, LEAN_ONNX)
    assert np.abs(model.embed(texts[:3]) - np.stack([model.embed([t])[0] for t in texts[:3]])).max() <= 1e-5
    assert np.abs(get_embedder(model_dir, DEFAULT_MODEL).embed(varied_texts()) - expected).max() <= 1e-5


def test_the_lean_graph_is_written_as_pinned_and_replaced_when_corrupt(model_dir: Path) -> None:
    lean = model_dir / LEAN_ONNX
    assert sha256_file(lean) == LEAN_ONNX_SHA256
    assert lean.stat().st_size < (model_dir / "model.onnx").stat().st_size + 4096  # still int8: not 4x larger
    with lean.open("r+b") as f:
        f.seek(1000)
        f.write(b"\x00" * 64)
    assert sha256_file(assemble_default_model(model_dir, wait_for_lean=True) / LEAN_ONNX) == LEAN_ONNX_SHA256


def test_truncation_is_at_256_tokens(model_dir: Path) -> None:
    model = MiniLM(model_dir, LEAN_ONNX)
    at_limit = "x " * 254  # 254 words + [CLS] + [SEP] = 256 tokens
    assert len(model.tokenizer.encode(at_limit * 3).ids) == MAX_TOKENS
    assert np.array_equal(model.embed([at_limit]), model.embed([at_limit + "y " * 100]))
    assert not np.array_equal(model.embed(["x " * 200]), model.embed(["x " * 200 + "y " * 10]))
    assert model.embed([]).shape == (0, 384)


def test_loading_minilm_imports_no_fastembed(model_dir: Path) -> None:
    code = ("import sys; from pathlib import Path; from daemon.embedding.embedder import get_embedder; "
            f"e = get_embedder(Path({str(model_dir)!r})); assert e.embed(['x']).shape == (1, 384); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('fastembed', 'requests', 'httpx', 'huggingface_hub', 'onnx')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "[]"


def test_a_lean_graph_not_as_pinned_is_dropped_and_model_onnx_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    # What another `onnx` version that serialises the graph differently would do.
    monkeypatch.setattr(embedder, "LEAN_ONNX_SHA256", "0" * 64)
    with caplog.at_level(logging.WARNING, logger="clade.embedding"):
        files = assemble_default_model(tmp_path / "embedder", wait_for_lean=True)
    assert not (files / LEAN_ONNX).exists()
    assert embedder._minilm_file(files) == "model.onnx"
    assert "not written as pinned" in caplog.text


def test_a_first_load_does_not_wait_for_the_lean_graph(tmp_path: Path) -> None:
    """A fresh directory: the load goes on with model.onnx at once while another process writes
    the lean graph; it appears as pinned, and the next load uses it."""
    files = assemble_default_model(tmp_path / "embedder")
    marker = files / f".{LEAN_ONNX}.deriving"
    if not (files / LEAN_ONNX).exists():  # the derivation is still running: this load uses model.onnx
        assert embedder._minilm_file(files) == "model.onnx"
    eventually(lambda: (files / LEAN_ONNX).exists() and not marker.exists(), timeout=120,
               what="the lean graph written in the background")
    assert sha256_file(files / LEAN_ONNX) == LEAN_ONNX_SHA256
    assert embedder._minilm_file(files) == LEAN_ONNX
