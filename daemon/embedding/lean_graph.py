"""MiniLM's ONNX graph with the word-embedding table kept in int8: 33 MiB less resident per
loaded model, the same vectors bit for bit.

The shipped model.onnx stores every weight in int8 with a float scale, dequantised in the graph
(`Cast` to float, `Mul` by the scale). ONNX Runtime folds those constants at load, so the word
embeddings (30,522 × 384) stay resident as 45 MiB of float32, of which a query reads a few rows.
`derive` rewrites that one path from `Gather(Mul(Cast(W), s), ids)` to
`Mul(Cast(Gather(W, ids)), Gather(s, ids))`: the table stays int8 (11 MiB) and only the rows
a batch looks up are dequantised, by the same float operations on the same numbers (so the
vectors are identical: tests/embedding/test_minilm.py), at no measurable cost per query. The
other weights (the 36 matrices of the six layers) keep their folded float32 form: there the
float matrix product is what makes a query fast.

    python -m daemon.embedding.lean_graph SOURCE TARGET

`embedder.assemble_default_model` runs this once, in a process of its own (importing `onnx`
would leave ~11 MiB in the embedding process), and pins the result's sha256 like every other
model file.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

__all__ = ["WORD_EMBEDDINGS", "derive"]

WORD_EMBEDDINGS = "inner.embeddings.word_embeddings.weight"


def derive(source: Path, target: Path, sha256: str | None = None) -> None:
    """Write `source` with the word-embedding lookup on the int8 table to `target` (atomic);
    with `sha256`, only if the result hashes to it (else nothing is placed and ValueError says
    so). Raises ValueError if `source` has not the shape this rewrite expects."""
    import onnx
    from onnx import helper

    model = onnx.load(str(source))
    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output}
    gathers = [n for n in graph.node if n.op_type == "Gather" and n.input[0] == WORD_EMBEDDINGS]
    if len(gathers) != 1:
        raise ValueError(f"{source}: expected one Gather on {WORD_EMBEDDINGS}, found {len(gathers)}")
    gather = gathers[0]
    mul = producer.get(WORD_EMBEDDINGS)
    cast = producer.get(mul.input[0]) if mul is not None and mul.op_type == "Mul" else None
    if mul is None or cast is None or cast.op_type != "Cast":
        raise ValueError(f"{source}: {WORD_EMBEDDINGS} is not Mul(Cast(int8), scale)")
    users = [n for n in graph.node if WORD_EMBEDDINGS in n.input or mul.input[0] in n.input]
    if len(users) != 2:  # the Gather and the Mul: nothing else reads the float table
        raise ValueError(f"{source}: {WORD_EMBEDDINGS} has other readers")
    table, scale, ids, out = cast.input[0], mul.input[1], gather.input[1], gather.output[0]
    lookup = [
        helper.make_node("Gather", [table, ids], [f"{out}_int8"], axis=0, name="lean_gather_int8"),
        helper.make_node("Gather", [scale, ids], [f"{out}_scale"], axis=0, name="lean_gather_scale"),
        helper.make_node("Cast", [f"{out}_int8"], [f"{out}_float"], to=onnx.TensorProto.FLOAT, name="lean_cast"),
        helper.make_node("Mul", [f"{out}_float", f"{out}_scale"], [out], name="lean_mul"),
    ]
    nodes = [n for n in graph.node if n is not gather and n is not mul and n is not cast]
    at = next(i for i, n in enumerate(graph.node) if n is gather) - 2  # the two removed nodes came first
    del graph.node[:]
    graph.node.extend(nodes[:at] + lookup + nodes[at:])
    onnx.checker.check_model(model)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")  # two processes may assemble at once
    onnx.save(model, str(tmp))
    if sha256 is not None:
        actual = hashlib.sha256(tmp.read_bytes()).hexdigest()
        if actual != sha256:
            tmp.unlink(missing_ok=True)
            raise ValueError(f"{target.name} came out with sha256 {actual[:16]}…, pinned {sha256[:16]}… "
                             "(another onnx version?)")
    os.replace(tmp, target)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4, 5):
        sys.stderr.write("usage: python -m daemon.embedding.lean_graph SOURCE TARGET [SHA256 [MARKER]]\n")
        raise SystemExit(2)
    try:
        derive(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
    finally:
        if len(sys.argv) == 5:
            Path(sys.argv[4]).unlink(missing_ok=True)
