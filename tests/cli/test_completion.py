"""Shell completion (shtab) and the man page, both generated from the CLI's parser, checked
by the real tools: `bash -n`, completion in a real bash, groff's warnings, and the install
script writing them under a DESTDIR."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from daemon.cli.main import build_parser
from daemon.cli.manpage import manpage, roff_escape
from tests.helpers.cli import REPO, clade_subprocess

BASH = shutil.which("bash")
needs_bash = pytest.mark.skipif(BASH is None, reason="no bash on PATH")


def _commands() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return set(sub.choices)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = clade_subprocess(["completion", "bash"])
    assert run.returncode == 0, run.stderr
    path = tmp_path_factory.mktemp("completion") / "clade.bash"
    path.write_bytes(run.stdout)
    return path


def _complete(script: Path, line: str) -> list[str]:
    """What bash offers for `line` (the cursor at its end), through the script's own function."""
    assert BASH is not None
    program = (f'source "{script}"\n'
               f'COMP_LINE={line!r}; COMP_POINT=${{#COMP_LINE}}\n'
               'read -ra COMP_WORDS <<< "$COMP_LINE"\n'
               '[[ "$COMP_LINE" == *" " ]] && COMP_WORDS+=("")\n'
               'COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n'
               'fn=$(complete -p clade | sed -E "s/.* -F ([^ ]+) .*/\\1/")\n'
               '"$fn" clade "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"\n'
               'printf "%s\\n" "${COMPREPLY[@]}"\n')
    run = subprocess.run([BASH, "--norc", "--noprofile", "-c", program], capture_output=True, text=True,
                         timeout=30, check=False)
    assert run.returncode == 0, run.stderr
    return [w for w in run.stdout.split("\n") if w]


@needs_bash
def test_bash_accepts_the_script_and_completes_subcommands(bash_script: Path) -> None:
    assert BASH is not None
    syntax = subprocess.run([BASH, "-n", str(bash_script)], capture_output=True, text=True, timeout=30, check=False)
    assert syntax.returncode == 0, syntax.stderr
    registered = subprocess.run([BASH, "--norc", "-c", f'source "{bash_script}"; complete -p clade'],
                                capture_output=True, text=True, timeout=30, check=False)
    assert registered.returncode == 0 and " -F " in registered.stdout and registered.stdout.rstrip().endswith(" clade")
    offered = _complete(bash_script, "clade ")
    assert set(offered) == _commands()
    assert {"run", "mcp", "completion", "manpage", "tui", "remember"} <= set(offered)
    assert _complete(bash_script, "clade compl") == ["completion"]
    assert _complete(bash_script, "clade completion ") == ["bash", "zsh"]
    assert "--data-dir" in _complete(bash_script, "clade run --data")
    assert _complete(bash_script, "clade wm ") == ["show", "set", "close"]


def test_zsh_script_and_a_bad_shell() -> None:
    run = clade_subprocess(["completion", "zsh"])
    assert run.returncode == 0 and run.stdout.startswith(b"#compdef clade")
    zsh = shutil.which("zsh")
    if zsh is not None:
        checked = subprocess.run([zsh, "-n"], input=run.stdout, capture_output=True, timeout=30, check=False)
        assert checked.returncode == 0, checked.stderr
    bad = clade_subprocess(["completion", "fish"])
    assert bad.returncode == 2 and b"invalid choice: 'fish'" in bad.stderr and not bad.stdout


def test_roff_escape() -> None:
    assert roff_escape("--data-dir") == "\\-\\-data\\-dir"
    assert roff_escape("a\\b") == "a\\eb"
    assert roff_escape(".TH x\n'quote\nok") == "\\&.TH x\n\\&'quote\nok"
    assert roff_escape("/ip4/…/tcp") == "/ip4/\\[u2026]/tcp"


def test_manpage_of_a_small_parser() -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="tool", description="Does things.")
    parser.add_argument("--verbose", action="store_true", help="say more")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    go = sub.add_parser("go", help="go somewhere")
    go.add_argument("where", metavar="PLACE", help="the .place")
    go.add_argument("--speed", choices=["slow", "fast"], help="how fast")
    page = manpage(parser, date="2026-01-02", source="tool 1", extra=[("Exit status", "0 ok")])
    assert page == "\n".join([
        '.TH TOOL 1 "2026-01-02" "tool 1" "User Commands"', ".SH NAME", "tool \\- Does things.",
        ".SH SYNOPSIS", ".nf", "tool [\\-h] [\\-\\-verbose] COMMAND ...", ".fi", ".SH OPTIONS",
        ".TP", "\\fB\\-h\\fR, \\fB\\-\\-help\\fR", "show this help message and exit",
        ".TP", "\\fB\\-\\-verbose\\fR", "say more", ".SH COMMANDS",
        "Every command also takes the global options (\\-\\-help, \\-\\-verbose, \\-h).",
        ".SS tool go", "go somewhere", ".PP", ".nf", "tool go [\\-h] [\\-\\-speed {slow,fast}] PLACE", ".fi",
        ".RS", ".TP", "\\fIPLACE\\fR", "the .place", ".TP", "\\fB\\-\\-speed\\fR {slow,fast}", "how fast", ".RE",
        ".SH EXIT STATUS", "0 ok"]) + "\n"


def test_man_page_documents_every_command() -> None:
    run = clade_subprocess(["manpage"])
    assert run.returncode == 0, run.stderr
    page = run.stdout.decode("ascii")  # everything non-ASCII is escaped
    assert page.startswith(".TH CLADE 1 ")
    for name in _commands():
        assert f".SS clade {roff_escape(name)}\n" in page, name
    assert ".SS clade wm close\n" in page  # nested subcommands too
    assert "\\fB\\-\\-data\\-dir\\fR" in page and ".SH EXIT STATUS" in page
    groff = shutil.which("groff")
    if groff is None:
        pytest.skip("no groff to check the page's syntax")
    checked = subprocess.run([groff, "-man", "-z", "-ww"], input=run.stdout, capture_output=True, timeout=60,
                             check=False)
    assert checked.returncode == 0 and not checked.stderr, checked.stderr.decode()


@needs_bash
def test_install_script_writes_completion_and_man_page(tmp_path: Path, bash_script: Path) -> None:
    clade = Path(sys.executable).with_name("clade")
    run = subprocess.run([str(REPO / "systemd" / "install-shell-files.sh"), str(clade), str(tmp_path)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "usr/share/bash-completion/completions/clade").read_bytes() == bash_script.read_bytes()
    assert (tmp_path / "usr/share/zsh/vendor-completions/_clade").read_text().startswith("#compdef clade")
    assert (tmp_path / "usr/share/man/man1/clade.1").read_text().startswith(".TH CLADE 1 ")
    failed = subprocess.run([str(REPO / "systemd" / "install-shell-files.sh"), "/nonexistent/clade",
                             str(tmp_path / "second")], capture_output=True, text=True, timeout=60, check=False)
    assert failed.returncode != 0
    assert not (tmp_path / "second/usr/share/man/man1/clade.1").exists()  # nothing half-installed
