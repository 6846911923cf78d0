"""Anti-entropy on `/clade/sync/1.0.0`, sans I/O: one state per sibling and direction.

The protocol (delta-interval anti-entropy, Almeida, Shoker, Baquero 2018 §6; see
`crdt.replica`) is pulled by the side that wants to catch up, in rounds:

    asker (PullState)                      responder (ServeState)
      want(my context)          ───▶       WantReceived(context)
                                           … the host extracts ≤ ROUND_DELTAS deltas,
      DeltaArrived(delta)       ◀───       sending each as it comes: delta × ≤ ROUND_DELTAS
                                           (each ≤ 1 MiB, ≤ 4,096 ops)
      … the host joins each delta as it arrives, in order …
      RoundEnded(deltas, …)     ◀───       end(more, responder's context)
      … once every delta is joined, the host reports its new context …
      if more: want(new context) ───▶      …
      else: done                           the asker closes its end: Closed()

    or, at the first want:      ◀───       refused(reason, detail)  (not a member, say hello first)

Backpressure: the responder extracts the next round only when asked, so at most one round
(≤ 4 MiB) is in flight. The asker joins each delta as it arrives, so verifying and joining
the first overlaps extracting and sending the next; its reader keeps reading meanwhile
(Yamux resets a slow reader), holding at most the round. Each delta is a delta-interval
with its own causal context, so joining the deltas that arrived of a round cut short (peer
killed, stream reset) is sound and keeps that progress; the next pull asks from the
context they left, and loses nothing. A responder that keeps saying
"more" while its rounds change nothing is stuck or lying: after STALL_ROUNDS such rounds
the asker gives up (`RemoteProtocolError("stalled")`).

These classes read no clock, touch no stream and never await: messages in, events and
messages out, like h11's `Connection` and automerge's `sync::State`. The store work
(extracting, applying) is the host's, between a state's event and the call that reports
its outcome. `sync.py` is the thin trio loop that drives them over a libp2p stream. The
whole exchange between two in-memory replicas, no network (`serve.answer` takes at most
ROUND_DELTAS deltas; a real host says `more` when it has further ones):

>>> from crdt import (EntryBody, Kind, MemoryBackend, SlotKind, Timestamp, apply_delta, apply_op,
...                   decode_delta, encode_delta, extract_deltas, make_op)
>>> from crypto import Identity, signature_ok
>>> writer = Identity(b"\\x01" * 32)
>>> body = EntryBody(author=writer.peer_id, kind=Kind.WARNING, content="gas above 80 gwei: delay swaps",
...                  created=Timestamp(1_000))
>>> responder, asker = MemoryBackend(), MemoryBackend()
>>> apply_op(responder, make_op(writer=writer.peer_id, seq=1, hlc=body.created, entry_id=body.id,
...                             slot=SlotKind.BODY, value=body, sign=writer.sign))
<Outcome.APPLIED: 'applied'>
>>> pull, serve = PullState(), ServeState()
>>> pull.start(asker.context.copy())
>>> while not pull.done:
...     while (message := pull.next_message()) is not None:      # the want
...         for event in serve.receive(message):                # WantReceived
...             deltas = [encode_delta(d) for d in extract_deltas(responder, event.context)]
...             serve.answer(deltas, more=False, context=responder.context.copy())
...     while (message := serve.next_message()) is not None:     # deltas, then the end
...         for event in pull.receive(message):                 # a DeltaArrived each, then RoundEnded
...             if isinstance(event, DeltaArrived):
...                 delta, rejected = decode_delta(event.delta, signature_ok)
...                 report = apply_delta(asker, delta, rejected=rejected, sender=writer.peer_id)
...             else:
...                 pull.round_applied(asker.context.copy())
>>> asker.body(body.id) == body, asker.context == responder.context, pull.rounds
(True, True, 1)
>>> serve.receive_eof()                                          # the asker closes its end
[Closed()]

Version 2 (`/clade/sync/2.0.0`, `PullState(version=2)` / `ServeState(version=2)`) reconciles
the contexts by their difference (`crdt.summary`) instead of sending them whole. A want
carries the asker's rows (a small context) or its bucket fingerprints; the responder's state
asks the host for its context (`SummaryReceived` → `reconcile(context)`), and, when buckets
differ, asks for their rows (`ask` → the asker's state answers `rows` by itself). The events
the host sees are otherwise the same: `WantReceived` with the asker's context (as far as the
responder has its writers), `RoundEnded` with the responder's whole context, rebuilt from
the rows of its `end` that differ.

Version 3 (`/clade/sync/3.0.0`) is version 2 whose deltas may carry seals (`crdt.seals`). Its
first want also names the writers whose seals the asker lacks (`PullState(seal_asks=…)`, from
`seal_store.seal_asks`); `WantReceived.seal_asks` hands them to the host, which may answer with
one more delta in that round than ROUND_DELTAS: the seals it holds, and no op.

Error contract (h11's): a method raises `RemoteProtocolError` (from `crdt`, its `reason` a
counter label) when the peer broke the protocol — a message out of turn, too many deltas in
a round, a stalled responder — and `LocalProtocolError` when the host called it out of turn.
Nothing else escapes. After either, the state is FAILED and every further call raises
`LocalProtocolError`.
"""

from __future__ import annotations

import secrets
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from crdt import CausalContext, RemoteProtocolError
from crdt.summary import (
    NONCE_BYTES,
    ROWS_AT_MOST,
    AskerView,
    Tagged,
    asker_view,
    bucket_count,
    bucket_of,
    diff_rows,
    differing,
    responder_context,
)

from . import messages
from .errors import LocalProtocolError

__all__ = [
    "MAX_ROUNDS",
    "ROUND_DELTAS",
    "STALL_ROUNDS",
    "Closed",
    "DeltaArrived",
    "PeerRefused",
    "PullPhase",
    "PullState",
    "RoundEnded",
    "ServePhase",
    "ServeState",
    "SummaryReceived",
    "WantReceived",
]

ROUND_DELTAS = 4  # deltas per round at most: one round (≤ 4 MiB) in flight
MAX_ROUNDS = 10_000  # a pull stops after this many rounds (the next sync resumes)
STALL_ROUNDS = 3  # rounds in a row that say "more" but bring nothing: the responder is stuck or lying




def _round_cap(version: int) -> int:
    """Deltas a round may bring: v3 one more, the seals a want asked for."""
    return ROUND_DELTAS + (1 if version >= messages.SYNC_V3 else 0)


# -- events ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class WantReceived:
    """Serve side: the asker wants what it lacks. Extract a round for `context`, then `answer`."""

    context: CausalContext
    seal_asks: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class SummaryReceived:
    """Serve side, v2: a want came as a summary. Call `reconcile` with our causal context."""


@dataclass(frozen=True, slots=True)
class DeltaArrived:
    """Pull side: a delta of the open round. Join it (after the round's earlier ones)."""

    delta: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundEnded:
    """Pull side: a round is complete. Once its deltas are joined, call `round_applied`.

    `deltas`: how many the round brought; `more`: the responder has further deltas;
    `context`: the responder's causal context."""

    deltas: int
    more: bool
    context: CausalContext


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerRefused:
    """Pull side: the responder refused to serve us (the pull is over)."""

    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class Closed:
    """Serve side: the asker closed its end between rounds (the normal end of a pull)."""


PullEvent = DeltaArrived | RoundEnded | PeerRefused
ServeEvent = WantReceived | SummaryReceived | Closed


def _name(message: messages.Message) -> str:
    return type(message).__name__


# -- the asking side ---------------------------------------------------------------------------


class PullPhase(Enum):
    START = "start"  # created: `start(context)` queues the first want
    AWAITING = "awaiting"  # a want is out: deltas, then an end (or a refusal) may arrive
    APPLYING = "applying"  # a round ended: the host applies it and calls `round_applied`
    DONE = "done"  # the responder has nothing more we lack (or MAX_ROUNDS were pulled)
    REFUSED = "refused"  # the responder refused us
    FAILED = "failed"  # a protocol error was raised: the state is dead


class PullState:
    """The asker's side of one pull from one sibling.

    Fields (read them, do not set them):

    - `phase`: where the exchange is (`PullPhase`).
    - `rounds`: rounds completed (an `end` received).
    - `deltas`: delta frames received over all rounds.
    - `round_deltas`: deltas received in the open round (each handed over as it came).
    - `last_want`: the context sent in the last want (a stalled round leaves it unchanged).
    - `stalled`: rounds in a row that said "more" and left our context as it was.
    - `remote_context`: the responder's context from the last `end` (None before one).
    - `more`: the last `end`'s flag (the responder has further deltas).
    - `refusal`: the responder's refusal, if it refused.
    """

    def __init__(self, *, version: int = 1, nonces: Callable[[], bytes] | None = None,
                 seal_asks: Sequence[tuple[str, int]] = ()) -> None:
        if version not in (1, messages.SYNC_V2, messages.SYNC_V3):
            raise LocalProtocolError(f"sync version {version} (1, {messages.SYNC_V2} or {messages.SYNC_V3})")
        if seal_asks and version < messages.SYNC_V3:
            raise LocalProtocolError(f"seal asks need sync version {messages.SYNC_V3}")
        self.version = version
        self._seal_asks = tuple(seal_asks)  # sent with the first want only
        self._round_cap = _round_cap(version)
        self._nonces = nonces or (lambda: secrets.token_bytes(NONCE_BYTES))
        self._sent: Tagged | None = None  # v2: the last want's context, as tagged
        self._buckets = 0  # v2: the last want's bucket count (0: it sent its rows)
        self._answered_ask = False
        self.phase = PullPhase.START
        self.rounds = 0
        self.deltas = 0
        self.round_deltas = 0
        self.last_want: CausalContext | None = None
        self.stalled = 0
        self.remote_context: CausalContext | None = None
        self.more = False
        self.refusal: PeerRefused | None = None
        self._outbox: deque[messages.Message] = deque()

    @property
    def done(self) -> bool:
        """True once the pull is over (caught up, refused, or failed): close the stream."""
        return self.phase in (PullPhase.DONE, PullPhase.REFUSED, PullPhase.FAILED)

    def _expect(self, *phases: PullPhase) -> None:
        if self.phase not in phases:
            raise self._local(f"pull is {self.phase.value}, expected {' or '.join(p.value for p in phases)}")

    def _local(self, detail: str) -> LocalProtocolError:
        """The host called out of turn: like h11 (our side moves to ERROR), the state fails."""
        self.phase = PullPhase.FAILED
        self._outbox.clear()
        return LocalProtocolError(detail)

    def _remote(self, reason: str, detail: str) -> RemoteProtocolError:
        self.phase = PullPhase.FAILED
        self._outbox.clear()
        return RemoteProtocolError(reason, detail)

    def start(self, context: CausalContext) -> None:
        """Begin with our causal context: queues the first want. Raises `LocalProtocolError`
        if already started."""
        self._expect(PullPhase.START)
        self._want(context)

    def _want(self, context: CausalContext) -> None:
        self.last_want = context
        self.round_deltas = 0
        if self.version == 1:
            self._outbox.append(messages.Want(context))
        else:
            sent = self._sent = Tagged.of(context, self._nonces())
            self._answered_ask = False
            if len(sent.rows) <= ROWS_AT_MOST:
                self._buckets = 0
                self._outbox.append(messages.WantSummary(sent.nonce, rows=tuple(sent.rows_in(None)),
                                                         seal_asks=self._seal_asks))
            else:
                self._buckets = bucket_count(len(sent.rows))
                self._outbox.append(messages.WantSummary(sent.nonce, fingerprints=tuple(
                    sent.fingerprints(self._buckets)), seal_asks=self._seal_asks))
            self._seal_asks = ()
        self.phase = PullPhase.AWAITING

    def next_message(self) -> messages.Message | None:
        """The next message to send, or None (nothing to send until more is received)."""
        return self._outbox.popleft() if self._outbox else None

    def receive(self, message: messages.Message) -> list[PullEvent]:
        """Take one message from the responder; returns the events it completes.

        Raises `RemoteProtocolError` for a message out of turn (`malformed`) or a round of
        more than ROUND_DELTAS deltas (`oversized`); `LocalProtocolError` if no reply was due
        because the host has not sent a want (or not reported the last round applied)."""
        if self.phase is PullPhase.FAILED:
            raise LocalProtocolError("the pull already failed")
        if self.phase is not PullPhase.AWAITING:
            raise self._local(f"no reply is due: the pull is {self.phase.value}")
        if isinstance(message, messages.DeltaFrame):
            if self.round_deltas >= self._round_cap:
                raise self._remote("oversized", f"more than {self._round_cap} deltas in one round")
            self.round_deltas += 1
            self.deltas += 1
            return [DeltaArrived(message.delta)]
        if isinstance(message, messages.End) and self.version == 1:
            return self._ended(message.more, message.context)
        if isinstance(message, messages.EndDiff) and self._sent is not None:
            return self._ended(message.more, responder_context(self._sent, message.rows))
        if isinstance(message, messages.Ask) and self._sent is not None:
            if not self._buckets or self._answered_ask or self.round_deltas:
                raise self._remote("malformed", "an ask must come first, once, and only after buckets were sent")
            if any(b >= self._buckets for b in message.buckets):
                raise self._remote("malformed", f"an ask names a bucket ≥ {self._buckets}")
            self._answered_ask = True
            self._outbox.append(messages.Rows(tuple(self._sent.rows_in(message.buckets, self._buckets))))
            return []
        if isinstance(message, messages.Refused):
            self.phase = PullPhase.REFUSED
            self.refusal = PeerRefused(reason=message.reason, detail=message.detail)
            return [self.refusal]
        raise self._remote("malformed", f"unexpected {_name(message)} in a sync round")

    def _ended(self, more: bool, remote: CausalContext) -> list[PullEvent]:
        self.rounds += 1
        self.remote_context = remote
        self.more = more
        self.phase = PullPhase.APPLYING
        return [RoundEnded(deltas=self.round_deltas, more=more, context=remote)]

    def round_applied(self, context: CausalContext) -> None:
        """The host joined the last round's deltas; `context` is our causal context now. Queues the
        next want if the responder said "more" (else the pull is done).

        Raises `RemoteProtocolError("stalled")` when STALL_ROUNDS rounds in a row said "more"
        and changed nothing; `LocalProtocolError` if no round was waiting to be applied."""
        self._expect(PullPhase.APPLYING)
        if not self.more or self.rounds >= MAX_ROUNDS:
            self.phase = PullPhase.DONE
            return
        self.stalled = self.stalled + 1 if context == self.last_want else 0
        if self.stalled >= STALL_ROUNDS:
            raise self._remote("stalled", f"{STALL_ROUNDS} rounds said 'more' and brought nothing new")
        self._want(context)


# -- the serving side --------------------------------------------------------------------------


class ServePhase(Enum):
    IDLE = "idle"  # waiting for a want (or the asker closing its end)
    RECONCILING = "reconciling"  # v2: a summary came; the host calls `reconcile` with its context
    ASKED = "asked"  # v2: we asked for the rows of the buckets that differ
    EXTRACTING = "extracting"  # a want came: the host extracts a round and calls `answer`
    CLOSED = "closed"  # the asker closed its end: the exchange is over
    FAILED = "failed"  # a protocol error was raised: the state is dead


class ServeState:
    """The responder's side of one sync stream opened by one sibling.

    Fields (read them, do not set them):

    - `phase`: where the exchange is (`ServePhase`).
    - `rounds`: rounds answered (an `end` queued).
    - `want`: the asker's context of the current (or last) want, None before the first.
    - `deltas`: delta frames queued over all rounds.
    - `round_deltas`: delta frames queued for the pending want.
    """

    def __init__(self, *, version: int = 1) -> None:
        if version not in (1, messages.SYNC_V2, messages.SYNC_V3):
            raise LocalProtocolError(f"sync version {version} (1, {messages.SYNC_V2} or {messages.SYNC_V3})")
        self.version = version
        self._round_cap = _round_cap(version)
        self._summary: messages.WantSummary | None = None
        self._own: Tagged | None = None
        self._asked: tuple[int, ...] = ()
        self._view: AskerView | None = None
        self.phase = ServePhase.IDLE
        self.rounds = 0
        self.want: CausalContext | None = None
        self.deltas = 0
        self.round_deltas = 0
        self._outbox: deque[messages.Message] = deque()

    @property
    def closed(self) -> bool:
        return self.phase in (ServePhase.CLOSED, ServePhase.FAILED)

    def next_message(self) -> messages.Message | None:
        """The next message to send, or None."""
        return self._outbox.popleft() if self._outbox else None

    def _local(self, detail: str) -> LocalProtocolError:
        """The host called out of turn: like h11 (our side moves to ERROR), the state fails."""
        self.phase = ServePhase.FAILED
        self._outbox.clear()
        return LocalProtocolError(detail)

    def _ready(self) -> None:
        if self.phase is ServePhase.FAILED:
            raise LocalProtocolError("serving already failed")
        if self.phase is ServePhase.CLOSED:
            raise self._local("the asker already closed the stream")
        if self.phase in (ServePhase.EXTRACTING, ServePhase.RECONCILING):
            raise self._local("answer the pending want before receiving more")

    def receive(self, message: messages.Message) -> list[ServeEvent]:
        """Take one message from the asker. A want gives `WantReceived` (v2: `SummaryReceived`,
        then `reconcile`; the asked rows give `WantReceived`); anything else raises
        `RemoteProtocolError("malformed")`. `LocalProtocolError` if a want is still unanswered."""
        self._ready()
        if self.version >= messages.SYNC_V2:
            return self._receive_v2(message)
        if not isinstance(message, messages.Want):
            self.phase = ServePhase.FAILED
            self._outbox.clear()
            raise RemoteProtocolError("malformed", f"expected a want, got {_name(message)}")
        self.want = message.context
        self.round_deltas = 0
        self.phase = ServePhase.EXTRACTING
        return [WantReceived(context=message.context)]

    def _fail(self, detail: str) -> RemoteProtocolError:
        self.phase = ServePhase.FAILED
        self._outbox.clear()
        return RemoteProtocolError("malformed", detail)

    def _receive_v2(self, message: messages.Message) -> list[ServeEvent]:
        if self.phase is ServePhase.ASKED:
            if not isinstance(message, messages.Rows):
                raise self._fail(f"expected the asked rows, got {_name(message)}")
            assert self._summary is not None and self._own is not None
            buckets = len(self._summary.fingerprints)
            if any(bucket_of(tag, buckets) not in self._asked for tag, _, _ in message.rows):
                raise self._fail("rows of a bucket that was not asked for")
            return self._extract(asker_view(self._own, rows=message.rows, asked=self._asked, buckets=buckets))
        if not isinstance(message, messages.WantSummary):
            raise self._fail(f"expected a want, got {_name(message)}")
        self._summary = message
        self.round_deltas = 0
        self.phase = ServePhase.RECONCILING
        return [SummaryReceived()]

    def reconcile(self, context: CausalContext) -> list[ServeEvent]:
        """v2: our causal context, for the summary that came. Returns `WantReceived` when the
        asker's context is known (extract for it, then `answer`), or nothing when the rows of
        the buckets that differ were asked for (`receive` gives `WantReceived` once they come).
        Raises `LocalProtocolError` if no summary is pending."""
        if self.phase is not ServePhase.RECONCILING or self._summary is None:
            raise self._local(f"no summary to reconcile: serving is {self.phase.value}")
        summary = self._summary
        own = self._own = Tagged.of(context, summary.nonce)
        if summary.rows is not None:
            return self._extract(asker_view(own, rows=summary.rows, asked=None))
        self._asked = tuple(differing(own, summary.fingerprints))
        if not self._asked:  # every bucket equal: the asker has exactly our context
            return self._extract(asker_view(own, rows=(), asked=(), buckets=len(summary.fingerprints)))
        self._outbox.append(messages.Ask(self._asked))
        self.phase = ServePhase.ASKED
        return []

    def _extract(self, view: AskerView) -> list[ServeEvent]:
        self._view = view
        self.want = view.context
        self.phase = ServePhase.EXTRACTING
        asks = self._summary.seal_asks if self._summary is not None else ()
        return [WantReceived(context=view.context, seal_asks=asks)]

    def receive_eof(self) -> list[ServeEvent]:
        """The asker closed its end (between rounds: the normal end of a pull)."""
        self._ready()
        self.phase = ServePhase.CLOSED
        return [Closed()]

    def send_delta(self, delta: bytes) -> None:
        """Queue one delta of the pending want's round, as soon as it is extracted.

        Raises `LocalProtocolError` if no want is pending or the round has ROUND_DELTAS."""
        if self.phase is not ServePhase.EXTRACTING:
            raise self._local(f"no want to answer: serving is {self.phase.value}")
        if self.round_deltas >= self._round_cap:
            raise self._local(f"more than {self._round_cap} deltas in one round")
        self._outbox.append(messages.DeltaFrame(delta))
        self.round_deltas += 1
        self.deltas += 1

    def end(self, *, more: bool, context: CausalContext) -> None:
        """End the pending want's round: queues `end(more, context)`.

        Raises `LocalProtocolError` if no want is pending."""
        if self.phase is not ServePhase.EXTRACTING:
            raise self._local(f"no want to answer: serving is {self.phase.value}")
        if self.version == 1:
            self._outbox.append(messages.End(more, context))
        else:
            assert self._view is not None
            self._outbox.append(messages.EndDiff(more, tuple(diff_rows(context, self._view))))
        self.rounds += 1
        self.phase = ServePhase.IDLE

    def answer(self, deltas: Sequence[bytes], *, more: bool, context: CausalContext) -> None:
        """Answer the pending want whole: `send_delta` each, then `end`.

        Raises `LocalProtocolError` if no want is pending or `deltas` exceeds ROUND_DELTAS
        (then nothing is sent: the state fails)."""
        if self.phase is ServePhase.EXTRACTING and self.round_deltas + len(deltas) > self._round_cap:
            raise self._local(f"{len(deltas)} deltas in one round (at most {self._round_cap})")
        for delta in deltas:
            self.send_delta(delta)
        self.end(more=more, context=context)
