"""`GET /metrics` against a real daemon and a real Prometheus (Debian's `prometheus` package),
and the docs/ it ships: alert rules through `promtool check rules`, the Grafana dashboard's
expressions against the metric names the collector produces.

The Prometheus tests skip only where the binaries cannot be found (`.ci/run` installs them).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from daemon.datadir import DataDir
from daemon.metrics.collector import render
from daemon.testing.process import DaemonProc
from tests.helpers.cli import REPO
from tests.helpers.daemon import daemon_over_tcp, free_port
from tests.helpers.metrics import full_snapshot
from tests.helpers.polling import eventually

TOKEN = "metrics-test-token-0123456789abcdef"
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
needs_prometheus = pytest.mark.skipif(PROMETHEUS is None, reason="no `prometheus` binary on PATH "
                                      "(apt-get install prometheus; .ci/run does)")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="no `promtool` binary on PATH "
                                    "(apt-get install prometheus; .ci/run does)")


@pytest.fixture
def tcp_daemon(data_dir: DataDir) -> Iterator[tuple[DaemonProc, str]]:
    with daemon_over_tcp(data_dir, TOKEN) as (daemon, where):
        yield daemon, where


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_a_scrape_needs_the_token(tcp_daemon: tuple[DaemonProc, str]) -> None:
    daemon, where = tcp_daemon
    url = f"http://{where}/metrics"
    assert httpx.get(url).status_code == 401
    wrong = httpx.get(url, headers={"authorization": "Bearer " + "x" * len(TOKEN)})
    assert wrong.status_code == 401 and wrong.json()["error"] == "unauthorized"
    assert httpx.get(url, headers={"authorization": TOKEN}).status_code == 401  # no "Bearer "
    assert httpx.post(url, headers={"authorization": f"Bearer {TOKEN}"}).status_code == 405
    assert daemon.proc.poll() is None


def test_metrics_reflect_the_store(tcp_daemon: tuple[DaemonProc, str]) -> None:
    daemon, where = tcp_daemon
    for content in ("Uniswap v3 fee tiers are 0.05, 0.3 and 1 percent", "Aave liquidations start at HF 1"):
        assert daemon.request("POST", "/v1/memory", json={"content": content, "memory_type": "fact"}).status_code == 201
    made = daemon.request("POST", "/v1/memory", json={"content": "Never bridge on a Friday", "memory_type": "warning"})
    assert daemon.request("POST", f"/v1/entries/{made.json()['id']}/forget").status_code == 200
    res = httpx.get(f"http://{where}/metrics", headers={"authorization": f"Bearer {TOKEN}"})
    assert res.status_code == 200 and res.headers["content-type"].startswith("text/plain")
    got = _samples(res.text)
    assert got[("clade_entries", (("kind", "fact"), ("state", "live")))] == 2
    assert got[("clade_entries", (("kind", "warning"), ("state", "archived")))] == 1
    assert got[("clade_entries", (("kind", "warning"), ("state", "live")))] == 0
    assert got[("clade_events_total", (("event", "entry_written"),))] == 3
    assert got[("clade_peers", (("state", "known"),))] == 0
    assert got[("clade_p2p_running", ())] == 0  # not in a clade
    # the unix socket serves it too (to local clients), in OpenMetrics when asked
    om = daemon.request("GET", "/metrics", headers={"accept": "application/openmetrics-text; version=1.0.0"})
    assert om.headers["content-type"].startswith("application/openmetrics-text") and om.text.endswith("# EOF\n")


@needs_prometheus
def test_a_real_prometheus_scrapes_the_daemon(tcp_daemon: tuple[DaemonProc, str], tmp_path: Path) -> None:
    daemon, where = tcp_daemon
    assert daemon.request("POST", "/v1/memory", json={"content": "Curve pools depeg under stress",
                                                      "memory_type": "warning"}).status_code == 201
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps({  # YAML is a superset of JSON
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": [
            {"job_name": "clade", "authorization": {"type": "Bearer", "credentials": TOKEN},
             "static_configs": [{"targets": [where]}]},
            {"job_name": "clade-wrong-token", "authorization": {"type": "Bearer", "credentials": "w" * 40},
             "static_configs": [{"targets": [where]}]},
        ]}))
    log = (tmp_path / "prometheus.log").open("wb")
    assert PROMETHEUS is not None
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    api = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5)

    def query(expr: str) -> list[dict[str, Any]]:
        if proc.poll() is not None:
            raise AssertionError(f"prometheus exited: {(tmp_path / 'prometheus.log').read_text()[-3000:]}")
        try:
            res = api.get("/api/v1/query", params={"query": expr})
        except httpx.HTTPError:
            return []  # not listening yet
        if res.status_code == 503:
            return []  # listening, not ready yet ("Service Unavailable" in plain text while it starts)
        doc = res.json()
        assert doc["status"] == "success", doc
        return list(doc["data"]["result"])

    try:
        def promql(expr: str) -> Any:
            return eventually(lambda: query(expr), timeout=60, interval=0.2, what=f"{expr} in Prometheus")

        found = promql('clade_entries{job="clade",kind="warning",state="live"}')
        assert found[0]["value"][1] == "1"
        assert query('up{job="clade"}')[0]["value"][1] == "1"
        assert promql('clade_curator_cycle_seconds_bucket{le="+Inf"}')
        assert promql('clade_events_total{event="entry_written"}')[0]["value"][1] == "1"
        # the scrape with a wrong token fails with the API's 401, and Prometheus says so
        wrong = eventually(lambda: [
            t for t in api.get("/api/v1/targets").json()["data"]["activeTargets"]
            if t["labels"]["job"] == "clade-wrong-token" and t["lastError"]],
            timeout=60, interval=0.2, what="the wrong-token target's error")
        assert "401" in wrong[0]["lastError"] and wrong[0]["health"] == "down"
        assert query('up{job="clade-wrong-token"}')[0]["value"][1] == "0"
    finally:
        api.close()
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
    assert daemon.proc.poll() is None


# -- docs/ -------------------------------------------------------------------------------

ALERTS = REPO / "docs" / "prometheus" / "clade-alerts.yml"
DASHBOARD = REPO / "docs" / "grafana" / "clade-dashboard.json"
_METRIC = re.compile(r"\bclade_[a-z0-9_]+")


def _known_names() -> set[str]:
    """Every sample name the collector can produce (a snapshot with every part present)."""
    body, _ = render(full_snapshot(), "")
    return {s.name for family in text_string_to_metric_families(body.decode()) for s in family.samples}


@needs_promtool
def test_alert_rules_pass_promtool() -> None:
    assert PROMTOOL is not None
    run = subprocess.run([PROMTOOL, "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60,
                         check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS: 10 rules found" in run.stdout, run.stdout


def test_alert_rules_name_existing_metrics() -> None:
    text = ALERTS.read_text()
    exprs = re.findall(r"^\s+expr: (.+)$", text, flags=re.MULTILINE)
    named = {m for expr in exprs for m in _METRIC.findall(expr)}
    assert named <= _known_names(), named - _known_names()
    assert "clade_suspect_authors" in named


def test_dashboard_is_valid_json_naming_existing_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    assert len(exprs) >= 15
    known = _known_names()
    for expr in exprs:
        names = set(_METRIC.findall(expr))
        assert names, expr
        assert names <= known, (expr, names - known)
    assert "clade_build_info" in known  # the instance variable's query
