"""The benchmarks' shared harness: every bench is a scenario on it.

- `workload`: the seeded DeFi-flavoured `Generator` (entries, entry bodies, episodes,
  queries) and the query/text helpers every bench draws its data from;
- `ops`: the seeded CRDT op workload of four signing replicas (bench_crdt, bench_micro);
- `seed`: every direct write a bench makes into a Grimoire (`seed_entry`, `seed_entries`,
  `seed_warning`), so a change of the store's write door is adapted in one file;
- `stats`: percentiles, latency / rate / size summaries, intervals, slopes, timing helpers;
- `machine`: `machine_info` (CPU model, cores, kernel, versions, memory, load, disk, git
  HEAD), other processes' CPU during a section (`Sections`, `HostLoad`), /proc readers;
- `report`: progress lines, aligned tables, the work directory, a bench's `main`
  (`main_in_workdir`), and `emit`;
- `daemon`: one `clade run` subprocess with a fake `$NOTIFY_SOCKET`, and /proc samples of
  it (bench_api, bench_recall_daemon, bench_styx, bench_locomo);
- `drive`: request drivers against one `Daemon` (sequential, concurrent, a status probe);
- `clade`: a loopback clade of `daemon.testing.harness` golems driven from threads (kept
  `daemon.client.DaemonClient`s per golem, pacing, deliveries, embedders drained, daemon CPU;
  bench_clade, bench_strangers, bench_recovery);
- `rusage`: a measured step in a child process (RSS sampled, peak RSS and CPU from wait4);
- `profile`: py-spy recordings of running daemons and a summary of where their CPU went
  (ours against py-libp2p, trio, the model…; bench_clade `--profile DIR`), and the top
  functions of an in-process cProfile run (bench_crdt `--profile`);
- `vectors`: the recall benches' stores of generated entries with perturbed real
  embeddings, and their RSS probe (bench_recall, bench_recall_options).

Every API client is `daemon/client.py`'s (`DaemonClient`, or an `Endpoint`'s undecoded httpx
client where a bench reads statuses itself). `daemon`, `drive`, `clade`, `ops`, `seed`,
`profile` and `vectors` are imported by name (they pull in httpx, numpy, the daemon): the
package itself imports only what every bench needs.

The result document
-------------------
Every bench ends its stdout with exactly one JSON line (`emit`), an object with these keys:

    schema         "clade-bench/1"
    bench          the module's subject: "store", "crdt", "micro", "recall", "recall_options",
                   "recall_daemon", "vault", "api", "clade", "curator", "styx",
                   "strangers", "recovery", "locomo", "fusion_cv", "footprint", "scale"
    command        how it was run, e.g. "python -m bench.bench_store --entries 1000"
    started_utc    ISO 8601, when the process started
    machine        `machine_info()`: cpu_model, cpu_count, cpus_usable, kernel, python, sqlite,
                   versions {package: version}, mem_gib {MemTotal, MemAvailable},
                   loadavg_start [1, 5, 15 min], code {head, modified}, disk {path, device,
                   fstype, mount_point, free_gib, rotational, model} when the bench has a work
                   directory; loadavg_end when the bench records it; a bench may add keys
                   (e.g. libsodium, zstandard)
    params         the bench's knobs after defaults (sizes, seeds, counts, flags)
    results        the bench's measured sections, keyed by section (e.g. "remember_single",
                   "join", "extract"); every figure the table prints comes from here.
                   Latencies are objects {p50_ms, p90_ms, p99_ms, max_ms, mean_ms, samples}
                   (`stats.summary` / `stats.latency_summary`); rates are per second and say
                   so in their key (entries_per_s, ops_s, mb_s); bench_micro's are pyperf
                   means in microseconds (mean_us, stdev_us)
    total_seconds  wall clock of the whole run
    failed         what went wrong (strings); [] when nothing did. A bench exits non-zero
                   when this is not empty

bench_recall_options with `--out DIR` also writes the line to DIR/recall_options.json.

Benches are run as modules from the repository root (`python -m bench.bench_x`): nothing in
bench/ shadows a package and nothing edits `sys.path`. A child process of a bench is started
with `report.bench_command(module, ...)` from the repository root.
"""

from .machine import HostLoad, Sections, machine_info, rss_kib
from .report import emit, machine_rows, out, print_rows, print_table, progress, workdir
from .stats import dist, latency_summary, percentile, rate_summary, size_summary, summary, timed, timed_calls
from .workload import Generator, defi_texts, short_queries

__all__ = [
    "Generator",
    "HostLoad",
    "Sections",
    "defi_texts",
    "dist",
    "emit",
    "latency_summary",
    "machine_info",
    "machine_rows",
    "out",
    "percentile",
    "print_rows",
    "print_table",
    "progress",
    "rate_summary",
    "rss_kib",
    "short_queries",
    "size_summary",
    "summary",
    "timed",
    "timed_calls",
    "workdir",
]
