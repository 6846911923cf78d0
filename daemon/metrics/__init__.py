"""Prometheus metrics for the daemon: names (pure), histograms fed by the daemon's events,
a snapshot read at scrape time and the custom collector that renders it (`GET /metrics`)."""
