"""Clade sync over libp2p: the host, the hello (membership) exchange, gossip and anti-entropy.

Pure parts (wire messages, peer book, backoff) are separate from the I/O (`node`).
"""
