"""The scenario: the model of a scenario file, its loader and error messages, overrides,
identity (what makes two runs the same experiment) and the bundled scenarios."""
