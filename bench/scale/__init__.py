"""bench_scale's parts: the simulated clade it runs (`sim`: golems, the event scheduler, the
neighbourhood, GossipSub, anti-entropy and the figures of a run)."""
