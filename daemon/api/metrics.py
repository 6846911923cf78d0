"""`GET /metrics`: the daemon's Prometheus metrics (daemon/metrics), read at scrape time.

Served by the control API, so on the TCP listener (`[api] tcp_port`) it is behind the same
bearer token as every other route (Prometheus sends it: `authorization` in the scrape
config), and on the unix socket to local clients. OpenMetrics text when the scraper asks for
it (Prometheus does), else the Prometheus text format.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import Response

from daemon.contract.responses import errors
from daemon.metrics.collector import render
from daemon.metrics.observations import Observations
from daemon.metrics.snapshot import gather
from daemon.service.state import DaemonState

__all__ = ["register"]

_TEXT = {"schema": {"type": "string"}}


def register(app: FastAPI, state: DaemonState) -> Observations:
    """Add `GET /metrics`, and start recording the daemon's events into the histograms it
    exposes (returned, for tests)."""
    observations = Observations()
    state.observers.append(observations.record)

    @app.get("/metrics", response_class=Response, responses={
        200: {"description": "the metrics (OpenMetrics 1.0.0, or the Prometheus text format 0.0.4)",
              "content": {"application/openmetrics-text": _TEXT, "text/plain": _TEXT}}, **errors()})
    async def metrics(request: Request) -> Response:
        """Counters, gauges and histograms for Prometheus (see docs/prometheus/)."""
        snapshot = await gather(state, observations)
        body, content_type = render(snapshot, request.headers.get("accept", ""))
        return Response(body, media_type=content_type)

    return observations
