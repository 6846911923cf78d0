"""The request models refuse exactly what their OpenAPI schema refuses at a pattern's end.

A JSON Schema `pattern` is an ECMA-262 regex, whose `$` matches only at the end of the text;
Python's `re` also lets `$` match before one trailing newline. The models checked their
`pattern=` with Python's engine, so a value such as `"ep-1\\n"` broke the schema (schemathesis,
`negative_data_rejection`) yet was accepted. They now check with pydantic's Rust engine,
whose `$` is the schema's. Each case: the schema (validated by `jsonschema_rs`, as
schemathesis does) and the model agree, for the value and for the value with a newline after.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema_rs
import pytest
from pydantic import BaseModel, ValidationError

from daemon.api.agent import ToolCallIn
from daemon.api.death import DeathIn
from daemon.contract.requests import (
    ConnectIn,
    DigestIn,
    DisconnectIn,
    FeedbackIn,
    OutcomeIn,
    RetractIn,
    SearchIn,
    SyncIn,
)

PEER = "12D3KooWAbc"
ENTRY = "0" * 32
ADDR = f"/ip4/127.0.0.1/tcp/4001/p2p/{PEER}"

CASES: list[tuple[type[BaseModel], dict[str, Any], str]] = [
    (OutcomeIn, {"effect": "positive"}, "episode_id"),
    (DisconnectIn, {}, "peer_id"),
    (SyncIn, {}, "peer_id"),
    (ConnectIn, {}, "addr"),
    (RetractIn, {}, "superseded_by"),
    (ToolCallIn, {"input": {}}, "tool_use_id"),
    (DeathIn, {"reflection": "what I learnt"}, "cause"),
]
VALUES = {"episode_id": "ep-1", "peer_id": PEER, "addr": ADDR, "superseded_by": ENTRY, "tool_use_id": "toolu_1",
          "cause": "gas spike"}


def _accepts(model: type[BaseModel], doc: dict[str, Any]) -> bool:
    try:
        model.model_validate_json(json.dumps(doc))
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize(("model", "base", "field"), CASES, ids=[f"{m.__name__}.{f}" for m, _, f in CASES])
def test_a_trailing_newline_breaks_the_pattern_for_schema_and_model_alike(
        model: type[BaseModel], base: dict[str, Any], field: str) -> None:
    schema = jsonschema_rs.validator_for(model.model_json_schema())
    good = {**base, field: VALUES[field]}
    assert schema.is_valid(good) and _accepts(model, good), good
    bad = {**base, field: VALUES[field] + "\n"}
    assert not schema.is_valid(bad), bad  # the schema's `$` is the end of the text
    assert not _accepts(model, bad), f"{model.__name__}.{field} accepted a value its schema refuses: {bad}"


def test_unanchored_patterns_still_search_like_the_schema() -> None:
    """NON_BLANK (`query`, `response`) is unanchored: a non-space anywhere will do, as in the schema."""
    for model, doc in ((SearchIn, {"query": "  gas"}), (DigestIn, {"query": "\ngas\n"}),
                       (FeedbackIn, {"injected": [ENTRY], "response": " ok"})):
        schema = jsonschema_rs.validator_for(model.model_json_schema())
        assert schema.is_valid(doc) == _accepts(model, doc) is True, (model.__name__, doc)
    assert not _accepts(SearchIn, {"query": " \n "})
