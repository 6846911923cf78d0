"""Test and bench harness: real `clade run` daemons on loopback (as trio.testing is to trio).

- process.py: `DaemonProcess`, one daemon (log waiting with timeouts, the control API over its
  socket, clean shutdown, stderr tail in every error); `DaemonProc`, one started on construction.
- notify.py: `NotifySocket`, a fake systemd `$NOTIFY_SOCKET`.
- harness.py: `LoopbackClade`, an owner and N golems (`Golem`), `EventLog`, and `clade demo`.
- styx_server.py: the reference Styx server.
"""
