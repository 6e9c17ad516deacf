"""One point's result: the typed model, its metrics, its JSON Schema, building and storing it, the verdict, baselines
and the run manifest."""
