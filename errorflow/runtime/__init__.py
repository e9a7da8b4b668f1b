"""Running and recording: the runner, the recorder and its SQLite store, joining agent
processes, and experiments (comparisons and sweeps) built from runs."""
