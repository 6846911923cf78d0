"""What crosses to Styx and in what shape, pure: layer fan-out, the push body, query results.

Fan-out (the memory architecture's layers; `[styx] vault_enabled / clade_enabled /
lethe_enabled` switch each off):

| what | when | layers |
|---|---|---|
| warning, regime_shift | at once | clade, lethe |
| insight (confidence ≥ 0.6), heuristic (≥ 0.7) | the curator cycle that promotes it | clade |
| death_reflection | at once | vault (the archive), clade (L1) |
| PLAYBOOK.md snapshot (kind `playbook`) | each curator cycle that changed it | vault |
| raw episodes, positions, preference, strategy_outcome, private or sensitive entries | never | — |

Wire (issue "Styx client", point 8 — other implementations are tested against it):
`POST {url}/v1/styx/entries`, body `{"golem", "entries": [item…]}`, each item
`{"idempotency_key": "WRITER:SEQ", "id", "kind", "layer", "content", "confidence",
"importance", "category", "metadata", "provenance", "created_at"}`. A PLAYBOOK snapshot has
no op behind it: its key is `GOLEM:playbook-<sha256 of the text, 16 hex>` (the same text, the
same key, so Styx stores it once). An item is built once,
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

__all__ = ["LAYER_DISCOUNT", "QueryResult", "at_once", "batch_body", "item_json", "layers_for", "parse_query",
           "playbook_item"]

LAYERS = ("vault", "clade", "lethe")
LAYER_DISCOUNT = {"vault": 1.0, "clade": 0.80, "lethe": 0.50, "marketplace": 0.60, "styx": 0.25}
MAX_QUERY_RESULTS = 100
MAX_RESULT_CONTENT = 4096


def at_once(kind: Kind) -> bool:
    """Pushed when written (else at the curator cycle that promotes it)."""
    return kind in (Kind.WARNING, Kind.REGIME_SHIFT, Kind.DEATH_REFLECTION)


def layers_for(kind: Kind, confidence: float, sensitivity: str, *, enabled: Iterable[str] = LAYERS) -> tuple[str, ...]:
    """The layers an own entry goes to (empty: it never crosses)."""
    if sensitivity != "public":
        return ()
    if kind in (Kind.WARNING, Kind.REGIME_SHIFT):
        wanted: tuple[str, ...] = ("clade", "lethe")
    elif kind is Kind.DEATH_REFLECTION:
        wanted = ("vault", "clade")
    elif (kind is Kind.INSIGHT and confidence >= 0.6) or (kind is Kind.HEURISTIC and confidence >= 0.7):
        wanted = ("clade",)
    else:
        wanted = ()
    on = set(enabled)
    return tuple(layer for layer in wanted if layer in on)


def item_json(*, writer: str, seq: int, layer: str, entry: Mapping[str, Any]) -> str:
    """One outbox item, as the exact JSON text every attempt sends (`entry`: `Entry.to_json()`)."""
    item = {
        "idempotency_key": f"{writer}:{seq}",
        "id": entry["id"],
        "kind": entry["kind"],
        "layer": layer,
        "content": entry["content"],
        "confidence": entry["confidence"],
        "importance": entry["importance"],
        "category": entry["category"],
        "metadata": entry["metadata"],
        "provenance": entry["provenance"],
        "created_at": entry["created_at"],
    }
    return json.dumps(item, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def playbook_item(*, golem: str, text: str, created_at: str) -> tuple[str, str]:
    """A PLAYBOOK.md snapshot for the vault layer: (idempotency key, item JSON text)."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    name = f"playbook-{digest[:16]}"
    key = f"{golem}:{name}"
    item = {"idempotency_key": key, "id": name, "kind": "playbook", "layer": "vault", "content": text,
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
