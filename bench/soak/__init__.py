"""bench_soak's parts: the load it puts on the golems and the tally of what came back
(`load`), and the samples of each daemon's process it takes meanwhile (`samples`)."""
