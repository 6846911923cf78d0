"""clade's benchmarks: one `bench_*.py` module per subject, on the shared harness in `bench.common`.

Run them from the repository root as modules (`make bench` runs them all, one after the other):

    .venv/bin/python -m bench.bench_store            # Grimoire writes, FTS recall, episode appends
    .venv/bin/python -m bench.bench_crdt             # join throughput, delta extraction, bytes per op
    .venv/bin/python -m bench.bench_micro            # pyperf: codec, join, Ed25519, envelope, secretstream
    .venv/bin/python -m bench.bench_recall           # embedding model, hybrid recall, episode vector search
    .venv/bin/python -m bench.bench_recall_options   # the embedding options side by side
    .venv/bin/python -m bench.bench_recall_daemon STORE.db   # POST /v1/memory/search on a running daemon
    .venv/bin/python -m bench.bench_vault            # backup / verify / restore vs raw libsodium, zstd, age
    .venv/bin/python -m bench.bench_api              # the control API over its unix socket
    .venv/bin/python -m bench.bench_clade            # a clade of real daemons on loopback
    .venv/bin/python -m bench.bench_curator          # curator cycles, testaments, the decay ablation
    .venv/bin/python -m bench.bench_styx             # outbox overhead, drain vs raw httpx, search fan-in
    .venv/bin/python -m bench.bench_tui              # the operator TUI in a pty: start, CPU, arrival to the feed
    .venv/bin/python -m bench.bench_rotate           # clade key rotation: owner bundles, live rotations
    .venv/bin/python -m bench.bench_strangers        # stranger storms: CPU per refused connection, sync latency
    .venv/bin/python -m bench.bench_recovery         # kills and a partition: convergence after the last fault

Each prints a table on stdout (progress on stderr), then one JSON line: the result document
described in `bench.common`.
"""
