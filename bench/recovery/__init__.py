"""bench_recovery's parts: the writer and the event record it drives a clade with
(`instruments`), and what it computes and prints from them (`figures`)."""
