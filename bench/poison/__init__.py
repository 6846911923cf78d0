"""bench_poison's parts that talk to the golems: what they hold, what crossed, what their digests
and searches answer (`observe`); its table (`report`); the inheritance phase (`inheritance`).
The pure parts (queries, attacker texts, scoring) are bench/common/poison.py."""
