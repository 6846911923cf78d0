"""Withheld dots: a writer's seqs whose ops will never cross, declared in its own gossip.

A golem's private ops (and the ops it superseded before they were published) still take
seqs, so without more a sibling's context has a gap in that writer's row (a dot cloud)
until it pulls from the writer directly: only the writer's served context row covers them.
Such a gap reads as lag (`behind`, the context in the state digest) though no op is missing.

The writer's gossip therefore declares them. When it publishes the ops of its seqs
`(since, top]` that pass its sync gate, it sends with them its *withheld* dots: every seq
in `(since, top]` that is **not** the dot of a published op (`withheld_seqs`), i.e. seqs
of ops the gate holds back (private, never crossing, held) and of ops already superseded
by a later op of the same writer (which the later op replaces). It never declares the dot
of an op it publishes, so a crossing op lost in gossip is never covered by any
declaration: its dot stays missing until anti-entropy fetches it, from any sibling.

The receiver merges a declaration only for the authenticated sender's own row (a relay
cannot declare another writer's seqs: the envelope is signed by its sender), and refuses
one that covers the dot of an op in the same message (`declared_withheld`), so a published
op that is refused on the way in (clock skew) is never marked seen by its own message.
The sender is the authority on its own seqs here exactly as in anti-entropy, where its
served row is merged whole.

Withheld is final: a withheld op never crosses under its old dot. An entry that becomes
crossable later (promotion) is re-issued under fresh dots (`Mutator.republish`), exactly
as anti-entropy already assumes when it serves the writer's row covering those dots.

On the wire a declaration is the gossip delta's context field (`codec`), sent empty before
this: `[[sender, vv, [seq, …]]]`, the set of withheld seqs as one context row (vv is 0
unless the set starts at seq 1). A receiver that predates it decodes the field and ignores
it (gossip joined ops only), so no version change was needed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .context import CausalContext, Dot
from .ops import Op

__all__ = ["WITHHELD_PER_MESSAGE", "Gap", "declared_withheld", "gap", "withheld_context", "withheld_seqs"]

# Seqs declared per gossip message at most: 4,096 × ≤ 9 bytes stays well within the slack the
# publisher leaves under the delta's byte cap, and far under the codec's cloud cap.
WITHHELD_PER_MESSAGE = 4096


def withheld_seqs(since: int, top: int, published: Iterable[int]) -> list[int]:
    """The writer's seqs in `(since, top]` that are not `published` (ascending): the dots it
    may declare withheld when it gossips the ops `published` of that range."""
    sent = set(published)
    return [seq for seq in range(since + 1, top + 1) if seq not in sent]


def withheld_context(writer: str, seqs: Iterable[int]) -> CausalContext:
    """A declaration as a context holding exactly the dots `(writer, seq)` of `seqs`."""
    ctx = CausalContext()
    for seq in seqs:
        ctx.add(Dot(writer, seq))
    return ctx


def declared_withheld(context: CausalContext, sender: str, ops: Iterable[Op]) -> CausalContext | None:
    """What a receiver may mark seen from a gossip message of `sender` carrying `context`
    and `ops`: `sender`'s own row (rows of other writers are ignored), or None if that row
    covers the dot of an op in the same message: an honest writer never declares a dot it
    publishes (that op's dot is seen only if the op is joined), so the declaration is refused
    whole. Built by merging the row, never by walking its seqs: a claimed vv costs nothing."""
    row = context.restricted([sender])
    if any(op.writer == sender and op.dot in row for op in ops):
        return None
    return row


@dataclass(frozen=True, slots=True)
class Gap:
    """How two replicas differ, as an operator reads it (`GET /v1/peers`).

    - `behind`: ops the sibling holds that we lack and that it would send us;
    - `ahead`: ops we hold that it lacks and that we would send it (`sendable`);
    - `withheld`: dots one side has seen and the other has not whose ops will never cross
      between them (private, held or superseded ops), both ways: no op is missing for those.
    """

    behind: int
    ahead: int
    withheld: int


def gap(local: CausalContext, remote: CausalContext, *, complete: bool, refused: int, sendable: int) -> Gap:
    """The gap after a pull from a sibling whose context is `remote`, ours being `local` now.

    `complete`: the pull's last round said nothing more was left, so every dot of `remote`
    we still lack is one it did not send us (withheld), but for the `refused` ops of the pull
    (still missing ops: the next pull brings them again). If not complete, every dot we lack
    counts as behind. `sendable`: how many ops we hold that it lacks pass our own sync gate
    (`replica.sendable`); the rest of what it lacks is withheld on our side.
    """
    missing_in = local.missing_count(remote)
    behind = min(missing_in, refused) if complete else missing_in
    missing_out = remote.missing_count(local)
    ahead = min(missing_out, sendable)
    return Gap(behind, ahead, (missing_in - behind) + (missing_out - ahead))
