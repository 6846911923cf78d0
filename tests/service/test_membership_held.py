"""The daemon reads its membership once and keeps it (daemon/service/peering.py): a digest or a
status never re-reads and re-parses key files, so a certificate damaged on disk while the
daemon runs does not turn every digest into a 500; SIGHUP / `clade keys reload` read it again."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import trio

from crypto import OwnerKey
from daemon.config import Config
from daemon.datadir import DataDir
from daemon.errors import UsageError
from daemon.service.peering import Peering
from daemon.testing.harness import LoopbackClade


def _peering(data: DataDir) -> Peering:
    return Peering(data, config=Config, counters=Counter(), publish=lambda event, doc: None)


def test_membership_is_read_once_kept_through_damage_and_reread_on_reload(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    data = DataDir(tmp_path / "g")
    data.init()
    LoopbackClade.admit(data, OwnerKey.create(tmp_path / "owner", "test-clade"))
    peering = _peering(data)
    reads = Counter[str]()
    original = DataDir.load_membership

    def counted(self: DataDir) -> object:
        reads["membership"] += 1
        return original(self)

    monkeypatch.setattr(DataDir, "load_membership", counted)
    first = peering.membership()
    assert first is not None and first.clade_name == "test-clade"
    data.membership_path.write_bytes(b"\x00 damaged on disk \x00")
    for _ in range(5):  # what five digests and a status would ask
        assert peering.membership() is first
    assert reads["membership"] == 1
    with pytest.raises(UsageError, match="not reloaded"):
        trio.run(peering.reload_keys)  # the damage is reported on reload; the kept one stays
    assert peering.membership() is first


def test_a_certificate_unreadable_at_start_answers_as_outside_a_clade(tmp_path: Path) -> None:
    data = DataDir(tmp_path / "g")
    data.init()
    LoopbackClade.admit(data, OwnerKey.create(tmp_path / "owner", "test-clade"))
    data.membership_path.write_bytes(b"not a certificate")
    assert _peering(data).membership() is None  # logged once; no exception for every caller
