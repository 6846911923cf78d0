"""How the daemon's counters are named for Prometheus (pure: no I/O, no prometheus_client).

`DaemonState.counters` is a `Counter[str]` whose keys are written all over the daemon
(`gossip_rejected_<reason>`, `event_<name>`, `service_<name>_crashes`, …). `counter_family`
maps one key to a metric family and at most one label, following Prometheus conventions:
a `clade_` prefix, `_total` for counters, `_bytes` for byte counts, and a label (not a
name) for the part that varies. Label values are bounded: a reason is kept only if it is
one the code can produce (`KNOWN_REASONS`), anything else (a peer can name its own refusal
reason) is `other`; an event or service name only if it looks like one of ours.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from crypto.envelope import EnvelopeReason
from crypto.membership import Reason

__all__ = ["KNOWN_REASONS", "PREFIX", "CounterName", "counter_family", "label_value", "metric_name"]

PREFIX = "clade_"
_NAME = re.compile(r"[^a-zA-Z0-9_]")
_LABEL_VALUE = re.compile(r"^[a-z][a-z0-9_]{0,47}$")

# Every reason a counter key can carry from this code base: crypto's membership and envelope
# reasons, `RemoteProtocolError`'s (crdt, p2p), the admission's own and the store's rejections.
KNOWN_REASONS: frozenset[str] = frozenset({r.value for r in Reason} | {r.value for r in EnvelopeReason} | {
    "bad_signature", "clock_skew", "equivocation", "forbidden_slot", "invalid", "malformed", "orphan",
    "oversized", "sender_mismatch", "stalled", "truncated", "unknown_version", "not_a_member", "wrong_peer",
    "other_clade", "replayed", "unknown_writer", "too_old", "duplicate",
    # the crossing gates' refusals (promotion.refusal_reason)
    "low_score", "low_confidence", "near_duplicate", "refuted", "too_young", "unproven", "kind",
})

# (key prefix, family, label): the longest prefix first; the rest of the key is the label's value.
_LABELLED: tuple[tuple[str, str, str], ...] = (
    ("hello_refused_by_peer_", "hello_refused_by_peer", "reason"),
    ("revocations_rejected_", "revocations_rejected", "reason"),
    ("gossip_rejected_", "gossip_rejected", "reason"),
    ("sync_rejected_", "sync_rejected", "reason"),
    ("hello_refused_", "hello_refused", "reason"),
    ("promotion_refused_", "promotion_refused", "reason"),
    ("event_", "events", "event"),
)
# Byte counts and traffic get their unit last (Prometheus: `_bytes_total`).
_RENAMED = {
    "gossip_bytes_in": "gossip_received_bytes", "gossip_bytes_out": "gossip_sent_bytes",
    "sync_bytes_in": "sync_received_bytes", "sync_bytes_out": "sync_sent_bytes",
    "gossip_msgs_in": "gossip_received_messages", "gossip_msgs_out": "gossip_sent_messages",
    "sync_msgs_in": "sync_received_messages", "sync_msgs_out": "sync_sent_messages",
}
_SERVICE = re.compile(r"^service_([a-z0-9_]{1,40})_crashes$")


@dataclass(frozen=True, slots=True)
class CounterName:
    """A counter key's metric: `family` without the `clade_` prefix nor the `_total` suffix."""

    family: str
    label: str | None = None
    value: str | None = None

    @property
    def metric(self) -> str:
        """The exposed name of the family (`clade_<family>_total`)."""
        return f"{PREFIX}{self.family}_total"


def metric_name(text: str) -> str:
    """`text` as a metric name part: every character outside [a-zA-Z0-9_] becomes `_`."""
    cleaned = _NAME.sub("_", text)
    return cleaned if cleaned and not cleaned[0].isdigit() else f"_{cleaned}"


def label_value(value: str, *, reason: bool) -> str:
    """A bounded label value: a reason outside `KNOWN_REASONS`, or any value that is not a short
    snake_case word, is `other`."""
    if reason:
        return value if value in KNOWN_REASONS else "other"
    return value if _LABEL_VALUE.match(value) else "other"


def counter_family(key: str) -> CounterName:
    """The metric family (and label) of one `DaemonState.counters` key."""
    for prefix, family, label in _LABELLED:
        if key.startswith(prefix) and len(key) > len(prefix):
            return CounterName(family, label, label_value(key[len(prefix):], reason=label == "reason"))
    service = _SERVICE.match(key)
    if service:
        return CounterName("service_crashes", "service", label_value(service[1], reason=False))
    return CounterName(metric_name(_RENAMED.get(key, key)))
