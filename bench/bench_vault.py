"""Benchmark vault backups (`daemon.service.backup`) against raw libsodium, raw zstd and tar | zstd | age.

    .venv/bin/python -m bench.bench_vault [--size-mib N] [--out DIR] [--seed S] [--json-bulk episodes|files]
    .venv/bin/python -m bench.bench_vault --size-mib 32      # a quick run

1. Builds a synthetic store of about N MiB (default 1,024) with `DataDir.init()`: a
   grimoire.db of 5,000 signed entries (`Grimoire.remember_many`), 10,000 small episodes
   with 384-d embeddings, then the bulk, half and half (by bytes on disk):
   - JSON: ~60 KiB payloads of DeFi swap records (fresh random tx hashes, addresses from a
     pool, amounts, gas), as an agent's raw observations would be; stored as real episodes
     (`EpisodeLog.append`, 256 per call; LanceDB encodes them, so what zstd sees is Lance's
     compressed pages) or, with `--json-bulk files`, as plain JSON-lines files of 64 MiB in
     the table directory (what zstd sees is then raw JSON text);
   - incompressible: `os.urandom` files of 64 MiB each inside the LanceDB table directory
     (`episodes/episodes.lance/data/`, which the backup copies whole).
   The zstd ratio of each part is measured and printed, so the mix is visible.
2. `create_backup` (to a clade key and an X25519 key), `verify_backup` (clade key) and
   `restore_backup` (X25519 key) into a fresh directory, each in its own child process: wall
   time, MB/s of plaintext store bytes, CPU time, and peak RSS (`os.wait4`), plus RSS sampled
   over the run; a child that only imports the same modules gives the baseline RSS.
3. On the same machine, in the same run: raw secretstream push and pull of N MiB in 64 KiB
   chunks (`nacl.bindings`), and raw zstd level 3 (python-zstandard, one thread) over the
   store's files.
4. If `age`, `age-keygen`, `zstd` and `tar` are on PATH: `tar | zstd -3 -T1 | age -r` and
   `age -d | zstd -d | tar -x` on the same data dir (plus an fsync of the output, as
   `create_backup` does), and their ratio to clade's backup and restore.

MB is 10^6 bytes, MiB 2^20. Every step reads from a warm page cache (the store was just
written) when RAM is a few times the store's size, as on the machine this was written on.
Prints a table to stdout (progress to stderr), then the JSON result line (bench.common).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import nacl
import nacl.public
import zstandard

from bench.common import Generator, HostLoad, machine_info, machine_rows, print_table, progress
from bench.common.machine import dir_size
from bench.common.report import add_common_args, at_least, bench_command, disk_row, main_in_workdir, not_empty
from bench.common.rusage import RssSampler, rss_bytes, vm_hwm_bytes, wait_child
from bench.common.seed import seed_entries
from bench.common.workload import CHAINS, ERRORS, PROTOCOLS, TOKENS
from bench.vault.baselines import FILLER_PREFIX, JSON_PREFIX, bench_age, bench_secretstream, bench_zstd, dir_files
from crypto.vault import VaultKeys
from daemon.datadir import DataDir
from daemon.grimoire import Episode
from daemon.service.backup import create_backup, restore_backup, verify_backup

ENTRIES = 5_000
ENTRY_BATCH = 500
SMALL_EPISODES = 10_000
SMALL_EPISODE_BATCH = 1_000
BIG_EPISODE_BATCH = 256
PAYLOAD_TARGET = 60 * 1024  # under MAX_PAYLOAD_BYTES (64 KiB)
FILLER_BYTES = 64 * 2**20
RSS_PERIOD_S = 0.05
MB = 1e6
MIB = 2**20


# -- synthetic store ------------------------------------------------------------------------------


class PayloadMaker:
    """Seeded DeFi swap records as JSON text: realistic redundancy, fresh tx hashes."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.pools = [f"0x{rng.getrandbits(160):040x}" for _ in range(400)]
        self.wallets = [f"0x{rng.getrandbits(160):040x}" for _ in range(150)]
        self.protocols: tuple[str, ...] = PROTOCOLS
        self.tokens: tuple[str, ...] = TOKENS
        self.errors: tuple[str, ...] = ERRORS
        self.chains = list(CHAINS)
        self.block = 19_000_000
        self.ts = 1_735_689_600

    def record(self) -> str:
        r = self.rng
        self.block += r.randint(0, 2)
        self.ts += r.randint(0, 13)
        token_in, token_out = r.sample(self.tokens, 2)
        amount = r.lognormvariate(8, 2)
        ok = r.random() < 0.93
        return json.dumps({
            "tx": f"0x{r.getrandbits(256):064x}", "block": self.block, "ts": self.ts,
            "chain_id": r.choice(self.chains), "protocol": r.choice(self.protocols), "pool": r.choice(self.pools),
            "sender": r.choice(self.wallets), "token_in": token_in, "token_out": token_out,
            "amount_in": round(amount, 6), "amount_out": round(amount * r.uniform(0.2, 5), 6),
            "gas_used": r.randint(21_000, 900_000), "gas_price_gwei": round(r.lognormvariate(3, 0.8), 3),
            "slippage_bps": r.randint(0, 300), "status": "ok" if ok else r.choice(self.errors),
            "route": r.sample(self.protocols, r.randint(1, 3)),
        }, separators=(",", ":"))

    def payload(self) -> str:
        parts: list[str] = []
        size = 0
        while size < PAYLOAD_TARGET:
            rec = self.record()
            parts.append(rec)
            size += len(rec) + 1
        return '{"kind":"swap_batch","trades":[' + ",".join(parts) + "]}"


def build_store(root: Path, size_bytes: int, seed: int, json_bulk: str) -> dict[str, Any]:
    """A data directory of about `size_bytes` (see the module docstring); what it holds."""
    t0 = time.perf_counter()
    data = DataDir(root)
    report = data.init()
    identity = data.load_identity()
    gen = Generator(seed)
    progress(f"building a ~{size_bytes / MIB:,.0f} MiB store in {root} (golem {report.peer_id})")

    progress(f"  grimoire.db: {ENTRIES:,} entries, remember_many() in transactions of {ENTRY_BATCH}")
    with data.open_store() as store:
        for i in range(0, ENTRIES, ENTRY_BATCH):
            seed_entries(store, [gen.entry() for _ in range(min(ENTRY_BATCH, ENTRIES - i))], identity)
        store.checkpoint()

    log = data.open_episodes()
    observed = [1_735_689_600_000]

    def next_ms() -> int:
        observed[0] += gen.rng.randint(500, 3_500)
        return observed[0]

    progress(f"  episodes: {SMALL_EPISODES:,} small ones with embeddings, append() of {SMALL_EPISODE_BATCH:,}")
    for i in range(0, SMALL_EPISODES, SMALL_EPISODE_BATCH):
        log.append([gen.episode(next_ms(), True) for _ in range(min(SMALL_EPISODE_BATCH, SMALL_EPISODES - i))])
    base_bytes = dir_size(root)

    bulk = max(0, size_bytes - base_bytes)
    table = data.episodes_path / "episodes.lance"
    json_target = bulk // 2
    maker = PayloadMaker(random.Random(seed + 1))
    big_episodes = payload_bytes = json_files = 0
    gen_s = append_s = 0.0
    table_start = dir_size(table)
    if json_bulk == "episodes":
        progress(f"  JSON half: episodes with ~{PAYLOAD_TARGET // 1024} KiB JSON payloads, append() of "
                 f"{BIG_EPISODE_BATCH}, until the table grows by {json_target / MIB:,.0f} MiB")
        while dir_size(table) - table_start < json_target:
            g0 = time.perf_counter()
            rows = []
            for _ in range(BIG_EPISODE_BATCH):
                f = gen.fields()
                payload = maker.payload()
                payload_bytes += len(payload)
                rows.append(Episode(summary=gen.sentence(0), observed_ms=next_ms(), block_number=int(f["block"]),
                                    protocol=f["proto"], payload_json=payload,
                                    curiosity=round(gen.rng.random(), 4), importance=0.5))
            g1 = time.perf_counter()
            log.append(rows)
            append_s += time.perf_counter() - g1
            gen_s += g1 - g0
            big_episodes += len(rows)
            grown = dir_size(table) - table_start
            progress(f"    {big_episodes:,} episodes ({payload_bytes / MB:,.0f} MB of payload_json), table "
                     f"+{grown / MIB:,.0f} MiB (generate {gen_s:.1f}s, append {append_s:.1f}s)")
        json_disk_bytes = dir_size(table) - table_start
    else:
        progress(f"  JSON half: {json_target / MIB:,.0f} MiB of plain JSON lines (the same ~{PAYLOAD_TARGET // 1024} "
                 f"KiB payloads) in {FILLER_BYTES // MIB} MiB files under {table.relative_to(root)}/data/")
        g0 = time.perf_counter()
        while payload_bytes < json_target:
            path = table / "data" / f"{JSON_PREFIX}{json_files:03d}.jsonl"
            with path.open("w") as fh:
                size = 0
                while size < FILLER_BYTES and payload_bytes + size < json_target:
                    line = maker.payload() + "\n"
                    fh.write(line)
                    size += len(line)
            payload_bytes += size
            json_files += 1
            progress(f"    {payload_bytes / MIB:,.0f} MiB of JSON written ({time.perf_counter() - g0:.1f}s)")
        gen_s = time.perf_counter() - g0
        json_disk_bytes = payload_bytes
    episodes_version = log.version
    episodes_rows = log.count()
    del log

    filler_target = max(0, size_bytes - dir_size(root))
    progress(f"  incompressible bulk: {filler_target / MIB:,.0f} MiB of os.urandom in "
             f"{FILLER_BYTES // MIB} MiB files under {table.relative_to(root)}/data/")
    filler_files = 0
    written = 0
    while written < filler_target:
        n = min(FILLER_BYTES, filler_target - written)
        path = table / "data" / f"{FILLER_PREFIX}{filler_files:03d}.bin"
        with path.open("wb") as out:
            for off in range(0, n, 8 * MIB):
                out.write(os.urandom(min(8 * MIB, n - off)))
        written += n
        filler_files += 1
    os.sync()
    files = dir_files(root)
    return {
        "root": str(root),
        "golem": report.peer_id,
        "entries": ENTRIES,
        "small_episodes": SMALL_EPISODES,
        "json_bulk": json_bulk,
        "big_episodes": big_episodes,
        "json_files": json_files,
        "episode_rows": episodes_rows,
        "episodes_version": episodes_version,
        "payload_target_bytes": PAYLOAD_TARGET,
        "payload_json_bytes": payload_bytes,
        "grimoire_db_bytes": data.db_path.stat().st_size,
        "base_bytes": base_bytes,
        "json_disk_bytes": json_disk_bytes,
        "incompressible_bytes": written,
        "incompressible_files": filler_files,
        "total_bytes": sum(p.stat().st_size for p in files),
        "files": len(files),
        "largest_file_bytes": max(p.stat().st_size for p in files),
        "largest_file": str(max(files, key=lambda p: p.stat().st_size).relative_to(root)),
        "generate_seconds": round(gen_s, 2),
        "append_seconds": round(append_s, 2),
        "seconds": round(time.perf_counter() - t0, 1),
    }


# -- child processes (one per measured step) --------------------------------------------------


def child_main(step: str, params_path: Path) -> int:
    params = json.loads(params_path.read_text())
    result: dict[str, Any] = {"step": step, "rss_at_start_mib": round(rss_bytes() / MIB, 1)}
    clade_key = bytes.fromhex(params["clade_key"])
    x25519 = nacl.public.PrivateKey(bytes.fromhex(params["x25519_secret"]))
    with RssSampler(RSS_PERIOD_S) as sampler:
        t0 = time.perf_counter()
        if step == "backup":
            rep = create_backup(DataDir(Path(params["data"])), out=Path(params["file"]), clade_keys=[clade_key],
                                x25519_recipients=[bytes(x25519.public_key)],
                                recipient_names=["bench clade key", "bench x25519"], golem=params["golem"])
            result.update(file_bytes=rep.bytes, files=rep.files)
        elif step == "verify":
            vrep = verify_backup(Path(params["file"]), VaultKeys(clade_key=clade_key))
            result.update(plaintext_bytes=vrep.bytes, files=vrep.files)
        elif step == "restore":
            rrep = restore_backup(Path(params["file"]), DataDir(Path(params["target"])), VaultKeys(x25519=x25519))
            result.update(plaintext_bytes=rrep.bytes, files=rrep.files)
        elif step != "baseline":
            raise SystemExit(f"unknown step {step!r}")
        t1 = time.perf_counter()
    result["seconds"] = t1 - t0
    result["rss_profile"] = sampler.profile(t0, t1)
    result["vm_hwm_mib"] = round(vm_hwm_bytes() / MIB, 1)
    Path(params["result"]).write_text(json.dumps(result))
    return 0


def run_step(step: str, params: dict[str, Any], workdir: Path) -> dict[str, Any]:
    result_path = workdir / f"result-{step}.json"
    params = {**params, "result": str(result_path)}
    params_path = workdir / f"params-{step}.json"
    params_path.write_text(json.dumps(params))
    argv = bench_command("bench_vault", "--child", step, "--child-params", str(params_path))
    usage = wait_child(argv, workdir)
    params_path.unlink()
    if usage["code"] != 0:
        raise RuntimeError(f"child step {step!r} exited with {usage['code']}")
    result: dict[str, Any] = json.loads(result_path.read_text())
    result_path.unlink()
    result.update(process_wall_s=round(usage["wall"], 3), cpu_user_s=round(usage["utime"], 3),
                  cpu_sys_s=round(usage["stime"], 3), peak_rss_mib=round(usage["maxrss_kib"] * 1024 / MIB, 1))
    result["seconds"] = round(result["seconds"], 3)
    return result


# -- machine information --------------------------------------------------------------------------


# libsodium is linked statically into PyNaCl's wheel and its version is not exposed at run time;
# these are the versions PyNaCl's CHANGELOG.rst says each release bundles.
_BUNDLED_LIBSODIUM = {
    "1.5.0": "1.0.18-stable", "1.6.0": "1.0.20-stable (2025-08-27 build)",
    "1.6.1": "1.0.20-stable (2025-08-27 build)", "1.6.2": "1.0.20-stable (2025-12-31 build)",
}


def machine(workdir: Path) -> dict[str, Any]:
    """`machine_info` plus PyNaCl's bundled libsodium, zstandard's libzstd and the RAM size."""
    info: dict[str, Any] = machine_info(workdir, ("lancedb", "pyarrow"))
    bundled = _BUNDLED_LIBSODIUM.get(nacl.__version__, "unknown")
    info.update(pynacl=nacl.__version__, libsodium=f"{bundled} (bundled; per PyNaCl's changelog)",
                zstandard=f"{zstandard.__version__} ({zstandard.backend} backend, libzstd "
                          f"{'.'.join(str(v) for v in zstandard.ZSTD_VERSION)})")
    info["mem_total_gib"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    return info


# -- output ---------------------------------------------------------------------------------------


def host_row(h: dict[str, Any], label: str = "  other processes meanwhile") -> tuple[str, str]:
    """The CPU everything else on the machine used during a step (`HostLoad`)."""
    return (label, f"{h['other_cpu_s']:.1f} CPU-s in {h['seconds']:.1f} s ({h['other_share_of_machine']:.0%} of "
                   f"the machine), load average {h['loadavg_1m']:.2f}")


def print_report(res: dict[str, Any]) -> None:
    m = res["machine"]
    s = res["store"]
    rows: list[tuple[str, str]] = [
        *machine_rows(m, "lancedb", "pyarrow"),
        ("PyNaCl / libsodium", f"{m['pynacl']} / {m['libsodium']}"),
        ("zstandard", m["zstandard"]),
        ("work dir", m["disk"]["path"]),
        disk_row(m["disk"]),
        ("## synthetic store", ""),
        ("total", f"{s['total_bytes'] / MIB:,.1f} MiB in {s['files']} files (built in {s['seconds']:.0f} s)"),
        ("grimoire.db", f"{s['grimoire_db_bytes'] / MIB:,.1f} MiB ({s['entries']:,} signed entries)"),
        ("episode table: small episodes + base files", f"{s['base_bytes'] / MIB:,.1f} MiB with grimoire.db "
         f"({s['small_episodes']:,} episodes with 384-d embeddings)"),
        (("JSON half: bulk episodes (LanceDB-encoded)", f"{s['json_disk_bytes'] / MIB:,.1f} MiB on disk for "
          f"{s['big_episodes']:,} episodes = {s['payload_json_bytes'] / MB:,.1f} MB of payload_json "
          f"({s['payload_json_bytes'] / max(1, s['big_episodes']) / 1024:,.1f} KiB each)")
         if s["json_bulk"] == "episodes" else
         ("JSON half: plain JSON-lines files", f"{s['json_disk_bytes'] / MIB:,.1f} MiB in {s['json_files']} files")),
        ("os.urandom files in the table dir (incompressible)",
         f"{s['incompressible_bytes'] / MIB:,.1f} MiB ({s['incompressible_files']} files)"),
        ("largest file", f"{s['largest_file_bytes'] / MIB:,.1f} MiB ({s['largest_file']})"),
    ]
    z = res["zstd_raw"]
    rows.append(("## zstd level 3 ratio by part (python-zstandard, 1 thread)", ""))
    for name, p in z["parts"].items():
        rows.append((f"  {name}", f"{p['bytes'] / MIB:,.1f} MiB -> {p['zstd_bytes'] / MIB:,.1f} MiB, "
                                  f"ratio {p['ratio']:.2f}, {p['mb_s']:,.0f} MB/s"))
    rows.append(("  whole store", f"{z['bytes'] / MIB:,.1f} MiB -> {z['zstd_bytes'] / MIB:,.1f} MiB, "
                                  f"ratio {z['ratio']:.2f}, {z['mb_s']:,.0f} MB/s"))
    c = res["clade"]
    base = c["baseline"]["peak_rss_mib"]
    plain = c["plaintext_bytes"]
    rows += [
        (f"## clade vault ({plain / MIB:,.1f} MiB plaintext; one child process per step)", ""),
        ("baseline child (imports only)", f"peak RSS {base:.1f} MiB"),
    ]
    for step in ("backup", "verify", "restore"):
        r = c[step]
        rp = r["rss_profile"]
        rows += [
            (f"{step}", f"{r['seconds']:.2f} s, {r['mb_s']:,.1f} MB/s, CPU {r['cpu_user_s']:.1f} user + "
                        f"{r['cpu_sys_s']:.1f} sys s, peak RSS {r['peak_rss_mib']:.1f} MiB "
                        f"(+{r['peak_rss_mib'] - base:.1f} over baseline)"),
            ("  RSS at 10/25/50/75/90% of the call",
             " / ".join(f"{rp[f'p{p}_time_mib']:.0f}" for p in (10, 25, 50, 75, 90)) + " MiB"),
            host_row(r["host"]),
        ]
    rows += [
        ("backup file", f"{c['file_bytes'] / MIB:,.1f} MiB, compression ratio {c['ratio']:.3f} "
                        f"(plaintext / file)"),
    ]
    ss = res["secretstream_raw"]
    rows += [
        (f"## raw secretstream, {ss['bytes'] / MIB:,.0f} MiB in 64 KiB chunks", ""),
        ("push (encrypt)", f"{ss['push_mb_s']:,.1f} MB/s ({ss['push_s']:.2f} s)"),
        ("pull (decrypt)", f"{ss['pull_mb_s']:,.1f} MB/s ({ss['pull_s']:.2f} s)"),
        ("clade backup / raw push throughput", f"{res['ratios']['backup_vs_push']:.3f}"),
        ("clade verify / raw pull throughput", f"{res['ratios']['verify_vs_pull']:.3f}"),
        ("clade restore / raw pull throughput", f"{res['ratios']['restore_vs_pull']:.3f}"),
        ("clade backup / raw zstd-3 throughput", f"{res['ratios']['backup_vs_zstd']:.3f}"),
        ("clade backup / serial zstd+push bound", f"{res['ratios']['backup_vs_serial_bound']:.3f} "
         f"(bound = 1/(1/zstd + 1/push) = {res['ratios']['serial_bound_mb_s']:,.1f} MB/s)"),
    ]
    a = res["age"]
    rows.append(("## tar | zstd -3 -T1 | age (same data dir)", ""))
    if "skipped" in a:
        rows.append(("skipped", a["skipped"]))
    else:
        rows += [
            ("versions", f"age {a['versions']['age']}; {a['versions']['zstd']}; {a['versions']['tar']}"),
            *((label, f"{a[k]['seconds']:.2f} s, {a[k]['mb_s']:,.1f} MB/s, CPU {a[k]['cpu_user_s']:.1f} user + "
                      f"{a[k]['cpu_sys_s']:.1f} sys s, peak RSS {a[k]['peak_rss_mib_any_process']:.1f} MiB "
                      "(largest process)")
              for label, k in (("backup (incl. fsync)", "backup"), ("restore", "restore"))),
            *(host_row(a[k]["host"], f"  other processes during {k}") for k in ("backup", "restore")),
            ("age file", f"{a['file_bytes'] / MIB:,.1f} MiB"),
            ("clade backup time / age pipeline time", f"{res['ratios']['backup_vs_age']:.2f}x"),
            ("clade restore time / age pipeline time", f"{res['ratios']['restore_vs_age']:.2f}x"),
            ("clade verify time / age restore time", f"{res['ratios']['verify_vs_age_restore']:.2f}x"),
        ]
    rows += [("## total", ""), ("wall clock (incl. building the store)", f"{res['total_seconds']:.1f} s")]
    print_table(rows)


# -- main -----------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--size-mib", type=at_least(16), default=1024, help="store size to build, MiB (default 1024)")
    add_common_args(p, "directory for the files (kept afterwards); default: a temporary one under /tmp, removed")
    p.add_argument("--json-bulk", choices=("episodes", "files"), default="episodes",
                   help="store the JSON half as real episodes (LanceDB encodes it; default) or as plain "
                        "JSON-lines files in the table directory (what zstd sees is then raw JSON text)")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--child-params", type=Path, default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    started = time.perf_counter()
    res: dict[str, Any] = {"machine": machine(workdir),
                           "params": {"size_mib": args.size_mib, "seed": args.seed, "json_bulk": args.json_bulk}}
    data_root = workdir / "data"
    res["store"] = store = build_store(data_root, args.size_mib * MIB, args.seed, args.json_bulk)

    progress("clade vault: baseline / backup / verify / restore, one child process each")
    x25519 = nacl.public.PrivateKey.generate()
    params = {"data": str(data_root), "file": str(workdir / "bench.clade-vault"), "golem": store["golem"],
              "clade_key": os.urandom(32).hex(), "x25519_secret": bytes(x25519).hex(),
              "target": str(workdir / "restored")}
    clade: dict[str, Any] = {}
    for step in ("baseline", "backup", "verify", "restore"):
        progress(f"  {step}")
        host = HostLoad()
        clade[step] = run_step(step, params, workdir)
        clade[step]["host"] = host.report(step, quiet=True)
    plain = clade["verify"]["plaintext_bytes"]
    for step in ("backup", "verify", "restore"):
        clade[step]["mb_s"] = round(plain / clade[step]["seconds"] / MB, 1)
    clade["plaintext_bytes"] = plain
    clade["file_bytes"] = clade["backup"]["file_bytes"]
    clade["ratio"] = round(plain / clade["file_bytes"], 4)
    clade["restored_dir_bytes"] = dir_size(workdir / "restored")
    res["clade"] = clade

    progress(f"raw secretstream: {args.size_mib} MiB push + pull in 64 KiB chunks")
    res["secretstream_raw"] = ss = bench_secretstream(args.size_mib * MIB)
    progress("raw zstd level 3 over the store's files")
    res["zstd_raw"] = z = bench_zstd(data_root)
    progress("tar | zstd | age")
    res["age"] = age = bench_age(data_root, workdir, plain)

    serial = 1 / (1 / z["mb_s"] + 1 / ss["push_mb_s"])
    ratios: dict[str, float] = {
        "backup_vs_push": clade["backup"]["mb_s"] / ss["push_mb_s"],
        "verify_vs_pull": clade["verify"]["mb_s"] / ss["pull_mb_s"],
        "restore_vs_pull": clade["restore"]["mb_s"] / ss["pull_mb_s"],
        "backup_vs_zstd": clade["backup"]["mb_s"] / z["mb_s"],
        "serial_bound_mb_s": serial,
        "backup_vs_serial_bound": clade["backup"]["mb_s"] / serial,
    }
    if "skipped" not in age:
        ratios.update(backup_vs_age=clade["backup"]["seconds"] / age["backup"]["seconds"],
                      restore_vs_age=clade["restore"]["seconds"] / age["restore"]["seconds"],
                      verify_vs_age_restore=clade["verify"]["seconds"] / age["restore"]["seconds"])
    res["ratios"] = {k: round(v, 4) for k, v in ratios.items()}
    res["total_seconds"] = round(time.perf_counter() - started, 1)
    return res


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bench (or, with --child, one measured step); the exit code is 0, or 2 when `--out`
    names a directory that is not empty."""
    args = parse_args(argv)
    if args.child is not None:
        return child_main(args.child, args.child_params)
    return main_in_workdir("vault", args, run, print_report, "clade-bench-vault-", clash=not_empty, base="/tmp")


if __name__ == "__main__":
    raise SystemExit(main())
