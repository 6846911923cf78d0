"""Clade key rotation end to end: the owner's CLI, `clade join` of a rotation bundle on running
daemons (no restart: the CLI's POST and SIGHUP), gossip across the rotation, the grace period,
backups before and after, and what the revoked golem is left with.

Network tests start real `clade run` daemons on 127.0.0.1 (`daemon.testing.harness`) and wait
on polled state or events with deadlines, never on fixed sleeps.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import time
from pathlib import Path
from typing import Any

import nacl.exceptions
import nacl.secret
import pytest

from crdt import CausalContext, Delta, RemoteProtocolError
from crypto import Identity, MembershipError, Reason
from crypto.rotation import RotationBundle
from crypto.vault import VaultError, VaultKeys, clade_key_id, read_header
from daemon.datadir import DataDir
from daemon.p2p.gossip import GossipCodec
from daemon.service.backup import verify_backup
from daemon.testing.harness import EventLog, Golem, LoopbackClade
from tests.helpers.cli import CliRunner, clade_subprocess
from tests.helpers.polling import eventually


def write(golem: Golem, content: str) -> str:
    """An entry that crosses at once: a regime shift (these texts differ by a word or two, so as
    warnings the later ones would be held as repeats of one gossiped within 24 h)."""
    return str(golem.call("POST", "/v1/memory", json={"content": content, "memory_type": "regime_shift"})["id"])


def ids_on(golem: Golem) -> set[str]:
    return {e["id"] for e in golem.call("GET", "/v1/entries", params={"limit": 10_000})["entries"]}


def counters(golem: Golem) -> dict[str, int]:
    return dict(golem.call("GET", "/v1/status")["counters"])


def clade(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run the real `clade` console script with --json; its document."""
    run = clade_subprocess(["--json", *args], env=env)
    assert run.returncode == 0, run.stderr.decode()
    return dict(json.loads(run.stdout))


def rotate(owner_dir: Path, out: Path, members: list[Golem]) -> dict[str, Any]:
    """`clade owner rotate`, naming the members (the harness admits without the owner's register)."""
    return clade("owner", "rotate", "--owner-dir", str(owner_dir), "--out", str(out),
                 *[arg for g in members for arg in ("--member", g.peer_id)])


def join(golem: Golem, bundle: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    return clade("--data-dir", str(golem.data.root), "join", str(bundle), env=env)


@pytest.mark.slow
def test_rotation_converges_with_no_lost_op_and_the_revoked_golem_gets_no_key(tmp_path: Path) -> None:
    lc = LoopbackClade(tmp_path, 4)
    a, b, d, r = lc.golems
    owner_dir, bundles = tmp_path / "owner", tmp_path / "bundles"
    watch: EventLog | None = None
    try:
        lc.start_all()
        written = [write(g, f"before the revocation, from {g.name}") for g in (a, b, d, r)]
        eventually(lambda: set(written) <= ids_on(a) & ids_on(b) & ids_on(d), what="everyone has the first writes")

        # the owner revokes r (its own CLI: owner_dir/revocations.bin), a adopts it, b and d follow
        clade("owner", "revoke", r.peer_id, "--owner-dir", str(owner_dir), "--out", str(tmp_path / "rev.bin"))
        a.call_bytes("POST", "/v1/revocations", (tmp_path / "rev.bin").read_bytes())
        for g in (b, d):
            eventually(lambda g=g: (g.call("GET", "/v1/status")["p2p"] or {}).get("revocations_version") == 1,
                       what=f"the revocation list on {g.name}")
        eventually(lambda: r.peer_id not in a.members_connected() | b.members_connected() | d.members_connected(),
                   what="r dropped")

        doc = rotate(owner_dir, bundles, [a, b, d, r])
        assert doc["epoch"] == 1 and doc["left_out"] == {r.peer_id: "revoked"}
        assert sorted(Path(p).name for p in doc["bundles"]) == sorted(f"{g.peer_id}.rotation" for g in (a, b, d))
        assert not (bundles / f"{r.peer_id}.rotation").exists()

        # a first, through the CLI, which asks the running daemon to reload: same process, new epoch
        pid = a.proc.pid if a.proc else None
        joined = join(a, bundles / f"{a.peer_id}.rotation")
        assert joined["key_epoch"] == 1 and joined["reloaded"]["epoch"] == 1 and joined["reloaded"]["changed"]
        assert a.running and a.proc is not None and a.proc.pid == pid
        written += [write(g, f"a rotated, b and d not yet: from {g.name}") for g in (a, b, d)]
        # a's epoch-1 gossip is unreadable for b and d (counted; anti-entropy carries it), while
        # a still hears their epoch-0 gossip within the grace
        eventually(lambda: counters(b).get("gossip_rejected_unknown_epoch", 0) >= 1, what="b unable to open epoch 1",
                   state=lambda: counters(b))
        eventually(lambda: counters(a).get("gossip_accepted_old_epoch", 0) >= 2, what="a hearing b and d at epoch 0",
                   state=lambda: counters(a))

        # b: the key is installed while the CLI ignores the daemon, then SIGHUP reloads it
        assert join(b, bundles / f"{b.peer_id}.rotation", env={"CLADE_NO_DAEMON": "1"})["reloaded"] is None
        assert b.proc is not None
        os.kill(b.proc.pid, signal.SIGHUP)
        eventually(lambda: counters(b).get("keys_reloaded", 0) == 1, what="b reloading on SIGHUP")
        written += [write(g, f"a and b rotated, d not yet: from {g.name}") for g in (a, b, d)]

        join(d, bundles / f"{d.peer_id}.rotation")
        watch = EventLog(d.socket).start()
        marker = write(a, "everyone rotated: from a, at epoch 1")
        written.append(marker)
        watch.wait_for(lambda name, data: name == "entries_received" and marker in data["ids"]
                       and data["via"] == "gossip", timeout=30)  # d opened a's epoch-1 envelope
        written += [write(g, f"after the rotation, from {g.name}") for g in (b, d)]

        for g in (a, b, d):
            g.call("POST", "/v1/sync", json={})
        for g in (a, b, d):
            eventually(lambda g=g: set(written) <= ids_on(g),
                       what=f"every write on {g.name}", state=lambda g=g: set(written) - ids_on(g))
        digests = {g.call("GET", "/v1/state-digest")["shared"] for g in (a, b, d)}
        assert len(digests) == 1

        # what r is left with: epoch 0 only; a real epoch-1 envelope from a does not open with it
        r_membership, r_ring = r.data.load_keys() or pytest.fail("r lost its membership")
        assert r_ring.epochs == [0]
        a_membership, a_ring = a.data.load_keys() or pytest.fail("a lost its membership")
        assert a_ring.epochs == [0, 1]
        sealed = GossipCodec(identity=a.data.load_identity(), membership=a_membership, keyring=lambda: a_ring,
                             revocations=lambda: None, max_skew_ms=60_000).seal(Delta((), CausalContext()),
                                                                                now_ms=int(time.time() * 1000))
        r_codec = GossipCodec(identity=r.data.load_identity(), membership=r_membership, keyring=lambda: r_ring,
                              key_grace_ms=lambda: 10**12, revocations=lambda: None, max_skew_ms=60_000)
        with pytest.raises(RemoteProtocolError) as refused:
            r_codec.open(sealed, publisher=a.peer_id, now_ms=int(time.time() * 1000))
        assert refused.value.reason == "unknown_epoch"
        with pytest.raises(nacl.exceptions.CryptoError):
            nacl.secret.SecretBox(r_ring.current.key).decrypt(sealed[5:])
        r_identity = r.data.load_identity()
        for bundle in bundles.iterdir():
            with pytest.raises(MembershipError) as wrong:
                RotationBundle.open(bundle.read_bytes(), r_identity, r_membership)
            assert wrong.value.reason is Reason.WRONG_PEER
        # a's backups are sealed to the owner and a itself (not the clade key): r's keys open none
        # of them, nor does the clade's current key; a's own identity does
        backup = Path(a.call("POST", "/v1/backup", json={})["path"])
        with pytest.raises(VaultError, match="none of the keys"):
            verify_backup(backup, VaultKeys(clade_key=r_ring.current.key, x25519=r_identity.x25519_private_key()))
        with pytest.raises(VaultError, match="none of the keys"):
            verify_backup(backup, VaultKeys(clade_key=a_ring.current.key))
        own = VaultKeys(x25519=a.data.load_identity().x25519_private_key())
        assert verify_backup(backup, own).golem == a.peer_id
    finally:
        if watch is not None:
            watch.close()
        lc.close()


@pytest.mark.slow
def test_old_epoch_gossip_is_refused_after_the_grace_and_the_op_still_arrives(tmp_path: Path) -> None:
    lc = LoopbackClade(tmp_path, 2)
    a, b = lc.golems
    bundles = tmp_path / "bundles"
    try:
        lc.start_all()
        rotate(tmp_path / "owner", bundles, [a, b])
        join(a, bundles / f"{a.peer_id}.rotation")
        within = write(b, "b at epoch 0, inside a's grace")
        eventually(lambda: within in ids_on(a), what="b's epoch-0 write on a")
        assert counters(a).get("gossip_accepted_old_epoch", 0) >= 1

        # the grace ends (here: the operator sets it to 0 and sends SIGHUP; the clock does the same)
        config = a.data.config_path
        config.write_text(config.read_text().replace("# key_grace_s = 86400.0", "key_grace_s = 0.0"))
        reloads = counters(a).get("event_config_reloaded", 0)
        assert a.proc is not None
        os.kill(a.proc.pid, signal.SIGHUP)
        eventually(lambda: counters(a).get("event_config_reloaded", 0) > reloads, what="a's config reload")
        late = write(b, "b still at epoch 0, after a's grace")
        eventually(lambda: counters(a).get("gossip_rejected_epoch_expired", 0) >= 1,
                   what="a refusing epoch 0", state=lambda: counters(a))

        # b rotates; one anti-entropy round brings the refused op: nothing is lost
        join(b, bundles / f"{b.peer_id}.rotation")
        a.call("POST", "/v1/sync", json={})
        eventually(lambda: late in ids_on(a), what="the refused op by anti-entropy")
        watch = EventLog(a.socket).start()
        try:
            fresh = write(b, "b at epoch 1")
            watch.wait_for(lambda name, data: name == "entries_received" and fresh in data["ids"]
                           and data["via"] == "gossip", timeout=30)
        finally:
            watch.close()
        assert counters(a).get("gossip_rejected_epoch_expired", 0) >= 1
    finally:
        lc.close()


def test_backups_after_rotation_use_the_new_key_and_old_ones_still_restore(
        cli: CliRunner, data_dir: DataDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Backups shared with the clade (`[backup] share_with_clade`: by default they are sealed to
    the owner and the golem only) follow the key's epochs."""
    monkeypatch.setenv("CLADE_BACKUP__SHARE_WITH_CLADE", "true")
    owner_dir = tmp_path / "owner"
    other = DataDir(tmp_path / "revoked")
    other.init()
    me, them = data_dir.load_identity(), other.load_identity()
    assert cli("owner", "init", "--owner-dir", str(owner_dir), "--clade", "alpha").code == 0
    for peer, bundle in ((me.peer_id, tmp_path / "me.bundle"), (them.peer_id, tmp_path / "them.bundle")):
        assert cli("owner", "admit", peer, "--owner-dir", str(owner_dir), "--out", str(bundle)).code == 0
    assert cli("join", str(tmp_path / "me.bundle")).code == 0
    assert clade("--data-dir", str(other.root), "join", str(tmp_path / "them.bundle"))["key_epoch"] == 0
    old, old_full, new = tmp_path / "old.vault", tmp_path / "old-full.vault", tmp_path / "new.vault"
    assert cli("backup", "--out", str(old)).code == 0
    assert cli("backup", "--out", str(old_full), "--include-identity").code == 0
    epoch0 = data_dir.load_keys()[1].current.key  # type: ignore[index]

    assert cli("owner", "revoke", them.peer_id, "--owner-dir", str(owner_dir), "--out", str(tmp_path / "r")).code == 0
    rotated = cli("--json", "owner", "rotate", "--owner-dir", str(owner_dir), "--out", str(tmp_path / "b"))
    assert rotated.code == 0, rotated.err
    assert rotated.json()["left_out"] == {them.peer_id: "revoked"} and len(rotated.json()["bundles"]) == 1
    joined = cli("--json", "join", str(tmp_path / "b" / f"{me.peer_id}.rotation"))
    assert joined.json()["epochs"] == [0, 1] and joined.json()["reloaded"] is None
    assert cli("--json", "join", str(tmp_path / "b" / f"{me.peer_id}.rotation")).json()["added"] is False
    epoch1 = data_dir.load_keys()[1].current.key  # type: ignore[index]
    for name in ("clade.key", "clade.keys"):
        assert stat.S_IMODE((data_dir.root / name).stat().st_mode) == 0o600
    assert (data_dir.root / "clade.key").read_bytes() == epoch1 != epoch0

    assert cli("backup", "--out", str(new)).code == 0
    with old.open("rb") as fh:
        assert ("clade", clade_key_id(epoch0)) in [(k, i) for k, i, _ in read_header(fh)[0].recipients]
    with new.open("rb") as fh:
        ids = [(k, i) for k, i, _ in read_header(fh)[0].recipients]
    assert ("clade", clade_key_id(epoch1)) in ids and ("clade", clade_key_id(epoch0)) not in ids
    for backup in (old, new):
        assert cli("backup", "verify", str(backup)).code == 0  # the golem's keyring opens both
    # the revoked golem kept epoch 0: what was sealed before is as readable to it as before; nothing after
    assert clade("--data-dir", str(other.root), "backup", "verify", str(old))["ok"] is True
    refused = clade_subprocess(["--data-dir", str(other.root), "backup", "verify", str(new)])
    assert refused.returncode == 2 and b"none of the keys" in refused.stderr

    # restoring the golem from its pre-rotation backup (keys inside, epoch 0 only) keeps the newer key
    restored = cli("restore", str(old_full), "--force")
    assert restored.code == 0, restored.err
    ring = data_dir.load_keys()[1]  # type: ignore[index]
    assert ring.epochs == [0, 1] and ring.current.key == epoch1
    assert (data_dir.root / "clade.key").read_bytes() == epoch1
    assert cli("backup", "verify", str(new)).code == 0

    # the operator drops the old key: the clade key no longer opens old backups; the owner's key
    # does, and so does the golem's own identity (a recipient of its every backup)
    dropped = cli("--json", "keys", "--drop-before", "1")
    assert dropped.json()["dropped"] == [0] and [k["epoch"] for k in dropped.json()["keys"]] == [1]
    assert cli("backup", "verify", str(old), "--clade-key", str(data_dir.root / "clade.key")).code == 2
    assert cli("backup", "verify", str(old), "--owner-dir", str(owner_dir)).code == 0
    assert cli("backup", "verify", str(old), "--identity-key", str(data_dir.identity_path)).code == 0
    assert Identity.load(data_dir.identity_path).peer_id == me.peer_id
