"""Calibration: probe a real model, estimate the simulated model's behaviour parameters
with their intervals, write a profile file (errorflow.scenario.provenance.profile_file)."""
