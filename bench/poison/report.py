"""bench_poison's table: the honest baseline, the attacks, the digests after each, and the
inheritance phase (testament, heir, relay)."""

from __future__ import annotations

from typing import Any

from bench.common import out, print_table

__all__ = ["report"]


def report(res: dict[str, Any]) -> None:
    rows: list[tuple[str, str]] = [("## honest baseline", "")]
    if "honest" in res:
        h = res["honest"]
        rows += [("honest entries / crossed by curator", f"{h['entries']} / {h['crossed']}"),
                 ("warning crossing latency ms (p50/p99)",
                  f"{h['warning_latency_ms'].get('p50')} / {h['warning_latency_ms'].get('p99')}"),
                 ("insight crossing latency ms after curator (p50/p99)",
                  f"{h['insight_latency_ms'].get('p50')} / {h['insight_latency_ms'].get('p99')}")]
    rows.append(("## attacks (written / crossed at x / arrived per victim)", ""))
    for name, a in res.get("attacks", {}).items():
        rows.append((name, f"{a['written']} / {a['crossed_at_x']} / {a['arrived']} in {a['seconds']} s"))
    if "endorse" in res:
        e = res["endorse"]
        rows.append(("endorse own (status: n) / by y", f"{e['own_status']} / {e['sibling_status']}"))
        rows.append(("victims holding y's confirm (of first 40)", str(e["victim_confirms_of_first_40"])))
    rows.append(("## digests (after: with attacker, >1, slot share, answer in digest, recall@5)", ""))
    for m in res.get("measurements", []):
        rows.append((m["after"], f"{m['with_attacker']:.0%}, {m['more_than_one']:.0%}, "
                                 f"{m['attacker_slot_share']:.1%}, {m['answer_in_digest']:.0%}, "
                                 f"{m['recall_at_5']:.0%}; {m['slots_by_attack']}; marked unverified "
                                 f"{m.get('attacker_slots_marked_unverified')}"))
    inh = res.get("inheritance")
    if isinstance(inh, dict):
        rows.append((f"## inheritance ({inh['victim']} dies, heir {inh['heir']}, relay to {inh['others']}; "
                     f"quarantine {inh['quarantine_age_s']} s, heir's {inh['heir_quarantine_age_s']} s)", ""))
        if "late" in inh:
            late = inh["late"]
            rows.append(("late warnings (written / crossed / at victim)",
                         f"{late['written']} / {late['crossed_at_x']} / {late['arrived_at_victim']}"))
        if "death" in inh:
            rows.append(("death steps", f"{inh['death']['steps']}; testament {inh['death']['testament']}"))
        if "testament" in inh:
            t = inh["testament"]
            rows.append(("heir's store after inherit", f"{t['entries_imported']} {t['by_provenance']}"))
            rows.append(("attacker entries bequeathed (by provenance at heir) / late ones",
                         f"{t['attacker_bequeathed']} {t['attacker_by_provenance']} / {t['late_bequeathed']}"))
        if "reauthored" in inh:
            r = inh["reauthored"]
            rows.append(("heir re-authored attacker texts (promoted) / all reissued",
                         f"{r['attacker_texts']} ({r['promoted']}) {r['by_attack']} / {r['reissued']}"))
        if "relay" in inh:
            rows.append(("relayed: arrived per other / slots in their digests",
                         f"{inh['relay']['arrived']} / {inh['relay'].get('slots_in_others_digests')}"))
        for m in inh.get("measurements", []):
            rows.append((m["after"], f"{m['with_attacker']:.0%}, {m['more_than_one']:.0%}, "
                                     f"{m['attacker_slot_share']:.1%}, {m['answer_in_digest']:.0%}, "
                                     f"{m['recall_at_5']:.0%}; {m['slots_by_attack']}"
                                     + (f"; by provenance {m['attacker_slots_by_provenance']}"
                                        if "attacker_slots_by_provenance" in m else "")))
    rows.append(("load average (1 min) during", str(res.get("host", {}).get("loadavg_1m_during"))))
    rows.append(("total", f"{res.get('total_seconds')} s; failed: {res.get('failed')}"))
    print_table(rows)
    out()
