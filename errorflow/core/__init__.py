"""The bottom layer: the contracts and primitives every component shares (error
taxonomy, tool exceptions, events, control actions, costs, seeded streams, simulated
time). It imports nothing else of errorflow."""
