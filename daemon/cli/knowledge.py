"""CLI commands for outcomes and vitality (registered by `daemon.cli.main`).

    clade outcome ID positive|negative|neutral [--metric M] [--value X] [--episode E] [--note T]
    clade vitality [PHASE] [--economic E --epistemic P [--age A]] [--hayflick R]
                                              show, or report, the golem's vitality

Both go through the daemon when one runs (its events, its status), else work on the store
(`daemon.cli.backends.backend_for`).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from daemon.cli.backends import backend_for
from daemon.cli.ids import ID_HELP, entry_id
from daemon.cli.render import renders
from daemon.datadir import DataDir
from daemon.errors import UsageError
from daemon.grimoire.mortality import PHASES
from daemon.grimoire.posterior import MAX_METRIC_CHARS, MAX_NOTE_BYTES, Effect
from daemon.grimoire.vitality import MAX_AGE_FACTOR

__all__ = ["register"]

Handler = Callable[[argparse.Namespace, DataDir], Any]


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _ratio(text: str) -> float:
    value = _finite(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError("the Hayflick ratio must be between 0 and 1")
    return value


def register(command: Callable[[str, Handler, str], argparse.ArgumentParser]) -> None:
    p = command("outcome", cmd_outcome, "record what acting on an entry led to (moves its local confidence)")
    p.add_argument("id", metavar="ID", help=ID_HELP)
    p.add_argument("effect", choices=[e.value for e in Effect], metavar="EFFECT",
                   help="positive, negative or neutral")
    p.add_argument("--metric", default="outcome", help=f"what was measured (1..{MAX_METRIC_CHARS} characters)")
    p.add_argument("--value", type=_finite, default=None, help="the measured value")
    p.add_argument("--episode", default=None, metavar="ID", help="the episode it was observed in")
    p.add_argument("--note", default=None, help=f"free text (at most {MAX_NOTE_BYTES} bytes)")

    p = command("vitality", cmd_vitality, "show or report the golem's vitality: its state (the phase is "
                                          "derived from it), a phase overriding it, or both (declining or "
                                          "terminal pushes legacy)")
    p.add_argument("phase", nargs="?", choices=PHASES, default=None, metavar="PHASE",
                   help=f"a reported phase, overriding the derived one: {', '.join(PHASES)}")
    p.add_argument("--economic", type=_ratio, default=None, metavar="E", help="balance over initial funding, 0..1")
    p.add_argument("--epistemic", type=_ratio, default=None, metavar="P", help="predictive fitness, 0..1")
    p.add_argument("--age", type=_age, default=None, metavar="A", help="ticks lived over the reference lifespan")
    p.add_argument("--hayflick", type=_ratio, default=None, metavar="R", help="Hayflick ratio, 0..1")


def _outcome_text(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    o = doc["outcomes"]
    print(f"{doc['id']} local confidence {doc['local_confidence']:.3f} (outcomes: {o['positive']} positive, "
          f"{o['negative']} negative, {o['neutral']} neutral)")


@renders(_outcome_text)
def cmd_outcome(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    backend = backend_for(data)
    return backend.outcome(entry_id(backend, args.id), effect=args.effect, metric=args.metric, value=args.value,
                           episode=args.episode, note=args.note)


def _vitality_text(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    ratio = "" if doc["hayflick_ratio"] is None else f", Hayflick ratio {doc['hayflick_ratio']:g}"
    source = {"reported": "reported", "derived": "derived", "default": "none reported"}[doc.get("source", "reported")]
    print(f"vitality {doc['phase']} ({source}){ratio}" + ("; the curator pushes legacy" if doc["legacy"] else ""))
    if doc.get("composite") is not None:
        print(f"  economic {doc['economic']:g}, epistemic {doc['epistemic']:g}, age {doc['age_factor']:g} "
              f"→ composite {doc['composite']:.3f} → {doc['derived']}")
    if doc.get("reserve_share"):
        print(f"  Styx: {doc['reserve_share']:.0%} of the month's cap kept for the death protocol")


def _age(text: str) -> float:
    value = _finite(text)
    if not 0 <= value <= MAX_AGE_FACTOR:
        raise argparse.ArgumentTypeError(f"must be a number in 0..{MAX_AGE_FACTOR:g}, got {text!r}")
    return value


@renders(_vitality_text)
def cmd_vitality(args: argparse.Namespace, data: DataDir) -> dict[str, Any]:
    clocks = (args.economic, args.epistemic, args.age)
    if args.phase is None and all(x is None for x in clocks):
        if args.hayflick is not None:
            raise UsageError("--hayflick needs a PHASE or the clocks (clade vitality [PHASE] "
                             "[--economic E --epistemic P [--age A]] --hayflick R)")
        return backend_for(data).vitality()
    if (args.economic is None) != (args.epistemic is None) or (args.age is not None and args.economic is None):
        raise UsageError("--economic and --epistemic go together (--age optional, with them)")
    return backend_for(data).set_vitality(args.phase, args.hayflick, economic=args.economic,
                                          epistemic=args.epistemic, age_factor=args.age)
