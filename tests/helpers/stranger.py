"""A py-libp2p host in a test (a stranger or hostile peer) against real golems, and the golems' counters."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import multiaddr
import trio
from libp2p.abc import INetStream
from libp2p.pubsub.gossipsub import PROTOCOL_ID_V11, GossipSub
from libp2p.pubsub.pubsub import Pubsub
from libp2p.tools.anyio_service import background_trio_service

from daemon.p2p.host import GOSSIP_MAX_BYTES
from daemon.testing.harness import Golem
from tests.helpers.polling import eventually_async

WAIT_S = 15.0  # every single wait (a counter to move, a peer to appear) has this deadline
Reply = Callable[[INetStream], Awaitable[None]]


async def call(golem: Golem, method: str, path: str, **kwargs: Any) -> Any:
    """The control API (blocking httpx) off the trio thread: mallory's host must keep running."""
    return await trio.to_thread.run_sync(lambda: golem.call(method, path, **kwargs))


async def counters(golem: Golem) -> Counter[str]:
    return Counter((await call(golem, "GET", "/v1/status"))["counters"])


def plain_pubsub(host: Any) -> tuple[GossipSub, Pubsub]:
    """py-libp2p's own GossipSub and Pubsub, configured as the daemon's but without its gate."""
    router = GossipSub(protocols=[PROTOCOL_ID_V11], degree=6, degree_low=4, degree_high=12, heartbeat_interval=1,
                       adaptive_gossip_enabled=False, spam_protection_enabled=False)
    return router, Pubsub(host, router, strict_signing=True, seen_ttl=600, validation_timeout=10.0,
                          max_inbound_rpc_size=GOSSIP_MAX_BYTES)


@asynccontextmanager
async def hosting(host: Any, router: Any, pubsub: Any, topic: str, handlers: dict[Any, Reply],
                  drain: Callable[[Any], Awaitable[None]]) -> AsyncIterator[None]:
    """Run a test peer's host and GossipSub on 127.0.0.1 with `handlers`, subscribed to `topic`
    (each message to `drain`), and close them in the order docs/design/libp2p.md (pitfall 9) asks."""
    async with host.run([multiaddr.Multiaddr("/ip4/127.0.0.1/tcp/0")]):
        try:
            async with background_trio_service(pubsub), background_trio_service(router):
                await pubsub.wait_until_ready()
                for protocol, handler in handlers.items():
                    host.set_stream_handler(protocol, handler)
                subscription = await pubsub.subscribe(topic)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(drain, subscription)
                    try:
                        yield
                    finally:
                        with trio.CancelScope(shield=True), trio.move_on_after(5):
                            await host.close()
                        nursery.cancel_scope.cancel()
        finally:
            pubsub.seen_messages.stop()


async def wait_until(what: str, predicate: Callable[[], Awaitable[bool]]) -> None:
    """`polling.eventually_async` with these tests' patience (`WAIT_S`)."""
    await eventually_async(predicate, what=what, timeout=WAIT_S, interval=0.02)
