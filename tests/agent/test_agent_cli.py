"""Agent memory from the command line (the real `clade` script), with and without a daemon,
and the lessons-file parser."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from daemon.agent import memory as am
from daemon.contract.requests import MAX_LESSONS
from daemon.datadir import DataDir
from daemon.errors import UsageError
from daemon.testing.process import DaemonProc
from tests.helpers.cli import clade_subprocess


def clade(data: DataDir, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return clade_subprocess(["--data-dir", str(data.root), *args], input=input)


def doc(proc: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    """The one JSON document on stdout (anything else on stdout fails)."""
    assert proc.returncode == 0, proc.stderr.decode()
    parsed = json.loads(proc.stdout)
    assert isinstance(parsed, dict)
    return parsed


def contents(data: DataDir) -> dict[str, tuple[str, tuple[str, ...]]]:
    """content → (kind, tags) of every entry."""
    with data.open_store() as store:
        return {e.body.content: (e.body.kind.value, e.body.tags) for e in store.list_entries(limit=10_000)}


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


LESSONS_MD = """# Lessons from the first month

## Gas
- WARNING: Arbitrum gas spikes after 14:00 UTC; delay rebalances
* Batch small swaps: each one pays the base fee
+ LESSON: wait two blocks after a large swap before re-quoting

1. FACT: USDC has 6 decimals
2) STRATEGY: the 0.05% tier on ETH/USDC earned 2.4% over March
- [ ] keep 20% of the book in stables
---
lesson: lower case is just text
"""


# -- working memory -----------------------------------------------------------------------


def test_wm_set_show_close_directly_on_the_store(data_dir: DataDir) -> None:
    text = "notes on the ETH range\nLESSON: widen before FOMC\n- WARNING: sequencer stalls\nplain line\n"
    set_doc = doc(clade(data_dir, "--json", "wm", "set", "cli-1", text))
    assert set_doc["session"] == "cli-1" and set_doc["bytes"] == len(text.encode())
    shown = clade(data_dir, "wm", "show", "cli-1")
    assert shown.returncode == 0 and shown.stdout.decode() == text  # text output: the content itself
    assert doc(clade(data_dir, "wm", "show", "cli-1", "--json"))["content"] == text
    piped = "FACT: from stdin ✓\n"
    assert doc(clade(data_dir, "--json", "wm", "set", "cli-2", "-", input=piped.encode()))["bytes"] == len(
        piped.encode())
    closed = doc(clade(data_dir, "--json", "wm", "close", "cli-1"))
    assert len(closed["migrated"]) == 2 and closed["existing"] == []
    found = contents(data_dir)
    assert found["widen before FOMC"] == ("heuristic", ("session:cli-1",))
    assert found["sequencer stalls"] == ("warning", ("session:cli-1",))
    assert "plain line" not in found
    assert doc(clade(data_dir, "--json", "wm", "show", "cli-1"))["content"] == ""
    again = doc(clade(data_dir, "--json", "wm", "close", "cli-1"))
    assert again["migrated"] == [] and len(contents(data_dir)) == 2
    text_close = clade(data_dir, "wm", "close", "cli-2")
    assert text_close.returncode == 0 and b"1 entries migrated" in text_close.stdout
    assert contents(data_dir)["from stdin ✓"] == ("fact", ("session:cli-2",))


@pytest.mark.parametrize(("args", "stdin", "needle"), [
    (("wm", "set", "a/b", "x"), None, b"session 'a/b' is not a valid name"),
    (("wm", "show", ".hidden"), None, b"is not a valid name"),
    (("wm", "set", "ok", "bell \x07"), None, b"U+0007"),
    (("wm", "set", "ok", "-"), b"x" * (64 * 1024 + 1), b"65536"),
    (("wm", "set", "ok", "-"), b"\xff\xfe", b"not valid UTF-8"),
])
def test_wm_refusals_exit_2_and_write_nothing(data_dir: DataDir, args: tuple[str, ...], stdin: bytes | None,
                                             needle: bytes) -> None:
    proc = clade(data_dir, *args, input=stdin)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr and proc.stderr.startswith(b"clade: error: ") and proc.stdout == b""
    assert doc(clade(data_dir, "--json", "wm", "show", "ok"))["content"] == ""


# -- flush ----------------------------------------------------------------------------------


def test_flush_files_directly_on_the_store(data_dir: DataDir, tmp_path: Path) -> None:
    document = write(tmp_path / "flush.json", json.dumps({"session": "f-1", "facts": [
        {"content": "flushed fact one", "memory_type": "fact"},
        {"content": "flushed warning", "memory_type": "warning", "metadata": {"tags": ["gas"]}}]}))
    first = doc(clade(data_dir, "--json", "flush", document))
    assert first["session"] == "f-1" and first["created"] == 2 and len(first["ids"]) == 2
    assert contents(data_dir)["flushed warning"] == ("warning", ("gas", "session:f-1"))
    retry = doc(clade(data_dir, "--json", "flush", document))
    assert retry["ids"] == first["ids"] and retry["created"] == 0
    lines = write(tmp_path / "facts.jsonl", '{"content": "jsonl fact a"}\n\n{"content": "jsonl fact b", '
                                            '"memory_type": "heuristic"}\n')
    made = doc(clade(data_dir, "--json", "flush", lines, "--session", "f-2"))
    assert made["created"] == 2
    assert contents(data_dir)["jsonl fact b"] == ("heuristic", ("session:f-2",))
    text = clade(data_dir, "flush", lines, "--session", "f-2")
    assert text.returncode == 0 and text.stdout.decode().split()[:2] == made["ids"]
    assert b"0 stored, 2 stored before" in text.stdout


@pytest.mark.parametrize(("name", "text", "extra", "needle"), [
    ("bad.jsonl", '{"content": "ok 1"}\n{"content": "ok 2"}\n{"content": "x", "importance": 3}\n', ("--session", "s"),
     "bad.jsonl:3: importance"),
    ("bad.jsonl", '{"content": "ok 1"}\nnot json\n', ("--session", "s"), "bad.jsonl:2: not JSON"),
    ("bad.jsonl", '{"content": "ok 1"}\n{"content": "e", "memory_type": "episode"}\n', ("--session", "s"),
     "bad.jsonl:2: memory_type episode"),
    ("bad.jsonl", '{"content": "ok 1"}\n', (), "need --session"),
    ("bad.jsonl", '{"content": "ok 1"}\n', ("--session", "no/slash"), "not a valid name"),
    # Blank content breaks the schema now: named by validation (was the entry rules' "facts[1]: content").
    ("bad.json", '{"session": "s", "facts": [{"content": "ok 1"}, {"content": "   "}]}', (),
     "facts.1.content: must not be empty"),
    ("bad.json", '{"session": "s", "facts": [{"content": "ok 1"}, {"content": "x", "confidence": -1}]}', (),
     "facts.1.confidence"),
    ("bad.json", '{"session": "s", "facts": []}', (), "facts"),
    ("bad.json", '{"session": "s", "facts": [{"content": "ok 1"}]}', ("--session", "t"), "differs from --session"),
])
def test_bad_flush_files_exit_2_and_write_nothing(data_dir: DataDir, tmp_path: Path, name: str, text: str,
                                                 extra: tuple[str, ...], needle: str) -> None:
    proc = clade(data_dir, "flush", write(tmp_path / name, text), *extra)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr.decode()
    assert contents(data_dir) == {}


# -- lessons --------------------------------------------------------------------------------


def test_lessons_import_markdown_then_again(data_dir: DataDir, tmp_path: Path) -> None:
    path = write(tmp_path / "lessons.md", LESSONS_MD)
    imported = doc(clade(data_dir, "--json", "lessons", "import", path))
    assert imported["created"] == 7 and imported["skipped"] == 0 and imported["file"] == path
    assert contents(data_dir) == {
        "Arbitrum gas spikes after 14:00 UTC; delay rebalances": ("warning", ()),
        "Batch small swaps: each one pays the base fee": ("heuristic", ()),
        "wait two blocks after a large swap before re-quoting": ("heuristic", ()),
        "USDC has 6 decimals": ("fact", ()),
        "the 0.05% tier on ETH/USDC earned 2.4% over March": ("strategy_outcome", ()),
        "keep 20% of the book in stables": ("heuristic", ()),
        "lesson: lower case is just text": ("heuristic", ()),
    }
    again = clade(data_dir, "lessons", "import", path)
    assert again.returncode == 0 and b"0 lessons imported, 7 imported before" in again.stdout
    assert len(contents(data_dir)) == 7


def test_lessons_import_jsonl(data_dir: DataDir, tmp_path: Path) -> None:
    path = write(tmp_path / "seed.jsonl", json.dumps({"content": "Aave v3 e-mode raises LTV for correlated assets",
                                                      "memory_type": "fact", "importance": 0.8,
                                                      "metadata": {"protocols": ["aave"]}}) + "\n")
    assert doc(clade(data_dir, "--json", "lessons", "import", path))["created"] == 1
    with data_dir.open_store() as store:
        (entry,) = store.list_entries()
    assert entry.body.kind.value == "fact" and entry.body.importance == 0.8 and entry.body.protocols == ("aave",)


@pytest.mark.parametrize(("name", "raw", "needle"), [
    ("l.md", b"# ok\n- fine\n- LESSON:\n", "l.md:3: content: must not be empty"),
    ("l.md", b"- fine\n- has \x00 NUL\n", "l.md:2: content: must not contain NUL"),
    ("l.md", b"- fine\n- bad \xff byte\n", "l.md:2: not valid UTF-8"),
    ("l.md", b"- fine\n- " + b"y" * 5000 + b"\n", "l.md:2: content: must be at most 4096 bytes"),
    ("l.md", b"# only a heading\n\n", "no lessons"),
    ("l.jsonl", b'{"content": "fine"}\n[1, 2]\n', "l.jsonl:2: expected a JSON object"),
    ("l.jsonl", b'{"content": "fine"}\n{"content": "x", "memory_type": "rumour"}\n', "l.jsonl:2: memory_type"),
])
def test_bad_lessons_exit_2_with_the_line_and_write_nothing(data_dir: DataDir, tmp_path: Path, name: str,
                                                           raw: bytes, needle: str) -> None:
    (tmp_path / name).write_bytes(raw)
    proc = clade(data_dir, "lessons", "import", str(tmp_path / name))
    assert proc.returncode == 2 and needle in proc.stderr.decode(), proc.stderr
    assert contents(data_dir) == {}


def test_init_with_lessons(tmp_path: Path) -> None:
    lessons = write(tmp_path / "seed.md", LESSONS_MD)
    data = DataDir(tmp_path / "fresh")
    made = doc(clade(data, "--json", "init", "--lessons", lessons))
    assert made["lessons"]["created"] == 7
    assert len(contents(data)) == 7
    text = clade(DataDir(tmp_path / "fresh2"), "init", "--lessons", lessons)
    assert text.returncode == 0 and b"7 lessons imported" in text.stdout
    bad = write(tmp_path / "bad.md", "- fine\n- WARNING:\n")
    refused = clade(DataDir(tmp_path / "never"), "init", "--lessons", bad)
    assert refused.returncode == 2 and b"bad.md:2:" in refused.stderr
    assert not (tmp_path / "never").exists()  # checked before anything was created


# -- through a running daemon -------------------------------------------------------------


def test_cli_goes_through_the_daemon(data_dir: DataDir, tmp_path: Path) -> None:
    daemon = DaemonProc(data_dir)
    try:
        def written() -> int:
            return int(daemon.request("GET", "/v1/status").json()["counters"].get("event_entry_written", 0))

        assert doc(clade(data_dir, "--json", "wm", "set", "d-1", "FACT: via the daemon\n"))["bytes"] == 21
        assert daemon.request("GET", "/v1/working-memory/d-1").json()["content"] == "FACT: via the daemon\n"
        daemon.request("PUT", "/v1/working-memory/d-2", json={"content": "set through the API"})
        assert clade(data_dir, "wm", "show", "d-2").stdout == b"set through the API\n"
        closed = doc(clade(data_dir, "--json", "wm", "close", "d-1"))
        assert len(closed["migrated"]) == 1 and written() == 1
        facts = write(tmp_path / "f.json", json.dumps({"session": "d-1", "facts": [{"content": "daemon flush"}]}))
        assert doc(clade(data_dir, "--json", "flush", facts))["created"] == 1 and written() == 2
        lessons = write(tmp_path / "l.md", "- WARNING: daemon lesson\n- another\n")
        assert doc(clade(data_dir, "--json", "lessons", "import", lessons))["created"] == 2 and written() == 4
        big = write(tmp_path / "big.md", "".join(f"- lesson {i} " + "z" * 3000 + "\n" for i in range(400)))
        too_big = clade(data_dir, "lessons", "import", big)
        assert too_big.returncode == 2 and b"split the file" in too_big.stderr
        over = clade(data_dir, "wm", "set", "d-1", "-", input=b"x" * (64 * 1024 + 1))
        assert over.returncode == 2 and b"65536" in over.stderr
        assert written() == 4
    finally:
        assert daemon.stop() == 0
    assert contents(data_dir)["via the daemon"] == ("fact", ("session:d-1",))
    assert contents(data_dir)["daemon lesson"] == ("warning", ())


# -- the parser ---------------------------------------------------------------------------


def test_parse_lessons_markdown_details() -> None:
    raw = ("\ufeff# Title\r\n\r\n- LESSON: crlf and bom\r\n   * FACT:   spaced   \r\n===\r\n10. numbered\r\n"
           "-\r\n").encode()
    lessons = am.parse_lessons(raw, name="x.md")
    assert [(le.line, le.memory.memory_type, le.memory.content) for le in lessons] == [
        (3, "heuristic", "crlf and bom"), (4, "fact", "spaced"), (6, "heuristic", "numbered")]


@pytest.mark.parametrize(("raw", "name", "fmt", "kind"), [
    (b'{"content": "a"}\n', "seed", "auto", "insight"),  # no suffix: the first line decides
    (b"- a\n", "seed", "auto", "heuristic"),
    (b'{"content": "a"}\n', "seed.md", "jsonl", "insight"),  # --format wins over the suffix
    (b'{"content": "a"}\n', "seed.txt", "auto", "heuristic"),  # markdown: the line is the text
])
def test_parse_lessons_format_detection(raw: bytes, name: str, fmt: str, kind: str) -> None:
    (lesson,) = am.parse_lessons(raw, name=name, fmt=fmt)
    assert lesson.memory.memory_type == kind


def test_parse_lessons_refuses_too_many() -> None:
    raw = "".join(f"- lesson {i}\n" for i in range(MAX_LESSONS + 1)).encode()
    with pytest.raises(UsageError, match="at most 4096"):
        am.parse_lessons(raw, name="many.md")


@pytest.mark.parametrize(("line", "expected"), [
    ("LESSON: a", ("heuristic", "a")),
    ("  - WARNING:b ", ("warning", "b")),
    ("* STRATEGY: c", ("strategy_outcome", "c")),
    ("FACT:", ("fact", "")),
    ("Fact: d", None),
    ("xLESSON: e", None),
    ("-LESSON: f", None),
])
def test_tagged_line(line: str, expected: tuple[str, str] | None) -> None:
    found = am.tagged_line(line)
    assert (None if found is None else (found[0].value, found[1])) == expected
