"""Per-author trust, quarantine and digest diversity, pure (docs/design/security.md).

The threat: a sibling's VM is compromised and, until the owner revokes it, writes perfectly
signed entries as a member. Nothing here blocks a sibling or deletes anything: it decides what
of a sibling's knowledge reaches the golem's digests and top search slots, from evidence
gathered on THIS golem only (an attacker controls what it writes, never what happens here).

**Trust** of an author is a Beta posterior over "its knowledge holds up here":

    trust = (S · p₀ + good) / (S + good + bad),   p₀ = `TrustPolicy.prior` (0.5), S = `strength` (4)

`good`: its entries' positive outcomes and confirmations of its entries by a *voucher*;
`bad`: negative outcomes and contradictions by a voucher. A *use* (an agent citing an entry,
feedback naming it) is not evidence: an agent uses what its digest shows it, including a
warning shown marked unverified, so counting uses would let an attacker's shown entries
release themselves and earn their author a voucher's weight. A voucher is this golem itself,
or another author whose trust from its outcomes alone is at least `vouch_trust`:
endorsement weight is earned here, so a second compromised identity confirming the first
("impersonated consensus") counts nothing, and an author's own endorsements never count (the
CRDT refuses them). An operator's `distrust` sets trust to 0 until `trust` lifts it.
An author is **suspect** when distrusted, when its trust is below `low_trust` on at least
`low_trust_evidence` (4) pieces of evidence, or when it wrote more than its budget (below).
The evidence floor matters because suspicion is nearly absorbing — a suspect's entries are
withheld, so they gather no new outcomes here: an honest sibling's knowledge helps ~60-65 % of
the time, so two failures first (trust 2/6 = 0.33) happen to one honest pair in eight, and
without the floor that sibling was shut out for good (the decision benchmark, step 24); four
failures in a row happen to one in fifty, and to a writer of bad knowledge one time in three.

**Quarantine** (`verdict`): an own (or inherited) entry is released. A sibling's entry is
released once *corroborated* — more good than bad evidence on the entry itself (a positive
outcome, a voucher's confirmation) — or once it has *aged*: held here for
`quarantine_age_ms` of LOCAL arrival time (`stored_ms`; the author's HLC is the attacker's to
choose) with no contradiction and no negative outcome, while its author is not suspect — or at
once (*vouched*, `release_vouched`) when its author's record here is good: trust ≥
`release_trust` (0.55) on at least `release_outcomes` (4) pieces of evidence. A record earned
on this golem is the corroboration (an honest author's entries help ~60-70 % of the time, an
attacker's far less); if the author turns (a sleeper), its entries' failures refute them
clade-wide (belief.py) and pull its trust down.

**Reporters**: a sibling's evidence (its outcome tallies, belief.py) counts as a voucher's when
it agrees with this golem's own outcomes on the entries both have evidence on
(`reporter_reliability`), and makes the sibling suspect (`unreliable`) when it keeps
contradicting what happened here.
Everything else is *unverified*. A distrusted author's entries are all unverified.

**Where unverified entries go** (`digest_visible`): an unverified entry of a member that is
not suspect, with no negative evidence here, is *on trial*: it enters digests and default
searches at once, marked unverified (a sibling's, not yet borne out here) at its
provenance's confidence (the pooled belief over the author's stated confidence, belief.py),
so that this golem's outcomes can validate or refute it the day it arrives (`trial`).
Siblings are the owner's own golems, admitted by its certificate: a member with no record
starts neutral, and every entry of a clean or good record is on trial. An author whose record
here is worse than neutral has only a *share* of its new entries on trial — exploration by
Thompson sampling over its record (`trial_chance`): the chance that a draw of its help rate
from the Beta posterior beats the prior mean, relative to a clean record's (1 after one
failure and one success; 0.625 after one failure; 0.375 after two): an honest sibling that
was unlucky first is tried again and recovers, a writer of bad knowledge is tried less and
less until it is suspect. Which entries are on trial is a fixed draw per (entry, record)
(`trial_draw`), so a search does not flicker. What one author takes is bounded further: one
unverified entry per author per digest (`diversify`) and per search (retrieval.py), none for a
suspect author (flooding, low trust on enough evidence, unreliable, distrusted), whose
entries are withheld from digests and default searches but stay readable
(`GET /v1/entries/{id}`, search with `include_unverified`) and are released as soon as the
evidence arrives. With `trial` off, only an unverified caution (warning, anti-knowledge) of an
author who is not suspect is shown: a missed warning costs more than a noisy one. Nothing is
deleted.

**Budgets** (`over_budget`): an author may have at most `budget_entries` *fresh* entries arrive
in `budget_window_ms`. Fresh means authored (HLC) within `budget_window_ms` of its arrival: a
week of entries arriving in one catch-up is old on arrival and not a burst. An attacker that
backdates its HLC to pass as a catch-up is bounded by `catchup_entries` (all arrivals in the
window, fresh or not), and its backdated entries still wait out the quarantine (arrival time)
and rank as old. Over budget never drops anything: it makes the author suspect and is counted.

**Diversity** (`diversify`): of the ranked digest candidates, at most `unverified_per_author`
unverified entries per sibling and at most `max(1, ⌊max_author_share · k⌋)` entries per
sibling in all — one in all for a sibling without a proven record here (`proven`: trust at
least the prior on at least `release_outcomes` pieces of evidence); own entries are never
capped. An author nothing is known of (a sibling whose entries have not been acted on here)
is held to one slot too.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import StrEnum

from crdt import Kind

from .posterior import posterior_mean

__all__ = ["CAUTIONS", "AuthorEvidence", "AuthorView", "EntryFacts", "Release", "TrustPolicy", "author_view",
           "digest_visible", "diversify", "over_budget", "proven", "reporter_reliability", "trial_chance", "trial_draw",
           "verdict"]

CAUTIONS = frozenset({Kind.WARNING, Kind.ANTI_KNOWLEDGE})
"""Kinds shown unverified rather than withheld: a missed warning costs more than a noisy one."""

HOUR_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class TrustPolicy:
    """The knobs (config `[trust]`); the defaults are the shipped ones."""

    enabled: bool = True
    prior: float = 0.5
    strength: float = 4.0
    low_trust: float = 0.35
    low_trust_evidence: int = 4  # … on at least this much evidence about the author
    vouch_trust: float = 0.65
    quarantine_age_ms: int = 24 * HOUR_MS
    budget_entries: int = 100
    budget_window_ms: int = HOUR_MS
    catchup_entries: int = 5_000
    max_author_share: float = 0.3
    unverified_per_author: int = 1
    release_vouched: bool = True
    release_trust: float = 0.55  # an author's entries are released on arrival from this trust here …
    release_outcomes: int = 4  # … on at least this much evidence (an honest author succeeds ~60-70 %)
    reporter_agree: float = 0.6  # a sibling whose evidence agrees this often with ours is a reliable reporter
    reporter_disagree: float = 0.35  # … and one that agrees this rarely is unreliable (suspect)
    reporter_min: int = 3  # entries compared before either is said
    trial: bool = True  # a member's unverified entries are shown at once, marked (module doc, trial_chance)


@dataclass(frozen=True, slots=True)
class AuthorEvidence:
    """What this golem has seen of one author's knowledge (tallies ≥ 0)."""

    good: int = 0  # positive outcomes + vouched confirmations
    bad: int = 0  # negative outcomes + vouched contradictions
    fresh_arrivals: int = 0  # entries authored near their arrival, arrived in the budget window
    arrivals: int = 0  # every entry that arrived in the budget window
    distrusted: bool = False
    evidence_arrivals: int = 0  # its evidence tallies (one per entry) that changed here in the budget window


@dataclass(frozen=True, slots=True)
class AuthorView:
    author: str
    trust: float
    suspect: bool
    reasons: tuple[str, ...]  # "distrusted", "low_trust", "burst", "catchup_flood", "evidence_flood", "unreliable"
    evidence: AuthorEvidence


def over_budget(evidence: AuthorEvidence, policy: TrustPolicy) -> tuple[str, ...]:
    """The budget reasons `evidence` trips: "burst" (fresh arrivals over `budget_entries`),
    "catchup_flood" (all arrivals over `catchup_entries`), "evidence_flood" (evidence tallies
    on more than `budget_entries` entries changed in the window: outcomes are budgeted like
    entries, belief.py)."""
    out: list[str] = []
    if evidence.fresh_arrivals > policy.budget_entries:
        out.append("burst")
    if evidence.arrivals > policy.catchup_entries:
        out.append("catchup_flood")
    if evidence.evidence_arrivals > policy.budget_entries:
        out.append("evidence_flood")
    return tuple(out)


def reporter_reliability(agree: int, disagree: int, policy: TrustPolicy) -> bool | None:
    """Whether a sibling reports outcomes reliably, from the entries on which both it and this
    golem have evidence with a clear sign: `agree` where its tally leans the same way as ours,
    `disagree` the other way. True (its evidence counts as a voucher's): the Beta mean
    (2 + agree) / (4 + agree + disagree) ≥ `reporter_agree`; False (suspect: it reports outcomes
    that did not happen here): ≤ `reporter_disagree`; None: too few (< `reporter_min`) or between.
    Honest siblings drawing outcomes of the same entries agree ~65 % of the time on one or two
    outcomes each; one that contradicts good entries with fake failures agrees far less."""
    if agree + disagree < policy.reporter_min:
        return None
    mean = (2 + agree) / (4 + agree + disagree)
    if mean >= policy.reporter_agree:
        return True
    if mean <= policy.reporter_disagree:
        return False
    return None


def author_view(author: str, evidence: AuthorEvidence, policy: TrustPolicy) -> AuthorView:
    """Trust (the module's formula; 0 when distrusted) and suspicion of one author."""
    trust = 0.0 if evidence.distrusted else posterior_mean(policy.prior, evidence.good, evidence.bad,
                                                           strength=policy.strength)
    reasons: list[str] = []
    if evidence.distrusted:
        reasons.append("distrusted")
    elif trust < policy.low_trust and evidence.good + evidence.bad >= policy.low_trust_evidence:
        reasons.append("low_trust")
    reasons += over_budget(evidence, policy)
    return AuthorView(author, round(trust, 6), bool(reasons), tuple(reasons), evidence)


class Release(StrEnum):
    OWN = "own"
    CORROBORATED = "corroborated"
    VOUCHED = "vouched"
    AGED = "aged"
    UNVERIFIED = "unverified"


@dataclass(frozen=True, slots=True)
class EntryFacts:
    """What the verdict reads of one entry."""

    id: str
    author: str
    kind: Kind
    foreign: bool  # a sibling's entry (provenance 'clade'); own and inherited are not
    stored_ms: int  # local arrival
    positive: int = 0  # positive outcomes here
    negative: int = 0  # negative outcomes here
    vouched_confirms: int = 0
    vouched_contradicts: int = 0


def verdict(facts: EntryFacts, author: AuthorView | None, *, now_ms: int, policy: TrustPolicy) -> Release:
    """Whether `facts`' entry is released (and why) or unverified (module docstring).
    `author`: its author's view (None: nothing known, the prior)."""
    if not facts.foreign:
        return Release.OWN
    if author is not None and author.evidence.distrusted:
        return Release.UNVERIFIED
    good = facts.positive + facts.vouched_confirms
    bad = facts.negative + facts.vouched_contradicts
    if good > bad:
        return Release.CORROBORATED
    suspect = author is not None and author.suspect
    if (policy.release_vouched and bad == 0 and author is not None and not suspect
            and author.trust >= policy.release_trust
            and author.evidence.good + author.evidence.bad >= policy.release_outcomes):
        return Release.VOUCHED
    low = author is not None and author.trust < policy.low_trust  # a bad record, on too little evidence to suspect
    if bad == 0 and not suspect and not low and now_ms - facts.stored_ms >= policy.quarantine_age_ms:
        return Release.AGED
    return Release.UNVERIFIED


@functools.lru_cache(maxsize=4096)
def _beta_above(a: float, b: float, threshold: float) -> float:
    """P(X > threshold) for X ~ Beta(a, b), a, b > 0: the midpoint rule over 2,000 cells of
    (threshold, 1) (error < 1e-4 for the shapes trust produces; cached, the counts are few)."""
    cells = 2000
    width = (1.0 - threshold) / cells
    log_norm = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    total = 0.0
    for i in range(cells):
        x = threshold + (i + 0.5) * width
        total += math.exp(log_norm + (a - 1) * math.log(x) + (b - 1) * math.log1p(-x))
    return min(1.0, total * width)


def trial_chance(evidence: AuthorEvidence, policy: TrustPolicy) -> float:
    """The share of an author's new entries put on trial: P(θ > p₀) under its Beta posterior
    (S·p₀ + good, S·(1 − p₀) + bad) over the same under the prior alone, capped at 1 — 1 for a
    clean or good record, less as failures outweigh successes here."""
    a0, b0 = policy.strength * policy.prior, policy.strength * (1 - policy.prior)
    prior = _beta_above(a0, b0, policy.prior)
    if prior <= 0:
        return 0.0
    return min(1.0, _beta_above(a0 + evidence.good, b0 + evidence.bad, policy.prior) / prior)


def trial_draw(entry_id: str, evidence: AuthorEvidence) -> float:
    """A uniform draw fixed by the entry and its author's record here (a new outcome draws anew)."""
    digest = hashlib.blake2b(f"{entry_id}:{evidence.good}:{evidence.bad}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def digest_visible(facts: EntryFacts, release: Release, author: AuthorView | None,
                   policy: TrustPolicy | None = None) -> bool:
    """Whether the entry may enter a digest or a default search: released; or unverified (shown
    marked unverified) and either on trial — `policy.trial`, no negative evidence on it here,
    an author who is not suspect (None: nothing known, neutral), and its draw under the
    author's `trial_chance` — or a caution of an author who is not suspect. `policy` None:
    `TrustPolicy()`."""
    if release is not Release.UNVERIFIED:
        return True
    policy = policy or TrustPolicy()
    if author is not None and author.suspect:
        return False
    if facts.kind in CAUTIONS:
        return True
    if not policy.trial or facts.negative or facts.vouched_contradicts:
        return False
    return author is None or trial_draw(facts.id, author.evidence) < trial_chance(author.evidence, policy)


def proven(author: AuthorView, policy: TrustPolicy) -> bool:
    """Whether an author's record here earns it more than one digest slot: not suspect, trust at
    least the prior, on at least `release_outcomes` pieces of evidence. Until then a member —
    a compromised one whose bad entries a lucky outcome released included — takes one slot of
    any digest (`diversify`'s `limited`)."""
    evidence = author.evidence.good + author.evidence.bad
    return not author.suspect and author.trust >= policy.prior and evidence >= policy.release_outcomes


def diversify(candidates: Sequence[tuple[str, bool, bool]], *, k: int, policy: TrustPolicy,
              limited: Collection[str] = ()) -> list[int]:
    """Positions (in order) of the ranked `candidates` — (author, foreign, unverified) — that stay:
    per foreign author at most `unverified_per_author` unverified and `max(1, ⌊share·k⌋)` in all,
    or one in all for an author in `limited` (no proven record here, `proven`: a compromised
    member whose entries a lucky outcome released takes one slot, not three)."""
    wide = max(1, math.floor(policy.max_author_share * k))
    total: dict[str, int] = {}
    unverified: dict[str, int] = {}
    kept: list[int] = []
    for position, (author, foreign, is_unverified) in enumerate(candidates):
        if foreign:
            cap = 1 if author in limited else wide
            if total.get(author, 0) >= cap:
                continue
            if is_unverified:
                if unverified.get(author, 0) >= policy.unverified_per_author:
                    continue
                unverified[author] = unverified.get(author, 0) + 1
            total[author] = total.get(author, 0) + 1
        kept.append(position)
    return kept
