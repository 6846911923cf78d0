"""Styx: the optional hosted layer — outbox pusher, query fan-in, vault uploads, budgets.

Pure policy (`policy`) is separate from the I/O; off by default, the daemon is complete without it.
"""
