"""The running daemon: runtime (nursery of services), shared state, backups, logs, sd_notify."""
