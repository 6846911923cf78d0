"""bench_soak's parts: the load it puts on the golems and the tally of what came back
(`load`), the samples of each daemon's process it takes meanwhile (`samples`), and the faults
it applies with the probes that time the recovery from them (`faults`)."""
