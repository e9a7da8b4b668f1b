"""The bottom layer: the primitives every component shares (error taxonomy, tool
exceptions and context, costs, seeded streams, simulated time, redaction). It imports
nothing else of errorflow."""
