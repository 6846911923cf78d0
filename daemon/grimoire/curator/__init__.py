"""The curator: how the Grimoire forgets, merges, consolidates and promotes (docs/design/forgetting.md).

Each step is a pure function over what it needs of a store snapshot — `decay`, `prune`,
`compress`, `consolidate` here, promotion in `..promotion` — so each is tested with
hand-made inputs and exact outputs; the cycle that reads the snapshot and applies the
decisions is a thin I/O layer. Nothing here deletes: merges and contradictions supersede,
prunes archive.
"""

from .compress import Merge, Similar, Supersede, find_contradictions, find_merges
from .consolidate import Baseline, ReplayItem, baselines, select_replay
from .decay import EVICTION_THRESHOLD, RETRIEVAL_THRESHOLD, Retention, decayed, stability_days
from .prune import CLASS_NAMES, DEFAULT_CAPACITY, Candidate, Prune, capacity_counts, eviction_class, select_prunes

__all__ = [
    "CLASS_NAMES",
    "DEFAULT_CAPACITY",
    "EVICTION_THRESHOLD",
    "RETRIEVAL_THRESHOLD",
    "Baseline",
    "Candidate",
    "Merge",
    "Prune",
    "ReplayItem",
    "Retention",
    "Similar",
    "Supersede",
    "baselines",
    "capacity_counts",
    "decayed",
    "eviction_class",
    "find_contradictions",
    "find_merges",
    "select_prunes",
    "select_replay",
    "stability_days",
]
