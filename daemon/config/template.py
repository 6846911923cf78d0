"""The commented config file `clade init` writes: every key optional, the defaults shown."""

__all__ = ["DEFAULT_CONFIG_TOML"]

DEFAULT_CONFIG_TOML = """\
# clade configuration. Every key is optional; the values shown are the defaults.
# Environment variables override keys: CLADE_<SECTION>__<KEY>, e.g. CLADE_LOG__LEVEL=info.

[store]
# busy_timeout_ms = 10000

[p2p]
# enabled = true
# listen = ["/ip4/0.0.0.0/tcp/4001"]
# bootstrap = []           # "/ip4/10.0.0.2/tcp/4001/p2p/12D3KooW…"
# mdns = true
# sync_interval_s = 30.0
# max_skew_ms = 60000
# key_grace_s = 86400.0    # old-epoch gossip accepted this long after a key rotation

[curator]
# tick_seconds = 10.0
# cycle_ticks = 50
# window_days = 10.0       # one window for every kind (unset: per-kind defaults; 0.7 fades after ~2 windows)
# decay_windows = { constraint = 90.0, preference = 90.0, fact = 60.0, causal_link = 60.0,
#                   anti_knowledge = 60.0, death_reflection = 60.0, heuristic = 30.0, warning = 14.0,
#                   strategy_outcome = 14.0, insight = 10.0, episode_summary = 10.0, regime_shift = 5.0 }
# eviction_threshold = 0.05
# capacity = 50000         # live entries at most: strategy outcomes and summaries archived first, rules last
# replay_budget = 500
# playbook_keep = 20

[curator.llm]
# enabled = false          # needs ANTHROPIC_API_KEY (or api_key_file)
# model = "claude-haiku-4-5"
# max_tokens = 2048
# timeout_s = 30.0

[api]
# tcp_port = 7410          # also serve on 127.0.0.1 (requires token)
# token = "…32+ chars…"

[backup]
# keep = 7
# interval_hours = 24.0

[styx]
# enabled = false
# url = "https://…"
# token_file = "/etc/clade/styx.token"   # or CLADE_STYX__TOKEN in the environment; never logged
# clade_enabled = false                  # opt-in: push what crosses to the clade layer
# lethe_enabled = false                  # opt-in: anonymised warnings to the public layer
# vault_enabled = true                   # the owner's archive
# batch = 100
# backoff_base_s = 1.0
# backoff_cap_s = 60.0
# timeout_s = 10.0
# outbox_warn = 10000
# query_enabled = false                  # true: send search and digest text to Styx and merge its answer
# query_deadline_ms = 300                # a slow Styx never delays them past this
# query_layers = ["vault", "clade"]
#
# [styx.budget]                          # USD; at a cap pushing pauses (the outbox keeps filling)
# max_per_tick = 0.01                    # on by default: the architecture's $0.01 a tick
# monthly = 5.0                          # and $5 a month; raise them to spend more
# tick_s = 10.0
#
# [styx.prices]                          # USD; every call's cost is recorded per month
# per_call = 0.001                       # x402's example price of a request
# per_item = 0.00001
# per_query = 0.001
# per_upload = 0.001                     # a vault upload or download
# per_mib = 0.0001                       # each MiB uploaded
#
# [styx.injection]                       # Styx's share of a digest
# max_tokens = 500
# min_confidence = 0.5

[death]
# webhook = "https://…"    # POST a JSON notice when the golem dies (`clade die`)
# webhook_timeout_s = 5.0
# webhook_attempts = 3
# webhook_backoff_s = 1.0  # then 2.0, 4.0 …

[embedding]
# model = "sentence-transformers/all-MiniLM-L6-v2"
#   or "all-MiniLM-L6-v2+all-mpnet-base-v2": better recall, ~8x the CPU per entry, MemoryMax=2G
# unload_after_s = 300.0   # the model leaves memory after this long unused (0: never)
# ship_vectors = true      # gossip own entries with their vector; use siblings' instead of embedding theirs
# check_shipped = 0.125    # the share of a sibling's shipped vectors re-embedded here to check them…
# check_shipped_clearance = 24  # …until this many checks of its vectors in a row matched, then…
# check_shipped_cleared = 0.015625  # …this share (1/64); a mismatch starts the count again

[digest]
# pinned_tags = []         # e.g. ["risk-limits"]: tagged entries always enter the digest first
# pinned_fact_keys = []    # e.g. ["max_position_usd"]: facts written "max_position_usd: 50000"
# episode_tokens = 0       # the episodic section's share of the budget (e.g. 800); 0: off
# episode_k = 3            # at most this many of this golem's own episodes in it

[trust]
# enabled = true
# quarantine_age_s = 86400 # a sibling's entry with no evidence either way is released after a day here
# budget_entries = 100     # fresh entries per author per budget_window_s before it is suspect
# budget_window_s = 3600
# max_author_share = 0.3   # of a digest's slots from one sibling
# release_vouched = true   # an author with a good record here (release_trust) has its entries released at once
# trial = true             # a sibling's new entry is shown at once, marked unverified, until outcomes decide

[log]
# level = "warning"

[tui]
# theme = "auto"           # or "truecolor", "256", "16", "mono"
# poll_s = 1.0
# keymap = { quit = "q,ctrl+q", "action.backup" = "B" }   # binding id -> keys; `?` lists the ids
"""
