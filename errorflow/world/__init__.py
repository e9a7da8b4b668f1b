"""The tool world an agent acts on: the tool client, records and their answers, shared
services, Python tools, and the ground truth a trial is scored against."""
