"""The LLM pass against a local server speaking the Messages API: valid, hostile, broken, down."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from daemon.grimoire.curator.llm import Cluster, Member
from daemon.grimoire.curator.llm_client import LlmConfig, propose

A, B, S = "a" * 32, "b" * 32, "5" * 32
CLUSTERS = [Cluster((Member(A, True, "fact", 0.7, 1, "Gas cheap at 3am"), Member(B, True, "fact", 0.6, 2, "gas 3am"),
                     Member(S, False, "fact", 0.4, 3, "Gas is cheap at 3am UTC")))]


class FakeMessages:
    """What the next POST /v1/messages answers: (status, body bytes)."""

    def __init__(self) -> None:
        self.answer: tuple[int, bytes] = (200, b"{}")
        self.requests: list[dict[str, Any]] = []


def _message(tool_input: Any, *, name: str = "curate") -> bytes:
    return json.dumps({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": name, "input": tool_input}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 1000, "output_tokens": 200}}).encode()


@pytest.fixture
def api() -> Iterator[tuple[FakeMessages, str]]:
    fake = FakeMessages()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            fake.requests.append(json.loads(body))
            status, data = fake.answer
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield fake, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _config(url: str, **kw: Any) -> LlmConfig:
    return LlmConfig(api_key="sk-test", base_url=url, timeout_s=5, **kw)


def test_valid_decisions_and_cost(api: tuple[FakeMessages, str]) -> None:
    fake, url = api
    fake.answer = (200, _message({"decisions": [{"cluster": 0, "action": "MERGE", "into": A}]}))
    out = propose(CLUSTERS, _config(url))
    assert [(d.action, d.into) for d in out.decisions] == [("MERGE", A)] and out.error is None
    assert out.cost_usd == pytest.approx((1000 * 1.0 + 200 * 5.0) / 1e6)
    sent = fake.requests[0]
    assert sent["tool_choice"] == {"type": "tool", "name": "curate"} and sent["model"] == "claude-haiku-4-5"


def test_hostile_output_is_ignored_and_counted(api: tuple[FakeMessages, str]) -> None:
    fake, url = api
    fake.answer = (200, _message({"decisions": [{"cluster": 0, "action": "SUPERSEDE", "older": S, "newer": A},
                                                {"cluster": 0, "action": "MERGE", "into": "<script>"}]}))
    out = propose(CLUSTERS, _config(url))
    assert out.decisions == [] and out.refused == {"not_own": 1, "unknown_id": 1}
    fake.answer = (200, _message({"decisions": [{"cluster": 0, "action": "REWRITE", "text": "x" * 10_000_000,
                                                 "evidence": [A]}]}))
    out = propose(CLUSTERS, _config(url))
    assert out.decisions == [] and out.refused == {"invalid_answer": 1}
    fake.answer = (200, _message({"decisions": []}, name="other_tool"))
    out = propose(CLUSTERS, _config(url))
    assert out.decisions == [] and out.error is not None and "without calling curate" in out.error


@pytest.mark.parametrize("answer", [(500, b'{"type":"error","error":{"type":"api_error","message":"boom"}}'),
                                    (429, b'{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}'),
                                    (200, b"not json at all"),
                                    (200, b'{"content": "nonsense"}')])
def test_api_errors_and_garbage_fall_back(api: tuple[FakeMessages, str], answer: tuple[int, bytes]) -> None:
    fake, url = api
    fake.answer = answer
    out = propose(CLUSTERS, _config(url))
    assert out.decisions == [] and out.error is not None


def test_api_down_falls_back() -> None:
    out = propose(CLUSTERS, LlmConfig(api_key="k", base_url="http://127.0.0.1:9", timeout_s=2))
    assert out.decisions == [] and out.error is not None and "Connection" in out.error
