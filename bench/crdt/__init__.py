"""bench_crdt's parts (the report)."""
