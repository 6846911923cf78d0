"""bench_clade's parts (the catch-up phase)."""
