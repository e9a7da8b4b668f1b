"""Python tools shipped with errorflow, for the bundled scenarios that show how a
scenario wraps real tool code (`function: errorflow.examples.inventory:stock_level`).

They import nothing from errorflow: they stand for the user's own code, which knows
nothing of the simulator.
"""
