"""What crosses to Styx and in what shape, pure: layer fan-out, the push body, query results.

Fan-out (the memory architecture's layers; `[styx] vault_enabled / clade_enabled /
lethe_enabled` switch each; the clade and lethe layers are opt-in, off by default):

| what | when | layers |
|---|---|---|
| warning, anti_knowledge, regime_shift | when written | clade, lethe (anonymised) |
| death_reflection | when written | vault (the archive), clade |
| insight, fact, causal_link, heuristic, constraint | the curator cycle that promotes it | clade |
| PLAYBOOK.md snapshot (kind `playbook`) | each curator cycle that changed it | vault |
| preference, strategy_outcome, episode_summary, raw episodes, private or sensitive entries | never | — |

Only what crosses to siblings reaches Styx (the outbox asks the same predicates: public, a
kind that may cross, active, not held, not refuted; a promotable kind once promoted).

Wire (other implementations are tested against it): `POST {url}/v1/styx/entries`, body
`{"golem", "entries": [item…]}`. A private-layer item (vault, clade) is `{"idempotency_key":
"WRITER:SEQ", "id", "kind", "layer", "layers", "content", "confidence", "importance",
"category", "metadata", "provenance", "created_at"}`: `layers` lists every layer it goes to,
`layer` is the first (for servers that read one). The public (lethe) layer gets its own,
anonymised item (`public_item_json`): no author, entry id, provenance, strategy id, tags or
exact time — nothing that names or links back to the golem or its owner (the entry id is a
hash over the author; a `WRITER:SEQ` key names the writer). A PLAYBOOK snapshot has no op
behind it: its key is `GOLEM:playbook-<sha256 of the text, 16 hex>`. An item is built once,
when its cause commits, and stored as JSON text in the outbox: a retried item is
byte-identical.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crdt import Kind
from daemon.grimoire.scoring import SOURCE_DISCOUNT

__all__ = ["LAYERS", "LAYER_DISCOUNT", "PUBLIC_LAYERS", "QueryResult", "at_once", "batch_body", "item_json",
           "layers_for", "parse_query", "playbook_item", "public_item_json", "public_key"]

LAYERS = ("vault", "clade", "lethe")
PUBLIC_LAYERS = frozenset({"lethe"})  # served to anyone: the item is anonymised
AT_ONCE = frozenset({Kind.WARNING, Kind.ANTI_KNOWLEDGE, Kind.REGIME_SHIFT, Kind.DEATH_REFLECTION})
PROMOTED = frozenset({Kind.INSIGHT, Kind.FACT, Kind.CAUSAL_LINK, Kind.HEURISTIC, Kind.CONSTRAINT})
WANTED: dict[Kind, tuple[str, ...]] = {
    Kind.WARNING: ("clade", "lethe"), Kind.ANTI_KNOWLEDGE: ("clade", "lethe"), Kind.REGIME_SHIFT: ("clade", "lethe"),
    Kind.DEATH_REFLECTION: ("vault", "clade"),
    **{kind: ("clade",) for kind in PROMOTED},
}
# A layer's retrieval discount is its provenance's (scoring.SOURCE_DISCOUNT: declared once). The
# architecture's 0.25 for a Styx query is a *confidence* (where its knowledge starts here:
# scoring.EXTERNAL_CONFIDENCE), not a ranking discount.
LAYER_DISCOUNT = {layer: SOURCE_DISCOUNT[layer] for layer in ("vault", "clade", "lethe", "marketplace", "styx")}
MAX_QUERY_RESULTS = 100
MAX_RESULT_CONTENT = 4096


def at_once(kind: Kind) -> bool:
    """Pushed when written (else at the curator cycle that promotes it)."""
    return kind in AT_ONCE


def layers_for(kind: Kind, sensitivity: str, *, enabled: Iterable[str] = LAYERS) -> tuple[str, ...]:
    """The enabled layers an own entry of `kind` goes to, in the table's order (empty: it never
    reaches Styx). Whether it crosses at all yet (held, refuted, not promoted) is the caller's
    question (outbox.OutboxWriter)."""
    if sensitivity != "public":
        return ()
    on = set(enabled)
    return tuple(layer for layer in WANTED.get(kind, ()) if layer in on)


def item_json(*, writer: str, seq: int, layers: Sequence[str], entry: Mapping[str, Any]) -> str:
    """One outbox item for the private layers (vault, clade), as the exact JSON text every
    attempt sends (`entry`: `Entry.to_json()`)."""
    if not layers or PUBLIC_LAYERS & set(layers):
        raise ValueError(f"a private-layer item needs vault or clade layers only, got {list(layers)}")
    item = {
        "idempotency_key": f"{writer}:{seq}",
        "id": entry["id"],
        "kind": entry["kind"],
        "layer": layers[0],
        "layers": list(layers),
        "content": entry["content"],
        "confidence": entry["confidence"],
        "importance": entry["importance"],
        "category": entry["category"],
        "metadata": entry["metadata"],
        "provenance": entry["provenance"],
        "created_at": entry["created_at"],
    }
    return json.dumps(item, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


LETHE_KEY_BYTES = 32
ANONYMOUS = "lethe"  # the `golem` a public-layer request names: no one


def public_key(secret: bytes, writer: str, seq: int) -> str:
    """The public item's idempotency key: stable per cause (Styx deduplicates a retry by it),
    a BLAKE2b keyed with this golem's lethe secret (`Grimoire.lethe_secret`: random, kept in its
    own store, never sent). Unkeyed, anyone who knows a peer id — siblings, LAN peers through
    mDNS, Styx — could hash `peer:1`, `peer:2`, … and link an item to its golem.
    Raises ValueError for a secret of the wrong length."""
    if len(secret) != LETHE_KEY_BYTES:
        raise ValueError(f"public_key: the lethe secret must be {LETHE_KEY_BYTES} bytes, not {len(secret)}")
    mac = hashlib.blake2b(f"{writer}:{seq}".encode(), digest_size=16, key=secret, person=b"clade.lethe")
    return "lethe:" + mac.hexdigest()


def public_item_json(*, secret: bytes, writer: str, seq: int, entry: Mapping[str, Any]) -> str:
    """The anonymised item for the public (lethe) layer. Kept: kind, content, confidence and
    importance (each to one decimal: exact values are a fingerprint), category, the
    tokens/chains/protocols it is about, and the day it was written. Stripped: the author, the
    entry id (a hash over the author), provenance and origin (lineage), strategy id and tags
    (the owner's names), the exact time; its key is keyed (`public_key`), and it travels in a
    request of its own that names no golem (pusher.py). The content itself is the writer's
    text: what it says is the writer's to keep public or not (sensitivity)."""
    key = public_key(secret, writer, seq)
    meta = entry.get("metadata") or {}
    item = {
        "idempotency_key": key,
        "id": key.removeprefix("lethe:"),
        "kind": entry["kind"],
        "layer": "lethe",
        "layers": ["lethe"],
        "content": entry["content"],
        "confidence": round(float(entry["confidence"]), 1),
        "importance": round(float(entry["importance"]), 1),
        "category": entry["category"],
        "metadata": {"tokens": list(meta.get("tokens") or []), "chains": list(meta.get("chains") or []),
                     "protocols": list(meta.get("protocols") or [])},
        "provenance": "lethe",
        "created_at": str(entry["created_at"])[:10],
    }
    return json.dumps(item, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def playbook_item(*, golem: str, text: str, created_at: str) -> tuple[str, str]:
    """A PLAYBOOK.md snapshot for the vault layer: (idempotency key, item JSON text)."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    name = f"playbook-{digest[:16]}"
    key = f"{golem}:{name}"
    item = {"idempotency_key": key, "id": name, "kind": "playbook", "layer": "vault", "layers": ["vault"],
            "content": text,
            "confidence": 1.0, "importance": 0.5, "category": "playbook",
            "metadata": {"sha256": digest, "bytes": len(text.encode())}, "provenance": "self",
            "created_at": created_at}
    return key, json.dumps(item, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def batch_body(golem: str, items: Sequence[str]) -> bytes:
    """The POST body for stored item texts, spliced verbatim (no re-encoding between retries)."""
    golem_json = json.dumps(golem)
    return ('{"golem":' + golem_json + ',"entries":[' + ",".join(items) + "]}").encode()


@dataclass(frozen=True, slots=True)
class QueryResult:
    id: str
    kind: str
    content: str
    confidence: float
    layer: str
    score: float  # the server's, times the layer's discount

    @property
    def provenance(self) -> str:
        return f"styx:{self.layer}"


def parse_query(data: object, *, k: int) -> tuple[list[QueryResult], int]:
    """The usable results of a query answer (at most `k`), and how many were malformed."""
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        return [], 1
    out: list[QueryResult] = []
    bad = 0
    for raw in data["results"][:MAX_QUERY_RESULTS]:
        try:
            layer = str(raw["layer"])
            score = float(raw["score"])
            confidence = float(raw["confidence"])
            if layer not in LAYER_DISCOUNT or not (0 <= confidence <= 1) or score != score:
                raise ValueError(layer)
            result = QueryResult(str(raw["id"])[:64], str(raw["kind"])[:32], str(raw["content"])[:MAX_RESULT_CONTENT],
                                 confidence, layer, score * LAYER_DISCOUNT[layer])
        except (KeyError, TypeError, ValueError):
            bad += 1
            continue
        out.append(result)
    out.sort(key=lambda r: (-r.score, r.id))
    return out[:k], bad
