"""Test and bench harness: a clade of real `clade run` daemons on loopback (as trio.testing is to trio)."""
