"""Micro-benchmarks on pyperf: the CRDT codec and join per op, Ed25519 and envelopes next to raw libsodium.

    .venv/bin/python -m bench.bench_micro [pyperf options: --fast, --rigorous, -o micro.json, ...]
    .venv/bin/python -m bench.bench_micro --debug-single-value       # a quick run (one value each)

pyperf runs each benchmark in fresh worker processes (20 by default, `--fast`: 6) after
calibrating the loop count and warming up, and reports mean +- std dev; it warns when the
machine is too noisy for the figure. The fixtures come from a fixed seed:

- the CRDT bench's workload (`bench.common.ops.build_workload`: 4 writers with real Ed25519 keys)
  of 10,000 ops, built once by the main process and handed to its workers in a temporary
  file as two encoded deltas: its first gossip delta in generation order (<= 4,096 ops and 1 MiB, as
  bench_crdt's "all ops" batches) and a delta of 4,096 author/endorse ops (bench_crdt's
  "author/endorse ops only" batches);
- a member's sealed envelope of a 64 KiB batch (a fixed owner key, certificate and clade key).

Benchmarks (the crdt ones per op, via pyperf's `inner_loops`; the rest per call):

1. `crdt.encode_delta` of the mixed delta;
2. `crdt.decode_delta` with `crypto.signature_ok` and with a verifier that says yes, on the
   mixed and on the author/endorse delta (their difference: the signature check per op);
3. `crdt.apply_delta` of the mixed delta into an empty `MemoryBackend`;
4. `crypto.signature_ok` of one op against raw libsodium (`crypto_sign_open`);
5. `crypto.seal_envelope` / `crypto.open_envelope` of the 64 KiB batch against raw
   `crypto_secretbox_easy` / `crypto_secretbox_open_easy` of the same bytes.

bench_crdt measures the same crdt paths as throughput over a whole 100,000-op workload (and
into SQLite); these are the per-call costs without the I/O. After pyperf's own lines the
main process prints the ratios, then the JSON result line (bench.common; results in us).
"""

from __future__ import annotations

import contextlib
import gc
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import nacl.bindings as sodium
import nacl.utils
import pyperf  # type: ignore[import-untyped]

import crdt
import crypto
from bench.common import emit, machine_info, print_table
from bench.common.ops import always_valid, build_workload
from bench.common.report import machine_rows
from bench.common.workload import encode_batches
from crdt import CausalContext, Delta, MemoryBackend, SlotKind
from crdt.ops import DOMAIN
from crypto import Certificate, Identity, Membership, OwnerKey, open_envelope, seal_envelope
from crypto.identity import public_key_of

SEED = 20_240_601
WORKLOAD_OPS = 10_000
SMALL_OPS = 4_096
ENVELOPE_BATCH = 64 * 1024
NOW_MS = 1_800_000_000_000


@dataclass(frozen=True)
class Fixtures:
    """What every worker builds before timing anything (seeded: the same in every process)."""

    mixed: Delta  # the first gossip delta in generation order (<= 4,096 ops, <= 1 MiB)
    mixed_wire: bytes
    small_wire: bytes  # 4,096 author/endorse ops
    small_ops: int
    signed: bytes  # what one op's signature covers (DOMAIN + signed), the signature, the writer and its key
    signature: bytes
    writer: str
    public_key: bytes
    batch: bytes  # 64 KiB of batch bytes, the member's envelope of them, its keys
    envelope: bytes
    membership: Membership
    sender: Identity
    owner: OwnerKey


def _cache(main_pid: int) -> Path:
    return Path(tempfile.gettempdir()) / f"clade-bench-micro-{main_pid}.msgpack"


def signed_deltas(worker: bool) -> tuple[bytes, bytes]:
    """The encoded mixed and author/endorse deltas. The main process builds them (the workload
    signs 10,000 ops: seconds) and leaves them in a file named after its pid for its workers,
    which decode them instead of building them again (pyperf spawns a worker per value)."""
    if worker:
        with contextlib.suppress(OSError, ValueError):
            mixed_wire, small_wire = msgpack.unpackb(_cache(os.getppid()).read_bytes())
            return bytes(mixed_wire), bytes(small_wire)
    wl = build_workload(WORKLOAD_OPS, SEED)
    mixed_wire = encode_batches(wl.ops)[0][1]
    small = [op for op in wl.ops if op.slot is not SlotKind.BODY][:SMALL_OPS]
    small_wire = crdt.encode_delta(Delta(tuple(small), CausalContext()))
    if not worker:
        path = _cache(os.getpid())
        path.with_suffix(".tmp").write_bytes(msgpack.packb([mixed_wire, small_wire]))
        path.with_suffix(".tmp").replace(path)
    return mixed_wire, small_wire


def fixtures(worker: bool) -> Fixtures:
    """Build the fixtures (decoding the deltas `signed_deltas` left, in a worker)."""
    mixed_wire, small_wire = signed_deltas(worker)
    mixed, dropped = crdt.decode_delta(mixed_wire, crypto.signature_ok)
    small, dropped_small = crdt.decode_delta(small_wire, crypto.signature_ok)
    if dropped or dropped_small or len(small.ops) != SMALL_OPS:
        raise SystemExit(f"the fixtures do not decode: {dropped + dropped_small}, {len(small.ops)} small ops")
    op = small.ops[0]
    owner = OwnerKey(bytes(range(32)), "bench", bytes(range(32, 64)))
    sender = Identity(bytes(range(64, 96)))
    cert = Certificate.issue(owner, sender.peer_id, generation=0, not_before=NOW_MS // 1000 - 60,
                             not_after=NOW_MS // 1000 + 86_400)
    membership = Membership(certificate=cert, owner_public_key=owner.public_key, clade_name=owner.clade_name)
    batch = mixed_wire[:ENVELOPE_BATCH]
    fx = Fixtures(
        mixed=mixed, mixed_wire=mixed_wire, small_wire=small_wire, small_ops=len(small.ops),
        signed=DOMAIN + op.signed, signature=op.signature, writer=op.writer,
        public_key=public_key_of(op.writer), batch=batch,
        envelope=seal_envelope(batch, sender=sender, membership=membership, clade_key=owner.clade_key, now_ms=NOW_MS),
        membership=membership, sender=sender, owner=owner,
    )
    if not crypto.signature_ok(fx.writer, fx.signed, fx.signature):
        raise SystemExit("the fixture op's signature does not verify")
    return fx


def benchmarks(f: Fixtures) -> list[tuple[str, Callable[[], object], int]]:
    """(name, call, ops per call) of every benchmark; pyperf divides the time by the ops."""
    key, owner = f.owner.clade_key, f.owner
    nonce = nacl.utils.random(sodium.crypto_secretbox_NONCEBYTES)
    boxed = sodium.crypto_secretbox_easy(f.batch, nonce, key)
    n_mixed = len(f.mixed.ops)
    return [
        ("crdt encode_delta, all ops (per op)", lambda: crdt.encode_delta(f.mixed), n_mixed),
        ("crdt decode_delta + signature_ok, all ops (per op)",
         lambda: crdt.decode_delta(f.mixed_wire, crypto.signature_ok), n_mixed),
        ("crdt decode_delta, no signature check, all ops (per op)",
         lambda: crdt.decode_delta(f.mixed_wire, always_valid), n_mixed),
        ("crdt decode_delta + signature_ok, author/endorse ops (per op)",
         lambda: crdt.decode_delta(f.small_wire, crypto.signature_ok), f.small_ops),
        ("crdt decode_delta, no signature check, author/endorse ops (per op)",
         lambda: crdt.decode_delta(f.small_wire, always_valid), f.small_ops),
        ("crdt apply_delta -> empty MemoryBackend, all ops (per op)",
         lambda: crdt.apply_delta(MemoryBackend(), f.mixed), n_mixed),
        ("ed25519 crypto.signature_ok", lambda: crypto.signature_ok(f.writer, f.signed, f.signature), 1),
        ("ed25519 raw crypto_sign_open", lambda: sodium.crypto_sign_open(f.signature + f.signed, f.public_key), 1),
        ("envelope seal_envelope, 64 KiB",
         lambda: seal_envelope(f.batch, sender=f.sender, membership=f.membership, clade_key=key, now_ms=NOW_MS), 1),
        ("envelope raw crypto_secretbox_easy, 64 KiB",
         lambda: sodium.crypto_secretbox_easy(f.batch, nacl.utils.random(24), key), 1),
        ("envelope open_envelope, 64 KiB",
         lambda: open_envelope(f.envelope, clade_key=key, owner_public_key=owner.public_key,
                               clade_id=owner.clade_id, now_ms=NOW_MS), 1),
        ("envelope raw crypto_secretbox_open_easy, 64 KiB",
         lambda: sodium.crypto_secretbox_open_easy(boxed, nonce, key), 1),
    ]


RATIOS = (  # (label, numerator, denominator)
    ("signature check per op, all ops (us)", "crdt decode_delta + signature_ok, all ops (per op)",
     "crdt decode_delta, no signature check, all ops (per op)"),
    ("signature check per op, author/endorse ops (us)",
     "crdt decode_delta + signature_ok, author/endorse ops (per op)",
     "crdt decode_delta, no signature check, author/endorse ops (per op)"),
    ("signature_ok / raw crypto_sign_open", "ed25519 crypto.signature_ok", "ed25519 raw crypto_sign_open"),
    ("seal_envelope / raw secretbox", "envelope seal_envelope, 64 KiB", "envelope raw crypto_secretbox_easy, 64 KiB"),
    ("open_envelope / raw secretbox open", "envelope open_envelope, 64 KiB",
     "envelope raw crypto_secretbox_open_easy, 64 KiB"),
)


def summarise(got: dict[str, pyperf.Benchmark]) -> dict[str, Any]:
    """us per call (or per op) of each benchmark, and the ratios (differences for the signature check)."""
    res: dict[str, Any] = {"benchmarks": {}, "ratios": {}}
    for name, b in got.items():
        values = b.get_values()
        res["benchmarks"][name] = {
            "mean_us": round(b.mean() * 1e6, 4), "stdev_us": round(b.stdev() * 1e6, 4) if len(values) > 1 else None,
            "median_us": round(b.median() * 1e6, 4), "values": len(values), "loops": b.get_loops(),
            "inner_loops": b.get_inner_loops(),
        }
    bm = res["benchmarks"]
    for label, num, den in RATIOS:
        if num in bm and den in bm:
            a, b2 = bm[num]["mean_us"], bm[den]["mean_us"]
            res["ratios"][label] = round(a - b2, 3) if label.endswith("(us)") else round(a / b2, 3)
    return res


def print_report(res: dict[str, Any]) -> None:
    """The machine, each benchmark's mean, and the ratios."""
    rows = [*machine_rows(res["machine"], "pyperf", "pynacl", "msgpack"), ("## per call (mean +- std dev)", "")]
    for name, b in res["benchmarks"].items():
        sd = f" +- {b['stdev_us']:,.3f}" if b["stdev_us"] is not None else ""
        rows.append((name, f"{b['mean_us']:,.3f}{sd} us  ({b['values']} values)"))
    rows.append(("## ratios", ""))
    rows += [(label, f"{value:,.3f}") for label, value in res["ratios"].items()]
    print_table(rows)


def main() -> int:
    """Run every benchmark under pyperf; the main process prints the report and the JSON line."""
    started = time.perf_counter()
    runner = pyperf.Runner(program_args=("-m", "bench.bench_micro"))
    args = runner.parse_args()
    f = fixtures(bool(args.worker))
    gc.collect()
    gc.freeze()  # as bench_crdt does: the fixtures' objects are not rescanned by the cyclic GC while timed
    got: dict[str, pyperf.Benchmark] = {}
    for name, call, ops in benchmarks(f):
        bench = runner.bench_func(name, call, inner_loops=ops if ops > 1 else None)
        if bench is not None:
            got[name] = bench
    if args.worker:  # a worker reports its values to the main process through pyperf's pipe
        return 0
    _cache(os.getpid()).unlink(missing_ok=True)
    res = {"machine": machine_info(None, ("pyperf", "pynacl", "msgpack")),
           "params": {"seed": SEED, "workload_ops": WORKLOAD_OPS, "mixed_ops": len(f.mixed.ops),
                      "mixed_bytes": len(f.mixed_wire), "small_ops": f.small_ops, "envelope_batch": len(f.batch),
                      "pyperf_args": {k: v for k, v in vars(args).items() if isinstance(v, (int, float, str, bool))}},
           **summarise(got)}
    res["total_seconds"] = round(time.perf_counter() - started, 1)
    print_report(res)
    emit("micro", res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
