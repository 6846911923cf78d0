"""Benchmark the operator TUI: the real `clade tui` in a pseudo-terminal on a loopback clade.

    .venv/bin/python -m bench.bench_tui [--quick] [--idle S] [--rate N] [--burst S] [--arrivals N]

Two golems (`daemon.testing.harness.LoopbackClade`); `clade tui --read-only` runs on golem 0
in a 120×40 pty (TERM=xterm-256color) whose output a thread drains and keeps. Measured:

1. Cold start: from `Popen` to the first full screen (the header's `daemon: up` badge and the
   siblings title `1 connected of …` both drawn), median of 3 starts.
2. TUI CPU (utime+stime of its process from /proc) while idle, and while golem 0 writes
   `--rate` entries/s for `--burst` s (each an `entry_written` event in the feed); the rate
   achieved is reported beside it.
3. Arrival: an entry written on golem 1 until its id is drawn in the TUI's feed, N times;
   the floor is the same arrival seen by a plain SSE client of golem 0 (`EventLog`), so the
   TUI's own share is the difference.

Prints progress to stderr, a table to stdout, then the JSON result line (bench.common).
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import statistics
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import machine_info, machine_rows, print_table, progress
from bench.common.daemon import CLADE
from bench.common.machine import CLK_TCK, proc_cpu_ticks
from bench.common.report import add_common_args, main_in_workdir
from daemon.testing.harness import EventLog, Golem, LoopbackClade


class Terminal:
    """`clade tui` in a pty; everything it draws is kept (escape codes removed) for searching."""

    def __init__(self, data_dir: Path) -> None:
        leader, follower = pty.openpty()
        os.set_blocking(leader, False)
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
        self.started = time.monotonic()
        self.proc = subprocess.Popen([CLADE, "--data-dir", str(data_dir), "tui", "--read-only"], stdin=follower,
                                     stdout=follower, stderr=follower, env=env, close_fds=True)
        os.close(follower)
        self.leader = leader
        self.text = ""
        self._cond = threading.Condition()
        self._stop = False
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        while not self._stop:
            if not select.select([self.leader], [], [], 0.1)[0]:
                continue
            try:
                chunk = os.read(self.leader, 1 << 16)
            except OSError:
                return
            with self._cond:
                self.text = (self.text + chunk.decode(errors="replace").replace("\x1b", ""))[-2_000_000:]
                self._cond.notify_all()

    def wait_for(self, *needles: str, timeout: float = 60) -> float:
        """Seconds since start until every needle has been drawn."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not all(n in self.text for n in needles):
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise TimeoutError(f"{needles} not drawn in {timeout} s")
                self._cond.wait(left)
        return time.monotonic() - self.started

    def cpu_s(self) -> float:
        return proc_cpu_ticks(self.proc.pid) / CLK_TCK

    def kill(self) -> None:
        """Stop it whatever state it is in (a bench that fails must not leave a TUI running)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self._stop:
            self._stop = True
            os.close(self.leader)

    def quit(self) -> int:
        os.write(self.leader, b"q")
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._stop = True
        os.close(self.leader)
        return code


def write(golem: Golem, content: str, kind: str = "insight") -> str:
    return str(golem.call("POST", "/v1/memory", json={"content": content, "memory_type": kind})["id"])


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    started = time.perf_counter()
    res: dict[str, Any] = {"machine": machine_info(work), "params": {
        "idle_s": args.idle, "rate": args.rate, "burst_s": args.burst, "arrivals": args.arrivals}}
    clade = LoopbackClade(work, 2)
    terms: list[Terminal] = []
    try:
        clade.start_all()
        g0, g1 = clade.golems
        starts = []
        for i in range(3):
            term = Terminal(g0.data.root)
            terms.append(term)
            starts.append(term.wait_for("daemon: up", "1 connected of"))
            progress(f"cold start {i + 1}: {starts[-1]:.2f} s")
            if i < 2:
                assert term.quit() == 0
        res["cold_start_s"] = {"median": round(statistics.median(starts), 3), "all": [round(s, 3) for s in starts]}

        time.sleep(2.0)  # let the first polls settle before the idle window
        c0, t0 = term.cpu_s(), time.monotonic()
        time.sleep(args.idle)
        res["idle"] = {"seconds": args.idle, "cpu_pct": round(100 * (term.cpu_s() - c0) / (time.monotonic() - t0), 2)}
        progress(f"idle: {res['idle']['cpu_pct']} % of a core")

        c0, t0 = term.cpu_s(), time.monotonic()
        n = 0
        last = ""
        while time.monotonic() - t0 < args.burst:
            due = t0 + n / args.rate
            if due > time.monotonic():
                time.sleep(due - time.monotonic())
            last = write(g0, f"burst entry {n}: gas on L2 spikes when the sequencer stalls")
            n += 1
        wall = time.monotonic() - t0
        term.wait_for(last, timeout=60)
        drawn = time.monotonic() - t0
        res["burst"] = {"events": n, "events_per_s": round(n / wall, 1), "seconds": round(wall, 2),
                        "cpu_pct": round(100 * (term.cpu_s() - c0) / drawn, 2),
                        "last_drawn_after_s": round(drawn - wall, 3)}
        progress(f"burst: {res['burst']}")

        watcher = EventLog(g0.socket).start()
        tui_ms, floor_ms = [], []
        for i in range(args.arrivals):
            t = time.monotonic()
            entry = write(g1, f"arrival {i}: a sibling's warning about oracle lag", "warning")
            watcher.wait_for(lambda name, d, e=entry: name == "entries_received" and e in d.get("ids", []),
                             timeout=60)
            floor_ms.append((time.monotonic() - t) * 1000)
            term.wait_for(entry, timeout=60)
            tui_ms.append((time.monotonic() - t) * 1000)
        watcher.close()
        res["arrival_ms"] = {"tui_median": round(statistics.median(tui_ms), 1), "tui_max": round(max(tui_ms), 1),
                             "sse_floor_median": round(statistics.median(floor_ms), 1),
                             "tui_share_median": round(statistics.median(a - b for a, b in zip(tui_ms, floor_ms,
                                                                                                strict=True)), 1)}
        progress(f"arrival: {res['arrival_ms']}")
        res["quit_status"] = term.quit()
    finally:
        for terminal in terms:
            terminal.kill()
        clade.close()
    res["failed"] = [] if res.get("quit_status") == 0 else ["clade tui did not quit with status 0"]
    res["total_seconds"] = round(time.perf_counter() - started, 1)
    return res


def report(res: dict[str, Any]) -> None:
    rows = machine_rows(res["machine"])
    cs, idle, burst, arr = res["cold_start_s"], res["idle"], res["burst"], res["arrival_ms"]
    rows += [("## clade tui (120×40 pty, read-only, 2-golem loopback clade)", ""),
             ("cold start to first full screen", f"median {cs['median']} s ({', '.join(map(str, cs['all']))})"),
             ("CPU idle", f"{idle['cpu_pct']} % of one core over {idle['seconds']} s"),
             ("CPU with the feed busy", f"{burst['cpu_pct']} % of one core at {burst['events_per_s']} events/s "
                                        f"({burst['events']} events; last drawn {burst['last_drawn_after_s']} s "
                                        "after the burst)"),
             ("sibling write -> TUI feed row", f"median {arr['tui_median']} ms (max {arr['tui_max']} ms); "
                                               f"SSE floor {arr['sse_floor_median']} ms; TUI's own share "
                                               f"{arr['tui_share_median']} ms"),
             ("quit status", str(res["quit_status"])),
             ("total wall clock", f"{res['total_seconds']} s")]
    print_table(rows)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="short windows (a smoke run)")
    p.add_argument("--idle", type=float, default=10.0, help="idle window, seconds")
    p.add_argument("--rate", type=float, default=100.0, help="events per second during the burst")
    p.add_argument("--burst", type=float, default=10.0, help="burst length, seconds")
    p.add_argument("--arrivals", type=int, default=10, help="sibling writes timed to the TUI")
    add_common_args(p, out_help="keep the golems' data dirs in DIR")
    args = p.parse_args()
    if args.quick:
        args.idle, args.burst, args.arrivals = 3.0, 3.0, 3
    return main_in_workdir("tui", args, run, report, "clade-bench-tui-")


if __name__ == "__main__":
    raise SystemExit(main())
