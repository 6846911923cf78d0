"""`DaemonBackend`: the CLI's operations through a running daemon's control API.

Each method is one call on `DaemonClient` (its errors are already the `UsageError`/`NotFound`/
`DaemonError` the store path raises); the answer is the document the command prints.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from daemon.agent.memory import Lesson
from daemon.cli.backends.base import Backend, Doc, PadTuple
from daemon.client import DaemonClient
from daemon.contract.requests import FlushIn
from daemon.errors import UsageError
from daemon.grimoire.recall import RecallQuery

__all__ = ["DaemonBackend"]


def _pad_body(pad: PadTuple | None) -> dict[str, float] | None:
    """A PAD tuple as the API's `pad` object (None when not given)."""
    if pad is None:
        return None
    p, a, d = pad
    return {"pleasure": p, "arousal": a, "dominance": d}


def _wm_path(session: str) -> str:
    return f"/v1/working-memory/{session}"


class DaemonBackend(Backend):
    """The operations as control-API calls on `client` (which holds no connection between calls)."""

    def __init__(self, client: DaemonClient) -> None:
        self.client = client

    def _doc(self, method: str, path: str, *, body: dict[str, Any] | None = None,
             params: dict[str, Any] | None = None) -> Doc:
        return dict(self.client.call(method, path, body=body, params=params))

    # -- entries ---------------------------------------------------------------------------------

    def remember(self, doc: Doc) -> Doc:
        made = self.client.call("POST", "/v1/memory", body=doc)
        return {"id": made["id"], "entry": made["entry"]}

    def retract(self, entry_id: str, *, superseded_by: str | None) -> Doc:
        return self._doc("POST", f"/v1/entries/{entry_id}/retract", body={"superseded_by": superseded_by})

    def endorse(self, entry_id: str, *, confirm: bool) -> Doc:
        return self._doc("POST", f"/v1/entries/{entry_id}/endorse", body={"confirm": confirm})

    def entry(self, entry_id: str) -> Doc:
        return self._doc("GET", f"/v1/entries/{entry_id}")

    def entries(self, *, kinds: Sequence[str], limit: int, archived: bool) -> Doc:
        return self._doc("GET", "/v1/entries", params={"kind": list(kinds), "limit": limit, "archived": archived})

    def forget(self, entry_id: str) -> Doc:
        return self._doc("POST", f"/v1/entries/{entry_id}/forget")

    def unarchive(self, entry_id: str) -> Doc:
        return self._doc("POST", f"/v1/entries/{entry_id}/unarchive")

    def outcome(self, entry_id: str, *, effect: str, metric: str, value: float | None, episode: str | None,
                note: str | None) -> Doc:
        body = {"effect": effect, "metric": metric, "value": value, "episode_id": episode, "note": note}
        return self._doc("POST", f"/v1/entries/{entry_id}/outcome", body=body)

    def vitality(self) -> Doc:
        return self._doc("GET", "/v1/vitality")

    def set_vitality(self, phase: str | None, hayflick: float | None, *, economic: float | None = None,
                     epistemic: float | None = None, age_factor: float | None = None) -> Doc:
        body = {"phase": phase, "hayflick_ratio": hayflick, "economic": economic, "epistemic": epistemic,
                "age_factor": age_factor}
        return self._doc("PUT", "/v1/vitality", body={k: v for k, v in body.items() if v is not None})

    # -- memory ----------------------------------------------------------------------------------

    def recall(self, query: RecallQuery) -> Doc:
        """`POST /v1/memory/search`."""
        body: dict[str, Any] = {
            "query": query.text, "top_k": query.k, "type_filter": [k.value for k in query.kinds] or None,
            "category_filter": [c.value for c in query.categories] or None, "min_importance": query.min_importance,
            "min_confidence": query.min_confidence, "include_sensitive": query.include_sensitive,
            "keyword_only": query.keyword_only, "include_unverified": query.include_unverified,
            "pad": _pad_body(query.pad), **_bounds(query)}
        return self._doc("POST", "/v1/memory/search", body={k: v for k, v in body.items() if v is not None})

    def digest(self, query: RecallQuery, *, budget_tokens: int, fmt: str) -> Doc:
        body: dict[str, Any] = {"query": query.text, "budget_tokens": budget_tokens, "k": query.k, "format": fmt,
                                "include_sensitive": query.include_sensitive, "pad": _pad_body(query.pad),
                                **_bounds(query)}
        return self._doc("POST", "/v1/digest", body={k: v for k, v in body.items() if v is not None})

    def feedback(self, *, cited: Sequence[str], injected: Sequence[str], response: str | None) -> Doc:
        return self._doc("POST", "/v1/feedback", body={
            "cited": list(cited), "injected": list(injected), "response": response})

    # -- agent memory ----------------------------------------------------------------------------

    def working_memory(self, session: str) -> Doc:
        return self._doc("GET", _wm_path(session))

    def set_working_memory(self, session: str, content: str) -> Doc:
        return self._doc("PUT", _wm_path(session), body={"content": content})

    def close_working_memory(self, session: str) -> Doc:
        return self._doc("POST", f"{_wm_path(session)}/close")

    def flush(self, body: FlushIn) -> Doc:
        return self._doc("POST", "/v1/memory/flush", body=body.model_dump(mode="json"))

    def import_lessons(self, name: str, lessons: Sequence[Lesson]) -> Doc:
        """`POST /v1/lessons`; a `UsageError` naming `name` when the request would exceed the
        daemon's body limit (nothing sent)."""
        from daemon.api.app import MAX_BODY_BYTES

        body = {"lessons": [lesson.memory.model_dump(mode="json") for lesson in lessons]}
        size = len(json.dumps(body).encode())
        if size > MAX_BODY_BYTES:
            raise UsageError(f"{name}: {len(lessons)} lessons make a {size}-byte request; the daemon takes at most "
                             f"{MAX_BODY_BYTES} bytes: split the file")
        return self._doc("POST", "/v1/lessons", body=body)

    # -- upkeep ----------------------------------------------------------------------------------

    def curator_run(self) -> Doc:
        return self._doc("POST", "/v1/curator/run")

    def verify_episode(self, episode_id: str) -> Doc:
        return self._doc("POST", f"/v1/episodes/{episode_id}/verify")

    def styx_status(self) -> Doc:
        return self._doc("GET", "/v1/styx/status")

    def install_revocations(self, raw: bytes) -> Doc:
        return dict(self.client.call_bytes("POST", "/v1/revocations", raw))

    def reload_keys(self) -> Doc | None:
        return self._doc("POST", "/v1/keys/reload")


def _bounds(query: RecallQuery) -> dict[str, str]:
    """The query's time bounds as the API takes them (RFC 3339, UTC)."""
    return {name: datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")
            for name, ms in (("since", query.since_ms), ("until", query.until_ms)) if ms is not None}
