"""The results history across runs: the SQLite store, queries, run-to-run noise, comparisons, the perf-changelog."""
