"""Mutators: the signed ops a replica emits for its own writes.

Each method returns new ops with fresh dots from `next_seq` (which the caller persists in
the same transaction that stores the ops, so a seq is never reused). The caller applies
them with `replica.apply_op` like any other op.
"""

from __future__ import annotations

from collections.abc import Callable

from .body import EntryBody
from .errors import InvalidValue
from .hlc import Timestamp
from .ops import AuthorValue, EndorseValue, EvidenceValue, Op, Signer, SlotKind, Status, make_op

__all__ = ["DAY_MS", "Mutator", "day_of"]

DAY_MS = 86_400_000


def day_of(ts: Timestamp) -> Timestamp:
    """`ts` floored to its UTC day (counter 0): the only time an evidence op carries."""
    return Timestamp(ts.ms - ts.ms % DAY_MS)


class Mutator:
    """Makes ops written by `replica`, signed with `sign`."""

    def __init__(
        self, replica: str, sign: Signer, *, next_seq: Callable[[], int], now: Callable[[], Timestamp]
    ) -> None:
        self.replica = replica
        self._sign = sign
        self._next_seq = next_seq
        self._now = now

    def now(self) -> Timestamp:
        """A fresh timestamp from the injected clock (for bodies the caller builds)."""
        return self._now()

    def _op(self, entry_id: str, slot: SlotKind, value: EntryBody | AuthorValue | EndorseValue | EvidenceValue,
            hlc: Timestamp | None = None) -> Op:
        return make_op(writer=self.replica, seq=self._next_seq(), hlc=hlc or self._now(), entry_id=entry_id,
                       slot=slot, value=value, sign=self._sign)

    def _own(self, body: EntryBody) -> None:
        if body.author != self.replica:
            raise InvalidValue("entry", f"{body.id} was written by {body.author}; only its author may change it")

    def create(self, body: EntryBody, confidence: float) -> list[Op]:
        """A new entry: its body op, then its author slot (active, `confidence`)."""
        self._own(body)
        value = AuthorValue(confidence=confidence)
        return [self._op(body.id, SlotKind.BODY, body, body.created), self._op(body.id, SlotKind.AUTHOR, value)]

    def set_author(self, body: EntryBody, value: AuthorValue) -> Op:
        """Overwrite the author slot (confidence, status, superseded_by)."""
        self._own(body)
        return self._op(body.id, SlotKind.AUTHOR, value)

    def set_confidence(self, body: EntryBody, current: AuthorValue, confidence: float) -> Op:
        return self.set_author(body, AuthorValue(confidence=confidence, status=current.status,
                                                 superseded_by=current.superseded_by))

    def retract(self, body: EntryBody, current: AuthorValue, *, superseded_by: str | None = None) -> Op:
        """Mark the entry retracted (crosses to siblings, unlike a local forget)."""
        return self.set_author(body, AuthorValue(confidence=current.confidence, status=Status.RETRACTED,
                                                 superseded_by=superseded_by or current.superseded_by))

    def endorse(self, body: EntryBody, current: EndorseValue | None, *, confirm: bool) -> Op:
        """Add one confirmation (or contradiction) to this replica's tally for someone else's entry."""
        if body.author == self.replica:
            raise InvalidValue("entry", "a replica cannot endorse its own entry")
        current = current or EndorseValue()
        value = EndorseValue(confirms=current.confirms + int(confirm),
                             contradicts=current.contradicts + int(not confirm))
        return self._op(body.id, SlotKind.ENDORSE, value)

    def evidence(self, body: EntryBody, current: EvidenceValue | None, *, positive: bool) -> Op:
        """Add one outcome (positive or negative) to this replica's evidence tally for an entry,
        its own or another's. The tally only grows: the new op covers `current`. Its HLC is the
        day's (`day_of`), not the moment's: a slot's merge is by seq alone, and the time of an
        outcome is the golem's soma — a sibling learns from the op on which day the tally last
        moved, never when in the day the trade went which way."""
        current = current or EvidenceValue()
        value = EvidenceValue(positive=current.positive + int(positive), negative=current.negative + int(not positive))
        return self._op(body.id, SlotKind.EVIDENCE, value, day_of(self._now()))

    def reissue(self, body: EntryBody, value: EvidenceValue) -> Op:
        """The same evidence tally under a fresh dot (an entry promoted after its outcomes: the
        old dot was seen-and-withheld by siblings), stamped with the day like `evidence`."""
        return self._op(body.id, SlotKind.EVIDENCE, value, day_of(self._now()))

    def republish(self, body: EntryBody, current: AuthorValue) -> list[Op]:
        """Fresh dots for an entry's body and author slot (same values).

        Used when an entry becomes crossable (promotion): siblings may already count the
        old dots as seen-and-withheld, so the entry is re-sent under new dots.
        """
        self._own(body)
        return [self._op(body.id, SlotKind.BODY, body, body.created), self._op(body.id, SlotKind.AUTHOR, current)]
