"""The stranger side of bench_strangers: worker processes that dial a daemon as strangers.

Each worker (`python -m bench.bench_strangers --worker KIND …`, started by `launch_workers`)
runs `--concurrency` dial loops of one kind (garbage hello, silent, held reconnect) with a
fresh Ed25519 identity per stranger, and prints its tally as one JSON line; the bench reads
them back with `collect_workers` and adds them up with `merge_tallies`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import subprocess
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from bench.common import dist
from bench.common.report import ROOT, bench_command

KINDS = ("garbage", "silent", "held")
GARBAGE = b"\x93garbage"
PUBSUB_MARKERS = ("/meshsub/", "/floodsub/")


# -- the stranger side (worker processes) -------------------------------------------------------


def run_worker(args: argparse.Namespace) -> int:
    """One worker process: `--concurrency` dial loops of `--worker` kind until `--seconds` after
    `--start-at`; prints one JSON line (its tally) on stdout."""
    import trio

    tally = trio.run(_worker_main, args)
    print(json.dumps(tally, separators=(",", ":")), flush=True)
    return 0


async def _worker_main(args: argparse.Namespace) -> dict[str, Any]:
    import multiaddr
    import trio
    from libp2p.crypto.ed25519 import create_new_key_pair
    from libp2p.crypto.x25519 import create_new_key_pair as create_x25519_key_pair
    from libp2p.custom_types import TProtocol
    from libp2p.peer.id import ID
    from libp2p.peer.peerinfo import PeerInfo
    from libp2p.protocol_muxer.multiselect import MULTISELECT_PROTOCOL_ID
    from libp2p.protocol_muxer.multiselect_client import MultiselectClient
    from libp2p.protocol_muxer.multiselect_communicator import MultiselectCommunicator
    from libp2p.security.noise.transport import PROTOCOL_ID as NOISE_PROTOCOL_ID
    from libp2p.security.noise.transport import Transport as NoiseTransport
    from libp2p.stream_muxer.yamux.yamux import PROTOCOL_ID as YAMUX_PROTOCOL_ID
    from libp2p.stream_muxer.yamux.yamux import Yamux
    from libp2p.transport.tcp.tcp import TCP
    from libp2p.transport.upgrader import TransportUpgrader

    from crypto import Identity
    from daemon.p2p import messages
    from daemon.p2p.admission import HELLO_PROTOCOL
    from daemon.p2p.frames import close_quietly, encode_frame, read_frame
    from daemon.p2p.host import build_host

    full = multiaddr.Multiaddr(args.target)
    peer = ID.from_base58(full.value_for_protocol("p2p"))
    transport_addr = full.decapsulate(multiaddr.Multiaddr(f"/p2p/{peer}"))
    tcp = TCP()
    hello_proto = TProtocol(HELLO_PROTOCOL)
    frame = encode_frame(GARBAGE)
    errors: Counter[str] = Counter()
    inbound: Counter[str] = Counter()
    first_errors: list[str] = []
    t: dict[str, Any] = {"kind": args.worker, "client": args.client, "attempted": 0, "connected": 0,
                         "refused": 0, "admitted": 0, "replies": Counter(), "open_now": 0, "open_max": 0,
                         "handshake_ms": [], "held_ms": [], "primed": 0}

    async def lean_dial(identity: Identity) -> Any:
        key_pair = create_new_key_pair(identity.seed)
        noise = NoiseTransport(key_pair, noise_privkey=create_x25519_key_pair().private_key)
        upgrader = TransportUpgrader({TProtocol(NOISE_PROTOCOL_ID): noise}, {TProtocol(YAMUX_PROTOCOL_ID): Yamux})
        raw = await tcp.dial(transport_addr)
        try:
            secured = await upgrader.upgrade_security(raw, True, peer)
            return await upgrader.upgrade_connection(secured, peer)
        except BaseException:
            with contextlib.suppress(Exception):
                await raw.close()
            raise

    async def watch_inbound(muxed: Any) -> None:
        """Every stream A opens to us: read its multistream proposal, note the protocol, reset."""
        while True:
            try:
                stream = await muxed.accept_stream()
            except Exception:  # noqa: BLE001 - the connection is gone
                return
            name = "?"
            with trio.move_on_after(1), contextlib.suppress(Exception):
                communicator = MultiselectCommunicator(stream)
                if await communicator.read() == MULTISELECT_PROTOCOL_ID:  # answer the header, read the proposal
                    await communicator.write(MULTISELECT_PROTOCOL_ID)
                    name = await communicator.read()
            inbound[name] += 1
            with contextlib.suppress(Exception):
                await stream.reset()

    async def send_hello(muxed: Any) -> str:
        """Our garbage hello; what came back: refused (a refusal, or the stream/connection closed)."""
        stream = await muxed.open_stream()
        try:
            await MultiselectClient().select_one_of([hello_proto], MultiselectCommunicator(stream))
            await stream.write(frame)
            try:
                reply = messages.decode(await read_frame(stream))
            except EOFError:
                return "closed"
            except Exception as exc:  # noqa: BLE001 - A dropped the connection under us: refused
                return f"closed:{type(exc).__name__}"
            if isinstance(reply, messages.Hello):
                return "hello"
            if isinstance(reply, messages.Refused):
                return f"refused:{reply.reason}"
            return type(reply).__name__
        finally:
            await close_quietly(stream)

    async def lean_session(identity: Identity, action: str) -> None:
        started = trio.current_time()
        t["attempted"] += 1
        muxed = await lean_dial(identity)
        t["connected"] += 1
        t["handshake_ms"].append(round((trio.current_time() - started) * 1000, 2))
        t["open_now"] += 1
        t["open_max"] = max(t["open_max"], t["open_now"])
        connected = trio.current_time()
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(muxed.start)
                await muxed.event_started.wait()
                nursery.start_soon(watch_inbound, muxed)
                reply = ""
                if action == "hello":
                    reply = await send_hello(muxed)
                    t["replies"][reply.split(":")[0] if reply.startswith("closed") else reply] += 1
                    if reply == "hello":
                        t["admitted"] += 1
                # garbage: we close right after the answer; silent and held: until A drops us
                with trio.move_on_after(1.0 if action == "hello" else 10.0):
                    await muxed.event_shutting_down.wait()
                if muxed.event_shutting_down.is_set():
                    t["refused"] += 1
                    t["held_ms"].append(round((trio.current_time() - connected) * 1000, 1))
                elif action == "hello" and reply != "hello":
                    t["refused"] += 1  # answered with a refusal or EOF; we hang up
                nursery.cancel_scope.cancel()
        finally:
            t["open_now"] -= 1
            with contextlib.suppress(Exception), trio.move_on_after(2):
                await muxed.close()

    async def host_session(identity: Identity) -> None:
        """The same garbage hello from a full py-libp2p host built for this identity (the costly way)."""
        t["attempted"] += 1
        host = build_host(identity, mdns=False)
        async with host.run([]):
            try:
                started = trio.current_time()
                await host.connect(PeerInfo(peer, [transport_addr]))
                t["connected"] += 1
                t["handshake_ms"].append(round((trio.current_time() - started) * 1000, 2))
                stream = await host.new_stream(peer, [hello_proto])
                await stream.write(frame)
                try:
                    reply = messages.decode(await read_frame(stream))
                    kind = "hello" if isinstance(reply, messages.Hello) else type(reply).__name__
                except Exception:  # noqa: BLE001 - closed under us: refused
                    kind = "closed"
                t["replies"][kind] += 1
                t["admitted"] += kind == "hello"
                t["refused"] += kind != "hello"
                await close_quietly(stream)
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(5):
                    await host.close()

    async def loop(index: int, deadline: float) -> None:
        held_identity: Identity | None = None
        while trio.current_time() < deadline and (not args.budget or t["attempted"] < args.budget):
            try:
                with trio.fail_after(15):
                    if args.worker == "held":
                        if held_identity is None:  # refused once: held off for 300 s from now on
                            held_identity = Identity.generate()
                            t["attempted"] -= 1  # the priming dial is not part of the storm
                            t["connected"] -= 1
                            t["refused"] -= 1
                            await lean_session(held_identity, "hello")
                            t["primed"] += 1
                            continue
                        await lean_session(held_identity, "nothing")
                    elif args.client == "host":
                        await host_session(Identity.generate())
                    else:
                        await lean_session(Identity.generate(), "hello" if args.worker == "garbage" else "nothing")
            except trio.TooSlowError:
                errors["timeout"] += 1
            except Exception as exc:  # noqa: BLE001 - counted: a refused dial is data, not a crash
                chain = f"{exc!r} {exc.__cause__!r} {getattr(exc.__cause__, '__cause__', None)!r}"
                errors["closed_at_accept" if "handshake read failed" in chain else type(exc).__name__] += 1
                if len(first_errors) < 3:
                    cause = exc.__cause__
                    first_errors.append(f"{exc!r} <- {cause!r} <- {getattr(cause, '__cause__', None)!r}")
                await trio.sleep(0.05)

    await trio.sleep(max(0.0, args.start_at - time.time()))
    cpu0 = _own_cpu()
    wall0 = time.monotonic()
    deadline = trio.current_time() + args.seconds
    async with trio.open_nursery() as nursery:
        for i in range(args.concurrency):
            nursery.start_soon(loop, i, deadline)
    wall = time.monotonic() - wall0  # the storm's active time (it may end early: --budget)
    cpu = _own_cpu() - cpu0
    hs = sorted(t.pop("handshake_ms"))
    held = sorted(t.pop("held_ms"))
    t.update(wall_s=round(wall, 2), cpu_s=round(cpu, 3), errors=dict(errors), first_errors=first_errors,
             inbound_streams=dict(inbound),
             replies=dict(t["replies"]), handshake_ms=dist(hs), held_ms=dist(held))
    return t


def _own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def launch_workers(kind: str, target: str, *, n: int, concurrency: int, seconds: float, start_at: float,
                   client: str = "lean", budget: int = 0) -> list[subprocess.Popen[str]]:
    argv = ["--worker", kind, "--target", target, "--concurrency", str(concurrency), "--seconds", str(seconds),
            "--start-at", f"{start_at:.3f}", "--client", client, "--budget", str(budget // max(1, n))]
    return [subprocess.Popen(bench_command("bench_strangers", *argv), cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(n)]


def collect_workers(procs: Sequence[subprocess.Popen[str]], timeout: float) -> tuple[list[dict[str, Any]], list[str]]:
    tallies: list[dict[str, Any]] = []
    problems: list[str] = []
    for proc in procs:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            problems.append(f"worker {proc.pid} did not finish in {timeout:.0f} s")
        lines = [x for x in stdout.splitlines() if x.startswith("{")]
        if proc.returncode != 0 or not lines:
            problems.append(f"worker {proc.pid} exited {proc.returncode}: {stderr.strip()[-400:]}")
            continue
        tallies.append(json.loads(lines[-1]))
    return tallies, problems


def merge_tallies(tallies: Sequence[dict[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {"workers": len(tallies)}
    for key in ("attempted", "connected", "refused", "admitted", "open_max", "primed", "cpu_s"):
        merged[key] = round(sum(float(t.get(key, 0)) for t in tallies), 3)
    for key in ("errors", "inbound_streams", "replies"):
        total: Counter[str] = Counter()
        for t in tallies:
            total.update(t.get(key, {}))
        merged[key] = dict(total)
    merged["first_errors"] = [e for t in tallies for e in t.get("first_errors", [])][:3]
    merged["wall_s"] = max((float(t["wall_s"]) for t in tallies), default=0.0)
    merged["handshake_ms_p50_by_worker"] = [t["handshake_ms"]["p50"] for t in tallies]
    merged["handshake_ms_p99_by_worker"] = [t["handshake_ms"]["p99"] for t in tallies]
    merged["held_ms_p50_by_worker"] = [t["held_ms"]["p50"] for t in tallies]
    merged["client_cpu_ms_per_conn"] = (round(merged["cpu_s"] * 1000 / merged["connected"], 2)
                                        if merged["connected"] else None)
    return merged


