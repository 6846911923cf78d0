"""bench_vault's parts: the raw baselines its backup is compared with (`baselines`)."""
