"""bench_strangers' parts: its tables (`report`) and its samples of A during a phase (`sampler`).
The stranger dialers it starts are bench/strangers_worker.py (a module of its own: the bench
runs it as a child process)."""
