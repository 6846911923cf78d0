"""Step 20's fusion cross-validation (bench/bench_fusion_cv.py): corpora, candidate features, arms, folds."""
