"""bench_recall's parts: its sizes (`params`) and episode search at scale on the LanceDB log
(`episodes`)."""
