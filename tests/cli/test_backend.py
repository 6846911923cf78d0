"""The CLI's backend (daemon/cli/backends): one interface, two implementations that agree.

`backend_for` picks the daemon when one runs (unless `CLADE_NO_DAEMON`), the store otherwise;
both classes implement every `Backend` method with its signature; and for the same operation
on the same data a real daemon and the store answer with the same document.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from crdt import InvalidValue
from daemon.cli.backends import Backend, DaemonBackend, StoreBackend, backend_for
from daemon.datadir import DataDir
from daemon.errors import NotFound, UsageError
from daemon.grimoire import Grimoire
from daemon.grimoire.recall import RecallQuery
from daemon.testing.process import DaemonProc
from tests.helpers.cli import CliRunner


def _operations() -> list[str]:
    return sorted(name for name, value in vars(Backend).items()
                  if inspect.isfunction(value) and not name.startswith("_"))


def test_the_interface_has_the_cli_operations() -> None:
    assert {"remember", "retract", "endorse", "entry", "entries", "forget", "unarchive", "outcome", "vitality",
            "set_vitality", "recall", "digest", "feedback", "working_memory", "set_working_memory",
            "close_working_memory", "flush", "import_lessons", "curator_run", "verify_episode", "styx_status",
            "install_revocations", "reload_keys"} <= set(_operations())


@pytest.mark.parametrize("cls", [DaemonBackend, StoreBackend])
@pytest.mark.parametrize("name", _operations())
def test_both_backends_implement_every_operation_with_its_signature(cls: type[Backend], name: str) -> None:
    implemented = getattr(cls, name)
    assert implemented is not getattr(Backend, name), f"{cls.__name__}.{name} is the Protocol's stub"
    assert inspect.signature(implemented) == inspect.signature(getattr(Backend, name))


def test_without_a_daemon_the_store(data_dir: DataDir) -> None:
    assert isinstance(backend_for(data_dir), StoreBackend)
    assert backend_for(data_dir).reload_keys() is None  # no daemon holds keys to reload


def test_with_a_daemon_the_daemon_unless_told_otherwise(daemon: DaemonProc, data_dir: DataDir,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(backend_for(data_dir), DaemonBackend)
    monkeypatch.setenv("CLADE_NO_DAEMON", "1")
    assert isinstance(backend_for(data_dir), StoreBackend)
    monkeypatch.delenv("CLADE_NO_DAEMON")
    daemon.stop()
    assert isinstance(backend_for(data_dir), StoreBackend)


# Every option of `clade recall`, alone: the CLI's answer is the API's, id for id and in order.
RECALL_OPTIONS: list[list[str]] = [
    [], ["--kind", "warning"], ["--category", "gas_timing"], ["--min-importance", "0.5"],
    ["--min-confidence", "0.6"], ["--include-sensitive"], ["--keyword-only"], ["--pad", "0.5,0.2,-0.3"],
    ["--k", "2"],
]


def test_cli_recall_with_every_option_is_the_apis_and_writes_nothing(
        daemon: DaemonProc, data_dir: DataDir, cli: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    """One recall path: `clade recall` with any option, while a daemon runs, asks the daemon (it
    never opens the store: no vector written from the CLI), and its ids come back in the API's
    order; the store's own path (`CLADE_NO_DAEMON` beside the running daemon) ranks the same ids
    in the same order and opens no write transaction."""
    backend = backend_for(data_dir)
    written = [
        ("Gas on mainnet is cheapest at 03:00 UTC on Sundays.", "insight", 0.9, 0.8, "gas_timing", "public"),
        ("Gas spikes when an NFT mint starts: wait ten minutes.", "warning", 0.7, 0.4, "gas_timing", "public"),
        ("Our gas budget for this month is 0.4 ETH.", "fact", 0.95, 0.6, None, "sensitive"),
        ("Priority fees above 3 gwei rarely pay off for swaps.", "heuristic", 0.5, 0.3, "gas_timing", "public"),
        ("Gas refunds were removed in the London fork.", "fact", 0.8, 0.2, None, "public"),
        ("Bridges charge gas on both chains; batch withdrawals.", "insight", 0.4, 0.7, "liquidity_conditions",
         "public"),
    ]
    for content, kind, confidence, importance, category, sensitivity in written:
        backend.remember({"content": content, "memory_type": kind, "confidence": confidence,
                          "importance": importance, "sensitivity": sensitivity,
                          **({"category": category} if category else {})})
    backend.recall(RecallQuery(text="gas", k=10))  # the daemon embeds its tail: every entry has its vector now

    opened: list[str] = []
    real_open = DataDir.open_store

    def counted(self: DataDir, *args: Any, **kwargs: Any) -> Grimoire:
        opened.append(str(self.root))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(DataDir, "open_store", counted)
    through_cli = {}
    for options in RECALL_OPTIONS:
        got = cli("--json", "recall", "gas fees on mainnet", *options)
        assert got.code == 0, got.err
        through_cli[tuple(options)] = [r["id"] for r in got.json()["results"]]
    assert opened == []  # the CLI asked the daemon every time: it never opened the store
    assert through_cli[()] and through_cli[("--include-sensitive",)] != through_cli[()]
    assert len(through_cli[("--k", "2")]) == 2

    transactions: list[int] = []
    real_write = Grimoire._write

    def no_writes(self: Grimoire) -> Any:
        transactions.append(1)
        return real_write(self)

    monkeypatch.setattr(Grimoire, "_write", no_writes)
    monkeypatch.setenv("CLADE_NO_DAEMON", "1")
    for options, ids in through_cli.items():
        got = cli("--json", "recall", "gas fees on mainnet", *options)
        assert got.code == 0, got.err
        assert [r["id"] for r in got.json()["results"]] == ids, options
    assert opened and transactions == []  # on the store itself, beside a live daemon: read, never written


def test_both_backends_give_the_same_documents(daemon: DaemonProc, data_dir: DataDir) -> None:
    via_daemon = backend_for(data_dir)
    store = StoreBackend(data_dir)
    assert isinstance(via_daemon, DaemonBackend)

    first = via_daemon.remember({"content": "Gas on mainnet is cheapest at 03:00 UTC.", "memory_type": "insight",
                                 "metadata": {"tags": ["gas"]}})
    second = via_daemon.remember({"content": "Curve pools depeg under withdrawal queues.",
                                  "memory_type": "warning"})
    via_daemon.set_working_memory("s1", "FACT: the bridge is slow\n")
    via_daemon.set_vitality("declining", 0.5)
    via_daemon.outcome(first["id"], effect="positive", metric="pnl", value=1.5, episode=None, note=None)

    # reads: the daemon's answer is the store's document
    assert via_daemon.entry(first["id"]) == store.entry(first["id"]) == via_daemon.entry(first["id"])
    for kinds, archived in (([], False), (["warning"], True)):
        listed = via_daemon.entries(kinds=kinds, limit=10, archived=archived)
        assert listed == store.entries(kinds=kinds, limit=10, archived=archived)
    assert [e["id"] for e in store.entries(kinds=[], limit=10, archived=False)["entries"]] == [second["id"],
                                                                                               first["id"]]
    assert via_daemon.vitality() == store.vitality()
    assert store.vitality()["phase"] == "declining"
    assert via_daemon.working_memory("s1") == store.working_memory("s1")
    assert store.working_memory("s1")["content"] == "FACT: the bridge is slow\n"

    # errors: the same exception either way
    for backend in (via_daemon, store):
        with pytest.raises(NotFound):
            backend.entry("0" * 32)
    for backend in (via_daemon, store):  # the store's InvalidValue is a usage error too (exit 2)
        with pytest.raises((UsageError, InvalidValue)):
            backend.outcome(first["id"], effect="positive", metric="", value=None, episode=None, note=None)

    # writes: forgetting twice through the daemon, then once on the stopped daemon's store
    assert via_daemon.forget(second["id"]) == {"id": second["id"], "archived": True, "changed": True}
    again = via_daemon.forget(second["id"])
    daemon.stop()
    assert isinstance(backend_for(data_dir), StoreBackend)
    assert store.forget(second["id"]) == again == {"id": second["id"], "archived": True, "changed": False}
    assert store.unarchive(second["id"]) == {"id": second["id"], "archived": False, "changed": True}
