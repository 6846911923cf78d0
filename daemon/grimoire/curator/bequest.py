"""Writing a testament and inheriting one: the I/O around testament.py.

`bequest` picks the entries (testament.select: the germline only, ≤ 2,048, the death
reflection and warnings first) and collects each one's signed body and author ops from the
store. Both ways an heir inherits go through it: `export_testament` signs its document with
the golem's key and writes it as a vault stream (crypto/vault.py) to the clade key and the
owner — the same recipients as a backup; `successor_document` reads a predecessor's backup
(`clade restore --as-successor`) and verifies every op again by its author's key.

`inherit` decrypts, checks the golem's signature and every op's (testament.decode), refuses a
testament of another clade, and only then applies the ops in one store transaction with
provenance `inherited`, local confidence min(original, base × 0.85^(N−1)) and the generation
recorded; the death reflection keeps its bloodstain (a body field, so the boost applies).
Anything wrong — a flipped byte, a bad signature, another clade — imports nothing.

Trust follows the author, not the path (docs/design/security.md, "inheritance"): a dying golem
bequeaths no sibling entry it holds *unverified* (trust.py's quarantine: it did not believe
it), and an heir takes only its lineage as inherited — the predecessor's own entries and what
the predecessor itself inherited (generation ≥ 2). Other siblings' entries the predecessor
held arrive as what they are, a sibling's entry (provenance `clade`, local arrival now): the
heir's own quarantine and author trust judge them, and they can never be reissued under the
heir's name (crossing.py reissues validated *inherited* entries only). So a compromised
member's entry cannot be laundered into an heir's lineage and relayed as the heir's own.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from crdt import CausalContext, Delta, Op, Sensitivity, SlotKind, Verifier, open_op
from crypto.identity import signature_ok
from crypto.vault import DecryptingReader, EncryptingWriter, VaultError, VaultKeys

from ..belief import Belief
from ..store import Grimoire
from ..store import LocalIdentity as Signer
from ..trust import TrustPolicy
from . import testament
from .cycle import live_entries, unverified_ids

__all__ = ["BequestReport", "InheritReport", "bequest", "export_testament", "inherit", "open_testament",
           "read_testament", "successor_document"]

MAX_FILE_BYTES = testament.MAX_TESTAMENT_BYTES + 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class BequestReport:
    path: str
    entries: int
    warnings: int
    reflection_id: str | None
    bytes: int


@dataclass(frozen=True, slots=True)
class InheritReport:
    golem: str
    entries: int  # inherited: the lineage (the predecessor's own and what it inherited)
    applied_ops: int
    generations: dict[int, int]
    siblings: int = 0  # other siblings' entries it held: imported as sibling entries, quarantined here


def _trusted(writer: str, message: bytes, signature: bytes) -> bool:
    return True  # ops in grimoire.db were verified when they arrived


def _ops_of(store: Grimoire, entry_id: str, verify: Verifier = _trusted) -> tuple[Op, ...]:
    rows = store.connection.execute(
        "SELECT writer, signed, signature FROM ops WHERE entry_id = ? AND slot IN (?, ?) ORDER BY slot",
        (entry_id, int(SlotKind.BODY), int(SlotKind.AUTHOR))).fetchall()
    return tuple(open_op(w, bytes(s), bytes(sig), verify) for w, s, sig in rows)


def _items(store: Grimoire, ids: Sequence[str], generation: dict[str, int],
           verify: Verifier = _trusted) -> list[testament.TestamentItem]:
    items = []
    for entry_id in ids:
        ops = _ops_of(store, entry_id, verify)
        if ops and ops[0].slot is SlotKind.BODY:
            items.append(testament.TestamentItem(generation.get(entry_id, 0) + 1, ops))
    return items


def _evidence(belief: Belief | None) -> tuple[float, float, bool]:
    """(positive, negative, refuted) of a pooled belief: own outcomes plus siblings' weighted evidence."""
    if belief is None:
        return 0.0, 0.0, False
    return (belief.own_positive + belief.clade_positive, belief.weighted_negative, belief.refuted)


def bequest(store: Grimoire, *, golem: str, clade_id: str, now_ms: int, reflection_id: str | None = None,
            verify: Verifier = _trusted, trust: TrustPolicy | None = None) -> testament.TestamentDocument:
    """What an heir of `golem` inherits from `store`, as an (unsigned) testament document:
    `testament.select` over every live entry the golem believes (no sibling entry it holds
    unverified under `trust`, the default policy if None), the death reflection `reflection_id`
    first. A reflection that does not pass the barrier (private) is left out and not named."""
    live = live_entries(store)
    doubted = unverified_ids(store, [e.id for e in live], now_ms=now_ms, policy=trust or TrustPolicy())
    live = [e for e in live if e.id not in doubted]
    rows = {r[0]: (Sensitivity(r[1]), int(r[2]), int(r[3])) for r in store.connection.execute(
        "SELECT id, sensitivity, inherited_generation, contradicts FROM entries "
        "WHERE archived = 0 AND status = 'active'")}
    pooled = store.beliefs([e.id for e in live], trust or TrustPolicy(), now_ms=now_ms)
    cands = [testament.TestamentCandidate(
        e.id, e.kind, e.local_confidence, e.keep_score(e.local_confidence, now_ms), e.confirms, rows[e.id][2],
        rows[e.id][0], *_evidence(pooled.get(e.id))) for e in live if e.id in rows]
    chosen = testament.select(cands, first=[reflection_id] if reflection_id else [])
    items = _items(store, chosen, {i: g for i, (_, g, _) in rows.items()}, verify)
    named = reflection_id if reflection_id in {it.entry_id for it in items} else None
    return testament.TestamentDocument(golem, clade_id, now_ms, named, tuple(items))


def successor_document(store: Grimoire, *, golem: str, clade_id: str, now_ms: int) -> testament.TestamentDocument:
    """What a successor inherits from its predecessor's backup (`clade restore --as-successor`;
    `store` is the backup's grimoire.db): `bequest`, the predecessor's newest death reflection
    first; every op is verified again by its author's key."""
    row = store.connection.execute(
        "SELECT id FROM entries WHERE author = ? AND kind = 'death_reflection' AND archived = 0 AND status = 'active' "
        "ORDER BY stored_ms DESC, id LIMIT 1", (golem,)).fetchone()
    return bequest(store, golem=golem, clade_id=clade_id, now_ms=now_ms, reflection_id=None if row is None else row[0],
                   verify=signature_ok)


def export_testament(
    store: Grimoire,
    identity: Signer,
    *,
    clade_id: str,
    clade_keys: Sequence[bytes],
    x25519_recipients: Sequence[bytes],
    out: Path,
    now_ms: int,
    reflection_id: str | None = None,
    trust: TrustPolicy | None = None,
) -> BequestReport:
    """Write the testament (`bequest`, `reflection_id` first) to `out` atomically (a temp file
    renamed into place)."""
    if not clade_keys and not x25519_recipients:
        raise ValueError("a testament needs a recipient: join a clade first (the clade key and the owner)")
    doc = bequest(store, golem=identity.peer_id, clade_id=clade_id, now_ms=now_ms, reflection_id=reflection_id,
                  trust=trust)
    plain = testament.encode(doc, identity.sign)
    tmp = out.with_name(f".{out.name}.tmp")
    with tmp.open("wb") as fh:
        with EncryptingWriter(fh, golem=identity.peer_id, created_ms=now_ms, clade_keys=list(clade_keys),
                              x25519_recipients=list(x25519_recipients)) as vault:
            vault.write(plain)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(out)
    kinds = dict(store.connection.execute("SELECT id, kind FROM entries WHERE archived = 0 AND status = 'active'"))
    warnings = sum(1 for it in doc.items if kinds.get(it.entry_id) in testament.ALWAYS)
    return BequestReport(str(out), len(doc.items), warnings, doc.reflection_id, out.stat().st_size)


def read_testament(path: Path, keys: VaultKeys) -> testament.TestamentDocument:
    """Decrypt and verify a testament file. Raises `TestamentError` (nothing else) when it cannot be trusted."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise testament.TestamentError(f"{path} is {size} bytes: larger than any testament")
        with path.open("rb") as fh:
            return _open(fh, keys, str(path))
    except OSError as exc:
        raise testament.TestamentError(f"cannot read {path}: {exc.strerror or exc}") from None


def open_testament(data: bytes, keys: VaultKeys, *, what: str) -> testament.TestamentDocument:
    """`read_testament` for a testament file's bytes (one downloaded from Styx's vault)."""
    if len(data) > MAX_FILE_BYTES:
        raise testament.TestamentError(f"{what} is {len(data)} bytes: larger than any testament")
    return _open(io.BytesIO(data), keys, what)


def _open(fh: BinaryIO, keys: VaultKeys, what: str) -> testament.TestamentDocument:
    try:
        reader = DecryptingReader(fh, keys)
        plain = reader.read(MAX_FILE_BYTES)
        if reader.read(1):
            raise testament.TestamentError(f"{what} decrypts to more than any testament holds")
        reader.drain()
    except VaultError as exc:
        raise testament.TestamentError(f"cannot decrypt {what}: {exc}") from None
    return testament.decode(plain, signature_ok)


def inherit(store: Grimoire, doc: testament.TestamentDocument, *, clade_id: str, local_replica: str,
            now_ms: int, via_archive: bool = False) -> InheritReport:
    """Import a verified testament of this clade. Raises `TestamentError` for another clade's."""
    if doc.clade_id != clade_id:
        raise testament.TestamentError(
            f"this testament belongs to clade {doc.clade_id}, not to this golem's ({clade_id}); nothing imported")
    if doc.golem == local_replica:
        raise testament.TestamentError("a golem cannot inherit its own testament; nothing imported")
    ops = tuple(op for item in doc.items for op in item.ops)
    generations: dict[int, int] = {}
    siblings = 0
    # Two transactions (the ops, then the discount): a crash between them leaves verified
    # entries held at a sibling's 0.4, and running `inherit` again finishes the job.
    report = store.apply_delta(Delta(ops, CausalContext()), local_replica=local_replica, sender=doc.golem)
    with store._transaction() as conn:
        for item in doc.items:
            row = conn.execute("SELECT confidence, provenance, author FROM entries WHERE id = ?",
                               (item.entry_id,)).fetchone()
            if row is None or row[1] == "self":
                continue
            if item.generation == 1 and row[2] != doc.golem:  # another sibling's: not lineage (module docstring)
                siblings += 1
                continue
            value = testament.inherited_confidence(float(row[0]), item.generation, via_archive=via_archive)
            conn.execute(
                "UPDATE entries SET provenance = 'inherited', local_confidence = ?, decay_base = NULL, "
                # held: a private prior until validated here (daemon/grimoire/crossing.py)
                "decay_anchor_ms = ?, inherited_generation = ?, crossing_hold = 'inherited' WHERE id = ?",
                (value, now_ms, item.generation, item.entry_id))
            generations[item.generation] = generations.get(item.generation, 0) + 1
    return InheritReport(doc.golem, sum(generations.values()), report.applied, generations, siblings)
