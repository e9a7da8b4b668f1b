"""Where the simulated model's parameters come from: their origins (measured, fitted,
assumed), the built-in profiles' origins, profile files, a profile as an agent uses it,
and the loader's reading of the profile files a scenario names."""
