"""Three themes, one per terminal colour depth, and the rule that picks one.

`clade-16` uses the terminal's own 16 ANSI colours (so it follows the user's palette over
SSH: textual #1022), `clade-256` only colours of the xterm 256 palette (nothing to dither),
`clade-truecolor` anything. `clade-mono` is greys only; every state on screen also carries a
word, so the TUI reads the same without colour (NO_COLOR is honoured too).
"""

from __future__ import annotations

from collections.abc import Mapping

from textual.theme import Theme

__all__ = ["THEMES", "pick_theme"]

_ANSI_VARS = {
    "ansi-background": "ansi_black",
    "ansi-foreground": "ansi_white",
    "block-cursor-foreground": "ansi_black",
    "block-cursor-background": "ansi_white",
    "input-cursor-background": "ansi_white",
    "input-cursor-foreground": "ansi_black",
    "border-blurred": "ansi_bright_black",
    "footer-key-foreground": "ansi_bright_cyan",
}

THEMES: dict[str, Theme] = {
    "clade-16": Theme(
        name="clade-16", ansi=True, dark=True,
        primary="ansi_blue", secondary="ansi_cyan", accent="ansi_magenta",
        warning="ansi_yellow", error="ansi_red", success="ansi_green",
        foreground="ansi_default", background="ansi_default", surface="ansi_default",
        panel="ansi_default", boost="ansi_default", variables=_ANSI_VARS,
    ),
    "clade-256": Theme(  # xterm-256 palette entries only (#5f87af is colour 67, …)
        name="clade-256", dark=True,
        primary="#5f87af", secondary="#5fafaf", accent="#af87d7",
        warning="#d7af5f", error="#d75f5f", success="#87af5f",
        foreground="#d0d0d0", background="#1c1c1c", surface="#262626", panel="#303030",
    ),
    "clade-truecolor": Theme(
        name="clade-truecolor", dark=True,
        primary="#4f8fd6", secondary="#43b5b0", accent="#b48ead",
        warning="#e5b567", error="#e06c75", success="#8fc46a",
        foreground="#dadfe6", background="#151a21", surface="#1d242d", panel="#26303b",
    ),
    "clade-mono": Theme(
        name="clade-mono", dark=True,
        primary="#a8a8a8", secondary="#bcbcbc", accent="#e4e4e4",
        warning="#e4e4e4", error="#ffffff", success="#bcbcbc",
        foreground="#d0d0d0", background="#000000", surface="#121212", panel="#262626",
    ),
}

_CHOICES = {"16": "clade-16", "256": "clade-256", "truecolor": "clade-truecolor", "mono": "clade-mono"}


def pick_theme(choice: str, env: Mapping[str, str]) -> str:
    """The theme for `[tui] theme` (`auto`, `16`, `256`, `truecolor`, `mono`) in environment `env`.

    auto: NO_COLOR -> mono; COLORTERM truecolor/24bit -> truecolor; TERM *256color* -> 256;
    else 16 (a bare xterm, the Linux console, screen over SSH).
    """
    if choice in _CHOICES:
        return _CHOICES[choice]
    if "NO_COLOR" in env:
        return "clade-mono"
    if env.get("COLORTERM", "").lower() in ("truecolor", "24bit"):
        return "clade-truecolor"
    if "256color" in env.get("TERM", ""):
        return "clade-256"
    return "clade-16"
