"""Boot from the Styx archive (daemon/styx/boot.py): a testament archive pushed to the reference
server's vault, fetched by an heir, verified, inherited at 0.3; tampered, truncated and foreign
archives refused with nothing imported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daemon.config import StyxConfig
from daemon.datadir import DataDir
from daemon.grimoire import wall_clock_ms
from daemon.styx import archive, ledger
from daemon.styx.policy import Budget, upload_cost
from daemon.testing.process import DaemonProc
from daemon.testing.styx_server import StyxServer
from tests.helpers.cli import STYX_TOKEN, CliRunner, clade_subprocess
from tests.helpers.styx import styx_env


def _join(cli: CliRunner, data: DataDir, owner_dir: Path, tmp_path: Path, name: str) -> str:
    peer = clade_subprocess(["--data-dir", str(data.root), "id"]).stdout.decode().strip()
    bundle = tmp_path / f"{name}.bundle"
    assert cli("owner", "admit", peer, "--owner-dir", str(owner_dir), "--out", str(bundle)).code == 0
    done = clade_subprocess(["--data-dir", str(data.root), "join", str(bundle)])
    assert done.returncode == 0, done.stderr
    return peer


def _env(styx: StyxServer) -> dict[str, str]:
    return {"CLADE_STYX__URL": styx.url, "CLADE_STYX__TOKEN": STYX_TOKEN, "CLADE_STYX__BACKOFF_BASE_S": "0.05",
            "CLADE_STYX__BACKOFF_CAP_S": "0.1"}


def _heir(cli: CliRunner, owner_dir: Path, tmp_path: Path, name: str) -> DataDir:
    heir = DataDir(tmp_path / name)
    heir.init()
    _join(cli, heir, owner_dir, tmp_path, name)
    return heir


def _inherit(heir: DataDir, styx: StyxServer, peer: str) -> tuple[int, dict[str, object] | str]:
    got = clade_subprocess(["--data-dir", str(heir.root), "inherit", "--from-styx", peer, "--json"], env=_env(styx))
    return got.returncode, (json.loads(got.stdout) if got.returncode == 0 else got.stderr.decode())


def _entries(heir: DataDir) -> int:
    with heir.open_store() as store:
        return int(store.connection.execute("SELECT count(*) FROM entries").fetchone()[0])


@pytest.fixture
def dead(cli: CliRunner, data_dir: DataDir, styx: StyxServer, tmp_path: Path,
         monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str, dict[str, str]]:
    """A golem that wrote its testament with --push: (owner dir, its peer id, content → entry id)."""
    for k, v in _env(styx).items():
        monkeypatch.setenv(k, v)
    owner_dir = tmp_path / "owner"
    assert cli("owner", "init", "--owner-dir", str(owner_dir), "--clade", "alpha").code == 0
    peer = _join(cli, data_dir, owner_dir, tmp_path, "dying")
    ids = {text: cli("remember", text, "--kind", kind, "--confidence", "0.9", "--json").json()["id"]
           for text, kind in (("Never bridge through the old router", "warning"),
                              ("Funding flips before CPI prints", "insight"),
                              ("ETH/USDC 1850-2150: 40k USDC position, +3,412 USDC", "strategy_outcome"),
                              ("Owner prefers max 25% of the book in one pool", "preference"))}
    made = cli("testament", "--out", str(tmp_path / "golem.testament"), "--push", "--json")
    assert made.code == 0, made.err
    doc = made.json()
    assert doc["entries"] == 2 and doc["styx"]["attempts"] == 1 and doc["styx"]["usd"] > 0
    with data_dir.open_store() as store:  # the upload was charged in the month's ledger
        assert store.styx_spent(ledger.month_of(wall_clock_ms())) >= doc["styx"]["usd"]
    assert [o["name"] for o in styx.vault_objects(peer)] == [doc["styx"]["url"].rsplit("/", 1)[1]]
    return owner_dir, peer, ids


def test_an_heir_booted_from_the_archive_holds_the_selection_at_0_3(
        cli: CliRunner, styx: StyxServer, tmp_path: Path, dead: tuple[Path, str, dict[str, str]]) -> None:
    owner_dir, peer, ids = dead
    heir = _heir(cli, owner_dir, tmp_path, "heir")
    code, report = _inherit(heir, styx, peer)
    assert code == 0, report
    assert isinstance(report, dict)
    assert (report["entries"], report["generations"], report["via_archive"]) == (2, {"1": 2}, True)
    assert str(report["from_styx"]).startswith("testament-") and report["golem"] == peer
    with heir.open_store() as store:
        rows = {r[0]: r[1:] for r in store.connection.execute(
            "SELECT id, provenance, local_confidence FROM entries")}
    kept = {ids["Never bridge through the old router"], ids["Funding flips before CPI prints"]}
    assert set(rows) == kept  # the soma (outcome, preference) died with the golem
    for entry_id in kept:
        assert rows[entry_id][0] == "inherited" and rows[entry_id][1] == pytest.approx(0.3)  # not 0.4
    size = styx.vault_path(peer, str(report["from_styx"])).stat().st_size
    with heir.open_store() as store:  # the download, charged by its real size (not a byte, not a MiB, before)
        spent = store.styx_spent(ledger.month_of(wall_clock_ms()))
    assert spent == pytest.approx(upload_cost(StyxConfig(url=styx.url), size))


@pytest.mark.parametrize("damage", ["flip", "truncate", "foreign"])
def test_a_damaged_or_foreign_archive_is_refused_and_nothing_inherited(
        cli: CliRunner, styx: StyxServer, tmp_path: Path, dead: tuple[Path, str, dict[str, str]], damage: str) -> None:
    owner_dir, peer, _ = dead
    (name,) = [o["name"] for o in styx.vault_objects(peer)]
    path = styx.vault_path(peer, name)
    data = path.read_bytes()
    if damage == "flip":
        path.write_bytes(data[:-100] + bytes([data[-100] ^ 1]) + data[-99:])
    elif damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    else:  # another owner's golem puts an archive under the predecessor's name: its certificate is not ours
        other = tmp_path / "other-owner"
        assert cli("owner", "init", "--owner-dir", str(other), "--clade", "beta").code == 0
        stranger = _heir(cli, other, tmp_path, "stranger")
        cert = stranger.load_membership()
        assert cert is not None
        later = archive.archive_name(10**13)  # the newest: the one an heir takes
        path.with_name(later).write_bytes(archive.pack(cert[0].certificate.to_bytes(), archive.unpack(data)[1]))
        styx.store_vault(peer, later, path.with_name(later).read_bytes())
    heir = _heir(cli, owner_dir, tmp_path, f"heir-{damage}")
    code, err = _inherit(heir, styx, peer)
    assert code == 2 and isinstance(err, str) and "nothing was imported" in err, err
    expected = {"flip": "cannot decrypt", "truncate": "truncated", "foreign": "cannot be trusted"}[damage]
    assert expected in err, err
    assert _entries(heir) == 0


@pytest.mark.slow  # starts a daemon (or several CLI processes): make test-slow
def test_a_revoked_predecessor_is_not_inherited(
        cli: CliRunner, styx: StyxServer, tmp_path: Path, dead: tuple[Path, str, dict[str, str]]) -> None:
    """The owner revoked the dead golem (compromised before it died): an heir holding that list
    refuses its archive, from Styx or from the file, and imports nothing."""
    owner_dir, peer, _ = dead
    listing = tmp_path / "revocations.bin"
    assert cli("owner", "revoke", peer, "--owner-dir", str(owner_dir), "--out", str(listing)).code == 0
    heir = _heir(cli, owner_dir, tmp_path, "heir-after-revocation")
    installed = clade_subprocess(["--data-dir", str(heir.root), "revocations", "install", str(listing)])
    assert installed.returncode == 0, installed.stderr
    code, err = _inherit(heir, styx, peer)
    assert code == 2 and isinstance(err, str) and "revoked" in err and "nothing was imported" in err, err
    local = clade_subprocess(["--data-dir", str(heir.root), "inherit", str(tmp_path / "golem.testament")])
    assert local.returncode == 2 and b"revoked" in local.stderr, local.stderr
    assert _entries(heir) == 0
    other = _heir(cli, owner_dir, tmp_path, "heir-without-the-list")  # the control: the same archive, no list
    assert _inherit(other, styx, peer)[0] == 0 and _entries(other) == 2


def test_a_download_is_bounded_by_what_the_budget_pays_for() -> None:
    budget = Budget(monthly=0.0025, price_per_upload=0.001, price_per_mib=0.0001)
    mib = 1024 * 1024
    assert budget.affordable_bytes(10**9, month="2026-11") == 15 * mib  # (0.0025 − 0.001) / 0.0001
    assert budget.transfer_cost(15 * mib) == pytest.approx(0.0025) and budget.transfer_cost(15 * mib + 1) > 0.0025
    budget.charge_upload(0.0015, month="2026-11")
    assert budget.affordable_bytes(10**9, month="2026-11") == 0  # not even one started MiB: nothing fetched
    assert budget.affordable_bytes(7, month="2026-12") == 7  # a new month; the ceiling still holds
    assert Budget(monthly=None).affordable_bytes(99, month="2026-11") == 99


def test_no_archive_is_a_clear_error(cli: CliRunner, data_dir: DataDir, styx: StyxServer, tmp_path: Path) -> None:
    owner_dir = tmp_path / "owner"
    assert cli("owner", "init", "--owner-dir", str(owner_dir), "--clade", "alpha").code == 0
    heir = _heir(cli, owner_dir, tmp_path, "heir")
    code, err = _inherit(heir, styx, "12D3KooWNobodyEverDiedHere")
    assert code != 0 and isinstance(err, str) and "no testament archive" in err and "nothing was imported" in err
    assert _entries(heir) == 0


def test_the_archive_envelope_refuses_what_is_not_one() -> None:
    good = archive.pack(b"cert", b"testament")
    assert archive.unpack(good) == (b"cert", b"testament")
    for bad, why in ((good[:-3], "truncated"), (good + b"x", "truncated"), (b"\x93\x01\x02\x03", "format tag"),
                     (archive.pack(b"", b"t"), "wrong types")):
        with pytest.raises(archive.ArchiveError, match=why):
            archive.unpack(bad)
    assert archive.latest(["backup-1.clade", "testament-9.archive", "testament-10.archive"]) == "testament-10.archive"
    assert archive.latest(["backup-1.clade"]) is None


@pytest.mark.slow  # starts a daemon: the golem runtime's path at birth
def test_post_inherit_boots_a_running_heir_from_the_archive(
        cli: CliRunner, styx: StyxServer, tmp_path: Path, dead: tuple[Path, str, dict[str, str]]) -> None:
    owner_dir, peer, ids = dead
    heir = _heir(cli, owner_dir, tmp_path, "heir")
    daemon = DaemonProc(heir, env={**styx_env(styx, priced=True), "CLADE_P2P__ENABLED": "false"})
    try:
        refused = daemon.request("POST", "/v1/inherit", json={"from_styx": "12D3KooWNobodyEverDiedHere"})
        assert refused.status_code == 400 and "no testament archive" in refused.json()["detail"]
        done = daemon.request("POST", "/v1/inherit", json={"from_styx": peer})
        assert done.status_code == 200, done.text
        report = done.json()
        assert (report["entries"], report["via_archive"], report["golem"]) == (2, True, peer)
        warning = daemon.request("GET", f"/v1/entries/{ids['Never bridge through the old router']}").json()
        assert warning["provenance"] == "inherited" and warning["local_confidence"] == pytest.approx(0.3)
        status = daemon.request("GET", "/v1/styx/status").json()
        assert status["spend"]["calls"] >= 1  # the transfer was charged
    finally:
        assert daemon.stop() == 0
