"""The embedding process: the model and its runtime (ONNX Runtime, tokenizers; fastembed only
for MPNet and hub models) live here, never in the daemon, so a daemon whose model was unloaded
holds none of them. With the bundled MiniLM loaded it holds ~135 MiB (`minilm`).

    python -m daemon.embedding.host MODEL_DIR

Started by `remote.ModelHost` on first need, stopped when the model is unloaded. It loads vector
spaces on request through `embedder.get_embedder` (the pinned sha256 checks, `ModelIntegrityError`
with its message when a space cannot load) and embeds texts. Wire (`frames`): requests on stdin,
replies on the stdout it was started with; fd 1 is then pointed at stderr, so nothing a library
prints can corrupt the replies.

    {"id", "op": "load", "space", "low"}           -> {"id", "info": [model, version, preprocess, dim]}
    {"id", "op": "embed", "space", "texts", "low"} -> {"id", "rows", "dim", "data": float32 bytes}
    any failure                                    -> {"id", "error": str, "integrity": bool}

After a batch (more than one text) the freed heap is handed back to the kernel
(`release_free_memory`), and the daemon starts this process with `MALLOC_ARENA_MAX=2`: without
both, the activations of the largest batch ever run stayed resident (bench/bench_footprint.py).

Up to two embeddings run at once (`Embedder`'s slots, as in process): requests at normal priority
run on two normal threads, those marked `low` (the daemon's background embedder) on one thread
at nice +`BACKGROUND_NICE`: a query never queues behind a backlog batch, and a backlog batch
takes only the CPU the rest leaves.

It exits at once when stdin ends: the daemon closed it (unload, shutdown) or died (the kernel
closes a dead process's pipes). `PR_SET_PDEATHSIG` is not used: it fires when the *thread*
that started the child exits, and the daemon starts it from a worker thread that may. SIGINT
is ignored (a Ctrl-C at `clade run` reaches the whole process group: the daemon stops it).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

import numpy as np

from daemon.embedding.catalogue import ModelIntegrityError
from daemon.embedding.embedder import get_embedder
from daemon.embedding.frames import read_frame, write_frame
from daemon.native_memory import release_free_memory
from daemon.thread_priority import lower_thread_priority

__all__ = ["handle", "serve"]


def handle(model_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """The reply to one request (never raises: a failure is a reply with `error`)."""
    reply: dict[str, Any] = {"id": request.get("id")}
    try:
        op, space = request.get("op"), str(request.get("space"))
        if op == "load":
            info = get_embedder(model_dir, space).info
            reply["info"] = [info.model, info.model_version, info.preprocess_hash, info.dim]
        elif op == "embed":
            texts = request.get("texts")
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                raise ValueError("`texts` must be a list of strings")
            matrix = np.ascontiguousarray(get_embedder(model_dir, space).embed(texts), dtype=np.float32)
            reply.update(rows=int(matrix.shape[0]), dim=int(matrix.shape[1]), data=matrix.tobytes())
        else:
            raise ValueError(f"unknown op {op!r}")
    except ModelIntegrityError as exc:
        reply.update(error=str(exc), integrity=True)
    except Exception as exc:  # noqa: BLE001 - every failure is the caller's to see, not this process's end
        reply.update(error=f"{type(exc).__name__}: {exc}", integrity=False)
    return reply


def serve(model_dir: Path, requests: IO[bytes], replies: IO[bytes]) -> None:
    """Answer requests until `requests` ends (then return at once: running work is abandoned)."""
    normal = ThreadPoolExecutor(2, thread_name_prefix="embed")
    low = ThreadPoolExecutor(1, thread_name_prefix="embed-low", initializer=lower_thread_priority)
    writing = threading.Lock()

    def answer(request: dict[str, Any]) -> None:
        reply = handle(model_dir, request)
        with writing:
            write_frame(replies, reply)
        if reply.get("rows", 0) > 1:
            # A batch's activations are freed to glibc, which keeps the pages: ~50-500 MiB that
            # stayed resident for the process's life. Trimmed after the reply is sent (~10-20 ms
            # the caller does not wait for); a single query's are too few to matter.
            release_free_memory()

    while (request := read_frame(requests)) is not None:
        (low if request.get("low") else normal).submit(answer, request)


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        sys.stderr.write("usage: python -m daemon.embedding.host MODEL_DIR\n")
        raise SystemExit(2)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # fd 1 is the daemon's stderr from here: stray prints cannot corrupt a reply
    sys.stdout = sys.stderr
    try:
        serve(Path(argv[0]), sys.stdin.buffer, replies)
    except Exception as exc:  # noqa: BLE001 - a broken pipe or frame: the daemon sees this process end
        sys.stderr.write(f"clade embedding process: {type(exc).__name__}: {exc}\n")
        sys.stderr.flush()
        os._exit(1)
    os._exit(0)  # not sys.exit: threads still embedding must not hold the exit up


if __name__ == "__main__":
    main(sys.argv[1:])
