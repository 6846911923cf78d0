"""sd_notify sender: never blocks the event loop, never raises, counts what it drops."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from daemon.service.notify import Notifier


def test_a_full_receiver_queue_drops_and_counts_instead_of_blocking(tmp_path: Path) -> None:
    path = tmp_path / "notify.sock"
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(str(path))  # bound, never read: its queue fills (net.unix.max_dgram_qlen)
    notifier = Notifier(str(path))
    results: list[bool] = []
    done = threading.Event()

    def send_many() -> None:
        results.extend(notifier.send(WATCHDOG=1) for _ in range(2_000))
        done.set()

    sender = threading.Thread(target=send_many, daemon=True)
    sender.start()
    # A blocking sendto would stop at the queue's limit forever; the wait bounds the test.
    assert done.wait(timeout=30), "Notifier.send blocked on a receiver that does not read"
    assert results[0] is True
    assert results.count(False) == notifier.failures > 0
    received = 0
    receiver.setblocking(False)
    while True:
        try:
            assert receiver.recv(64) == b"WATCHDOG=1"
        except BlockingIOError:
            break
        received += 1
    assert received == results.count(True)
    notifier.close()
    receiver.close()


def test_without_a_notify_socket_nothing_is_sent() -> None:
    notifier = Notifier("")
    assert not notifier.enabled
    assert notifier.send(READY=1) is False
    assert notifier.failures == 0
