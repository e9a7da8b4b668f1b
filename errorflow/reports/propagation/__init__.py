"""How contamination travelled, drawn: the propagation graph and the one-trial page."""
