"""The CLI's backend (daemon/cli/backends): one interface, two implementations that agree.

`backend_for` picks the daemon when one runs (unless `CLADE_NO_DAEMON`), the store otherwise;
both classes implement every `Backend` method with its signature; and for the same operation
on the same data a real daemon and the store answer with the same document.
"""

from __future__ import annotations

import inspect

import pytest

from crdt import InvalidValue
from daemon.cli.backends import Backend, DaemonBackend, StoreBackend, backend_for
from daemon.datadir import DataDir
from daemon.errors import NotFound, UsageError
from daemon.testing.process import DaemonProc


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
    assert isinstance(backend_for(data_dir, store_only=True), StoreBackend)
    monkeypatch.setenv("CLADE_NO_DAEMON", "1")
    assert isinstance(backend_for(data_dir), StoreBackend)
    monkeypatch.delenv("CLADE_NO_DAEMON")
    daemon.stop()
    assert isinstance(backend_for(data_dir), StoreBackend)


def test_the_daemon_refuses_store_only_recall_options(daemon: DaemonProc, data_dir: DataDir) -> None:
    with pytest.raises(ValueError, match="store-only"):
        backend_for(data_dir).recall("gas", k=3, kinds=[], min_importance=None, pad=None, keyword_only=True)


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
