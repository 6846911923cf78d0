"""The optional LLM pass's I/O: one Messages API call through the `anthropic` SDK.

Off unless `[curator.llm] enabled` and a key (`ANTHROPIC_API_KEY` or `[curator.llm] api_key_file`).
A timeout, an API error, a refusal or an answer without the tool call returns no decisions
and says why; the cycle then runs the deterministic path alone. The cost of each call is
recorded from the answer's `usage` at the configured per-million-token prices.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from .llm import TOOL_NAME, Cluster, Decision, accept, request_body

__all__ = ["LlmConfig", "LlmOutcome", "propose"]


@dataclass(frozen=True, slots=True)
class LlmConfig:
    api_key: str
    model: str = "claude-haiku-4-5"
    base_url: str | None = None
    max_tokens: int = 2048
    timeout_s: float = 30.0
    max_clusters: int = 32
    max_decisions: int = 64
    usd_per_mtok_in: float = 1.0
    usd_per_mtok_out: float = 5.0


@dataclass(slots=True)
class LlmOutcome:
    decisions: list[Decision] = field(default_factory=list)
    refused: Counter[str] = field(default_factory=Counter)
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None


def propose(clusters: Sequence[Cluster], config: LlmConfig) -> LlmOutcome:
    """Ask the model about at most `max_clusters` clusters; blocking (run it on a worker thread)."""
    outcome = LlmOutcome()
    clusters = list(clusters)[: config.max_clusters]
    if not clusters:
        return outcome
    import anthropic  # here, not at the top: the SDK's types cost a daemon that never calls it 42 MiB

    client = anthropic.Anthropic(api_key=config.api_key, base_url=config.base_url, timeout=config.timeout_s,
                                 max_retries=0)
    try:
        message = client.messages.create(**request_body(clusters, model=config.model,
                                                        max_tokens=config.max_tokens))
    except (anthropic.APIError, ValueError) as exc:  # ValueError: a body that is not JSON or not a message
        outcome.error = f"{type(exc).__name__}: {str(exc)[:200]}"
        return outcome
    finally:
        client.close()
    usage = getattr(message, "usage", None)
    if usage is not None:
        outcome.input_tokens = int(getattr(usage, "input_tokens", 0) or 0)
        outcome.output_tokens = int(getattr(usage, "output_tokens", 0) or 0)
        outcome.cost_usd = (outcome.input_tokens * config.usd_per_mtok_in
                            + outcome.output_tokens * config.usd_per_mtok_out) / 1e6
    content = message.content if isinstance(message.content, list) else []
    calls = [b for b in content if getattr(b, "type", None) == "tool_use" and getattr(b, "name", None) == TOOL_NAME]
    if not calls:
        outcome.error = f"the model answered without calling {TOOL_NAME} (stop_reason {message.stop_reason})"
        return outcome
    outcome.decisions, outcome.refused = accept(calls[0].input, clusters, max_decisions=config.max_decisions)
    return outcome
