"""A man page (roff, man(7) macros) generated from an argparse parser (pure: no I/O).

`manpage(parser, …)` walks the parser: its description, global options, and every
subcommand (nested ones too) with its usage line, help and options, so the page cannot
drift from what `clade --help` says. Text is escaped for roff: backslashes, a leading
`.` or `'`, and hyphens in option names (`\\-`, so they copy as ASCII hyphen-minus).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence

__all__ = ["manpage", "roff_escape"]


def roff_escape(text: str) -> str:
    """`text` safe as roff body text: `\\` → `\\e`, `-` → `\\-`, a control character at the start of
    a line neutralised with `\\&`, non-ASCII characters as `\\[uXXXX]` (groff, mandoc)."""
    escaped = text.replace("\\", "\\e").replace("-", "\\-")
    escaped = "".join(c if ord(c) < 128 else f"\\[u{ord(c):04X}]" for c in escaped)
    return "\n".join("\\&" + line if line.startswith((".", "'")) else line for line in escaped.split("\n"))


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help, parser) of each direct subcommand, in declaration order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _options(parser: argparse.ArgumentParser, skip: frozenset[str]) -> list[str]:
    lines: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue
        if action.option_strings and set(action.option_strings) & skip:
            continue
        if action.option_strings:
            metavar = "" if action.nargs == 0 else f" {action.metavar or action.dest.upper()}"
            if action.choices is not None and action.nargs != 0 and action.metavar is None:
                metavar = " {" + ",".join(map(str, action.choices)) + "}"
            head = ", ".join(f"\\fB{roff_escape(s)}\\fR" for s in action.option_strings)
            lines += [".TP", f"{head}{roff_escape(metavar)}"]
        else:
            lines += [".TP", f"\\fI{roff_escape(str(action.metavar or action.dest))}\\fR"]
        lines.append(roff_escape(action.help or ""))
    return lines


def _command(path: Sequence[str], help_text: str, parser: argparse.ArgumentParser,
             skip: frozenset[str]) -> list[str]:
    usage = " ".join(parser.format_usage().removeprefix("usage: ").split())
    lines = [".SS " + roff_escape(" ".join(path)), roff_escape(help_text or parser.description or ""),
             ".PP", ".nf", roff_escape(usage), ".fi"]
    options = _options(parser, skip)
    if options:
        lines += [".RS", *options, ".RE"]
    for name, sub_help, sub in _subparsers(parser):
        lines += _command([*path, name], sub_help, sub, skip)
    return lines


def manpage(parser: argparse.ArgumentParser, *, section: int = 1, date: str, source: str,
            extra: Sequence[tuple[str, str]] = ()) -> str:
    """The page: NAME, SYNOPSIS, DESCRIPTION, OPTIONS, COMMANDS, then `extra` (heading, text)."""
    prog = parser.prog
    global_opts = frozenset(s for a in parser._actions for s in a.option_strings)
    lines = [f'.TH {prog.upper()} {section} "{date}" "{roff_escape(source)}" "User Commands"',
             ".SH NAME", f"{prog} \\- {roff_escape(parser.description or '')}",
             ".SH SYNOPSIS", ".nf", roff_escape(" ".join(parser.format_usage().removeprefix("usage: ").split())),
             ".fi", ".SH OPTIONS", *_options(parser, frozenset()), ".SH COMMANDS",
             roff_escape(f"Every command also takes the global options ({', '.join(sorted(global_opts))}).")]
    skip = global_opts  # documented once, above
    for name, help_text, sub in _subparsers(parser):
        lines += _command([prog, name], help_text, sub, skip)
    for heading, text in extra:
        lines += [f".SH {roff_escape(heading.upper())}", roff_escape(text)]
    return "\n".join(lines) + "\n"
