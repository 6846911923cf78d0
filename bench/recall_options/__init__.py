"""The parts of bench/bench_recall_options.py: its options and parameters (`options`), recall
quality (`quality`), the large stores and recall latency (`latency`), and its tables (`report`)."""
