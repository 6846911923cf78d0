"""bench_crdt's printed report, from its result document."""

from __future__ import annotations

from typing import Any

from bench.common import machine_rows, print_table
from crdt.replica import MAX_BATCH_BYTES

__all__ = ["print_report"]


def fmt_rate(r: dict[str, Any]) -> str:
    return (f"median {r['median_ops_s']:>9,} ops/s  (min {r['min_ops_s']:,}, max {r['max_ops_s']:,}; "
            f"{r['us_per_op']:.1f} us/op; {r['batches']} batches, median {r['ops_per_batch_median']:,.0f} ops)")


def fmt_ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:9.3f} ms" if ms < 10 else f"{ms:9.1f} ms"


def fmt_extract(x: dict[str, Any]) -> str:
    over = f"; {x['over_cap']} OVER the 1 MiB cap (largest {x['max_delta_bytes']:,} B)" if x["over_cap"] else ""
    return (f"{fmt_ms(x['seconds_median'])}  (min {fmt_ms(x['seconds_min']).strip()}; {x['ops']:,} ops in "
            f"{x['deltas']} deltas, {x['wire_bytes'] / 2**20:.2f} MiB{over})")


def fmt_size(s: dict[str, float], unit: str = "B") -> str:
    return f"median {s['median']:>8,.1f} {unit}  p90 {s['p90']:>8,.1f} {unit}"


def print_report(res: dict[str, Any], *, top: int) -> None:
    """bench_crdt's report: a table of its result document (`top`: functions per profile)."""
    m, w, j = res["machine"], res["workload"], res["join"]
    d = m["disk"]
    rows: list[tuple[str, str]] = [
        *machine_rows(m, "msgpack", "pynacl"),
        ("work dir", f"{d['path']} on {d.get('device', '?')} ({d.get('fstype', '?')}) on {d.get('mount_point', '?')}"),
        ("## workload", ""),
        ("ops (dots)", f"{w['ops']:,} from {w['writers']} writers; per writer "
                       f"{', '.join(f'{n:,}' for n in w['per_writer'])}"),
        ("steps", ", ".join(f"{k} {v:,}" for k, v in w["steps"].items())),
        ("ops by slot", ", ".join(f"{k} {v:,}" for k, v in w["by_slot"].items())),
        ("generation (signing included)", f"{w['seconds']:.1f} s"),
        ("## 1. join throughput", ""),
    ]
    for key, label in (("decode_mixed", "all ops (<= 4,096 ops / 1 MiB)"),
                       ("decode_small", "author/endorse ops only (4,096)")):
        d = j[key]
        rows += [
            (f"decode_delta + signature_ok, {label}", fmt_rate(d["verify"])),
            ("decode_delta, no signature check", fmt_rate(d["no_verify"])),
            ("  => signature check", f"{d['verify_us_per_op']:.1f} us/op; median encoded batch "
                                     f"{d['bytes_per_batch_median'] / 2**20:.2f} MiB"),
        ]
    rows += [
        ("apply_delta -> MemoryBackend", fmt_rate(j["memory"])),
        ("Grimoire.apply_delta (1 txn/batch)", fmt_rate(j["sqlite"])),
        ("  first / last 20% of batches", f"{j['sqlite']['first_20pct_ops_s']:,} / {j['sqlite']['last_20pct_ops_s']:,} "
                                          f"ops/s; grimoire.db {j['sqlite']['db_bytes'] / 2**20:.1f} MiB"),
        ("end to end (decode+verify+SQLite)", fmt_rate(j["end_to_end"])),
        ("  share in decode+verify", f"{j['end_to_end']['share_in_decode_verify'] * 100:.0f}%"),
        ("state digests agree (memory, SQLite x2)", "yes" if res["checks"]["digests_agree"] else "NO"),
    ]
    x = res["extract"]
    st = x["store"]
    rows += [
        ("## 2. delta extraction (caps 4,096 ops / 1 MiB)", ""),
        ("store", f"{st['dots']:,} dots, {st['slot_holding_ops']:,} slot-holding ops "
                  f"({st['crossable_ops']:,} pass the gate), {st['writers']} writers"),
        ("Grimoire.causal_context()", f"{x['load_context_ms']:.2f} ms"),
    ]
    for key in ("one_writer", "all_writers", "up_to_date", "empty_peer"):
        s = x[key]
        rows += [
            (s["label"], f"{s['dots_lacking']:,} dots lacking"),
            ("  Grimoire.iter_deltas", fmt_extract(s["sqlite"])),
            ("  extract_deltas (MemoryBackend)", fmt_extract(s["memory"])),
        ]
    wr = res["wire"]
    rows.append(("## 3. bytes on the wire per op", ""))
    rows.append(("entry content", fmt_size(wr["content_chars"], "ch")))
    for slot, raw_label in (("body", "raw body (canonical msgpack)"), ("author", "raw value (msgpack)"),
                            ("endorse", "raw value (msgpack)")):
        if slot not in wr:
            continue
        s = wr[slot]
        rows += [
            (f"{slot} ops ({s['ops']:,})", ""),
            (f"  {raw_label}", fmt_size(s["raw_value_bytes"])),
            ("  op.wire_size", fmt_size(s["wire_size"])),
            ("  in a delta ([signed, sig] msgpack)", fmt_size(s["in_delta_bytes"])),
            ("  overhead (in delta - raw)", fmt_size(s["overhead_bytes"])),
            ("  ratio (in delta / raw)", f"median {s['ratio_in_delta_to_raw']['median']:.3f}x  "
                                         f"p90 {s['ratio_in_delta_to_raw']['p90']:.3f}x"),
        ]
    for kind, s in wr["full_sync_deltas"].items():
        rows.append((f"full-sync deltas, {kind.replace('_', ' ')}",
                     f"{s['bytes_per_op_median']:,.1f} B/op (len(encode_delta)/ops; {s['deltas']} deltas, "
                     f"median {s['ops_per_delta_median']:,.0f} ops)"))
    oc = wr["full_sync_over_cap"]
    rows.append(("full-sync deltas over the 1 MiB cap", f"{oc['over_cap']} of {oc['deltas']} "
                 f"(largest {oc['largest_bytes']:,} B; encode_delta/decode_delta refuse > {MAX_BATCH_BYTES:,} B)"))
    if "profile" in res:
        for path, p in res["profile"].items():
            rows.append((f"## cProfile: {path} ({p['ops']:,} ops, {p['seconds']:.2f} s under the profiler)", ""))
            rows.append((f"top {top} by cumulative time", "cumulative s / self s / calls / function"))
            for r in p["top"]:
                rows.append(("", f"{r['cumulative_s']:7.3f} {r['self_s']:7.3f} {r['calls']:>9,}  {r['function']}"))
            rows.append((f"top {top} by self time", ""))
            for r in p["top_self"]:
                rows.append(("", f"{r['cumulative_s']:7.3f} {r['self_s']:7.3f} {r['calls']:>9,}  {r['function']}"))
    rows += [("## total", ""), ("wall clock", f"{res['total_seconds']:.1f} s")]
    print_table(rows)
