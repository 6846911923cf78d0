"""Output: progress on stderr, aligned tables on stdout, and the one JSON result line.

A bench's `run()` returns one flat dict holding `machine`, `params`, `total_seconds`, maybe
`failed`, and its measured sections; the table printers read that dict, and `emit` turns it
into the result document of bench/common/__init__.py (the sections go under `results`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = [
    "SCHEMA",
    "add_common_args",
    "at_least",
    "bench_command",
    "disk_row",
    "emit",
    "floats",
    "ints",
    "machine_rows",
    "main_in_workdir",
    "not_empty",
    "out",
    "print_rows",
    "print_table",
    "progress",
    "result_document",
    "section_rows",
    "workdir",
]

SCHEMA = "clade-bench/1"
ROOT = Path(__file__).resolve().parents[2]  # the repository: `python -m bench.<module>` runs from here
_STARTED_UTC = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def progress(msg: str) -> None:
    """A progress line on stderr (stdout holds only the report and the JSON line)."""
    print(msg, file=sys.stderr, flush=True)


def out(line: str = "") -> None:
    """A report line on stdout, flushed (for benches that print figures as they measure them)."""
    print(line, flush=True)


def print_rows(rows: Sequence[tuple[str, str]], cap: int | None = None) -> None:
    """Key/value rows aligned on the longest key (at most `cap` wide: longer keys get a line of
    their own); a key starting with "## " is a section title, underlined."""
    width = max(len(k) for k, _ in rows) + 2
    if cap is not None:
        width = min(cap, width)
    for key, value in rows:
        if key.startswith("## "):
            print(f"\n{key[3:]}")
            print("-" * len(key[3:]))
        elif cap is not None and len(key) >= width:
            print(key)
            print(" " * width + value)
        else:
            print(f"{key:<{width}}{value}")


def print_table(rows: Sequence[tuple[str, str]], cap: int | None = None) -> None:
    """`print_rows` between two blank lines: a bench's whole report."""
    print()
    print_rows(rows, cap)
    print()


def disk_row(d: dict[str, Any]) -> tuple[str, str]:
    """The disk line of a machine section (from `machine_info`'s `disk`)."""
    return ("disk", f"{d.get('device', '?')} ({d.get('fstype', '?')}) on {d.get('mount_point', '?')}, "
                    f"rotational={d.get('rotational', '?')} (as sysfs reports it), model={d.get('model') or '?'}, "
                    f"{d.get('free_gib', '?')} GiB free")


def machine_rows(m: dict[str, Any], *versions: str) -> list[tuple[str, str]]:
    """The start of every report: CPU, kernel / Python, the named package versions (one row),
    memory, and the git HEAD measured."""
    code = m.get("code", {})
    rows = [
        ("## machine", ""),
        ("CPU", f"{m['cpu_model']} ({m['cpu_count']} logical CPUs, {m['cpus_usable']} usable)"),
        ("kernel / Python / SQLite", f"{m['kernel']} / {m['python']} / {m['sqlite']}"),
    ]
    if versions:
        rows.append((" / ".join(versions), " / ".join(str(m["versions"].get(v)) for v in versions)))
    if m.get("mem_gib"):
        rows.append(("memory", f"{m['mem_gib'].get('MemTotal')} GiB total, "
                               f"{m['mem_gib'].get('MemAvailable')} GiB available"))
    rows.append(("code (git HEAD; modified files)",
                 f"{code.get('head')}; {', '.join(code.get('modified', [])) or 'none'}"))
    return rows


def bench_command(module: str, *args: str) -> list[str]:
    """argv that runs `bench.<module>` in a child process (run it with cwd=ROOT)."""
    return [sys.executable, "-m", f"bench.{module}", *args]


def result_document(bench: str, res: dict[str, Any]) -> dict[str, Any]:
    """The result document (schema in bench/common/__init__.py) of a bench's flat result dict."""
    rest = dict(res)
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "bench": bench,
        "command": " ".join([Path(sys.executable).name, "-m", f"bench.bench_{bench}", *sys.argv[1:]]),
        "started_utc": _STARTED_UTC,
        "machine": rest.pop("machine", {}),
        "params": rest.pop("params", {}),
        "total_seconds": rest.pop("total_seconds", None),
        "failed": rest.pop("failed", []),
    }
    if "loadavg_end" in rest:  # machine state, wherever the bench put it
        doc["machine"] = {**doc["machine"], "loadavg_end": rest.pop("loadavg_end")}
    doc["results"] = rest
    return doc


def emit(bench: str, res: dict[str, Any], also_to: Path | None = None) -> dict[str, Any]:
    """Print the result document as the last line of stdout (and write it to `also_to`)."""
    doc = result_document(bench, res)
    line = json.dumps(doc, separators=(",", ":"), default=str)
    if also_to is not None:
        also_to.write_text(line + "\n")
        progress(f"JSON written to {also_to}")
    print(line, flush=True)
    return doc


@contextmanager
def workdir(out_dir: Path | None, prefix: str, *, clash: Callable[[Path], str | None] | None = None,
            base: str | None = None) -> Iterator[Path]:
    """A temporary directory (removed afterwards) or `out_dir` (kept, created if needed).

    `clash(dir)` names what in a given `out_dir` would be overwritten; if it does, the bench
    stops with exit code 2 before measuring anything.
    """
    if out_dir is None:
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
        return
    path = out_dir.expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    problem = clash(path) if clash is not None else None
    if problem:
        print(f"error: {path} already holds {problem}; pick an empty directory", file=sys.stderr)
        raise SystemExit(2)
    yield path


def not_empty(path: Path) -> str | None:
    """A `workdir` clash check: anything at all in the directory."""
    return "files" if any(path.iterdir()) else None


def add_common_args(p: argparse.ArgumentParser, out_help: str | None = None, seed: int = 20_240_601) -> None:
    """`--seed` and (unless `out_help` is None) `--out DIR`, as every bench spells them."""
    p.add_argument("--seed", type=int, default=seed, help=f"RNG seed (default {seed})")
    if out_help is not None:
        p.add_argument("--out", type=Path, default=None, help=out_help)


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse `type`: an int no smaller than `minimum`."""

    def parse(text: str) -> int:
        value = int(text.replace("_", "").replace(",", ""))
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum:,}")
        return value

    parse.__name__ = f"an integer >= {minimum}"
    return parse


def ints(text: str) -> list[int]:
    """An argparse `type`: a comma-separated list of ints ("5,10,20"; empty items skipped)."""
    return [int(x) for x in text.split(",") if x]


def floats(text: str) -> list[float]:
    """An argparse `type`: a comma-separated list of floats ("10,50"; empty items skipped)."""
    return [float(x) for x in text.split(",") if x]


def main_in_workdir(bench: str, args: argparse.Namespace, run: Callable[[argparse.Namespace, Path], dict[str, Any]],
                    report: Callable[[dict[str, Any]], None], prefix: str, *,
                    clash: Callable[[Path], str | None] | None = None, base: str | None = None,
                    json_name: str | None = None) -> int:
    """The body of a bench's `main`: `run(args, dir)` in `workdir(args.out, ...)`, then the table
    (`report`) and the result line (also written to `dir/json_name` when `--out` kept the dir).
    Returns the exit code: 1 if the result names failures, else 0."""
    with workdir(args.out, prefix, clash=clash, base=base) as path:
        res = run(args, path)
    report(res)
    keep = None if args.out is None or json_name is None else path / json_name
    emit(bench, res, also_to=keep)
    return 1 if res.get("failed") else 0


def section_rows(sections: dict[str, dict[str, float]], total_seconds: float) -> list[tuple[str, str]]:
    """The closing rows of a report timed with `machine.Sections`."""
    rows = [("## sections (other = CPU cores used by other processes meanwhile)", "")]
    for name, sec in sections.items():
        rows.append((name, f"{sec['wall_s']:.1f} s wall, own {sec['own_cpu_cores']} cores, "
                           f"other {sec['other_cpu_cores']} cores"))
    rows.append(("total wall clock", f"{total_seconds:.1f} s"))
    return rows


def checks_rows(res: dict[str, Any]) -> list[tuple[str, str]]:
    """The closing rows of a report whose `res` lists its `failed` checks and its `total_seconds`."""
    return [("## checks", ""), ("failed", "; ".join(res["failed"]) or "nothing"),
            ("total wall clock", f"{res['total_seconds']:.1f} s")]
