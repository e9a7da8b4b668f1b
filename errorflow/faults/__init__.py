"""Injected faults, one module per family: what a scenario says (the spec), what it does
(the pure, seeded decision and transformation) and what it counts (the tally).

    tool    tools.NAME.faults           a tool call fails, or answers wrong (tool.py)
    agent   agents.NAME.faults          an agent's messages are corrupted, lost, late
    crash   agents.NAME.faults (crash)  the agent dies at a model call
    model   agents.NAME.model.faults    the model server answers 429, 529, 5xx, times out
    bus     bus:                        messages between agents are lost, late, doubled

The families are listed in `registry.FAMILIES`. This package imports only core and
protocol: applying a fault inside the tool client, the model backend or the runner is
the glue of those layers, which asks the family module what to do.
"""
