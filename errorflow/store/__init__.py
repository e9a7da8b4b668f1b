"""The run store: runs, trials and events in SQLite, the stored trial traces and the
root causes read from them."""
