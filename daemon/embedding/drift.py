"""Embedding drift: the same texts, embedded again, should land where they landed before. Pure.

A fixed set of 20 reference documents (`REFERENCE_DOCS`, the golem's own register: pools,
bridges, oracles, risk) is embedded when a vector space is first used here (the baseline, kept in
the store) and again at every model load and on a schedule. Stored vectors stay comparable with
new ones only while the model maps text the same way; a model file replaced under the same name,
a hub model updated upstream, a changed tokenizer or runtime all move the references.

Measures (the architecture's, against the baseline rather than last week's, so slow drift adds
up instead of hiding in weekly steps):

- cosine distance of each reference to its baseline: the mean decides — healthy below 0.02,
  warning from 0.02, critical above 0.05; the max is reported;
- nearest-neighbour stability: the share of references whose 5 nearest references are the same
  set as in the baseline; below 0.6 is critical whatever the distance (healthy is 0.85–1).

At critical the daemon stops writing vectors (the store must never mix two mappings: "never
partially re-embed") until the operator either restores the model (the next check is healthy and
writes resume) or accepts the new one with `clade embeddings rebuild`, which re-embeds every entry
and takes a new baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["CRITICAL", "MIN_NEIGHBOURS", "REFERENCE_DOCS", "WARNING", "Drift", "measure"]

WARNING: Final = 0.02
CRITICAL: Final = 0.05
MIN_NEIGHBOURS: Final = 0.6
NEIGHBOURS: Final = 5

# Fixed forever: changing one text changes every baseline (a new set would need a new key).
REFERENCE_DOCS: Final = (
    "Uniswap v3 ETH/USDC liquidity thins out an hour before US CPI prints",
    "The Curve stETH pool depegs first when Lido withdrawals queue up",
    "Avoid bridging through a new canonical bridge in its first week",
    "Aave's oracle on Base lagged Chainlink by 40 basis points during the spike",
    "Gas on Arbitrum triples when a popular NFT mint opens",
    "Funding rates on GMX flip negative before large token unlocks",
    "Split swaps above 100k USDC into five blocks to limit slippage",
    "A vault that pauses withdrawals without notice is a warning sign",
    "Stablecoin yields above twenty percent rarely last a month",
    "The lending market liquidates collateral at 80 percent loan to value",
    "Sandwich bots watch the public mempool for large swaps on Ethereum",
    "Impermanent loss grows with the square root of the price move",
    "Governance votes that change oracle parameters deserve a close look",
    "Weekend liquidity on centralized exchanges is thinner than on weekdays",
    "Restaking protocols add slashing risk on top of staking risk",
    "A sudden drop in total value locked often precedes a depeg",
    "Keep a reserve of ETH for gas before opening leveraged positions",
    "Cross-chain messages can be delayed for hours during congestion",
    "Points programs inflate deposits that leave when rewards end",
    "The audit report listed two medium issues that were never fixed",
)


@dataclass(frozen=True, slots=True)
class Drift:
    """One check's figures and verdict."""

    mean_distance: float
    max_distance: float
    neighbour_stability: float

    @property
    def verdict(self) -> Literal["healthy", "warning", "critical"]:
        if self.mean_distance > CRITICAL or self.neighbour_stability < MIN_NEIGHBOURS:
            return "critical"
        return "warning" if self.mean_distance >= WARNING else "healthy"

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "mean_distance": round(self.mean_distance, 6),
                "max_distance": round(self.max_distance, 6),
                "neighbour_stability": round(self.neighbour_stability, 4)}


def _neighbours(vectors: NDArray[np.float32]) -> list[frozenset[int]]:
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -np.inf)
    return [frozenset(int(i) for i in np.argsort(-row, kind="stable")[:NEIGHBOURS]) for row in sims]


def _unit(vectors: NDArray[np.float32]) -> NDArray[np.float32]:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    out: NDArray[np.float32] = (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
    return out


def measure(baseline: NDArray[np.float32], current: NDArray[np.float32]) -> Drift:
    """How far `current` (the references embedded now) moved from `baseline`, row by row.
    Raises ValueError when the shapes differ (another vector space: not drift, a model change)."""
    if baseline.shape != current.shape or baseline.ndim != 2 or baseline.shape[0] <= NEIGHBOURS:
        raise ValueError(f"baseline {baseline.shape} and current {current.shape} are not the same references")
    a, b = _unit(baseline), _unit(current)
    distances = 1.0 - np.clip(np.sum(a * b, axis=1), -1.0, 1.0)
    same = sum(x == y for x, y in zip(_neighbours(a), _neighbours(b), strict=True))
    return Drift(float(distances.mean()), float(distances.max()), same / len(a))
