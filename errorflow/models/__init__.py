"""Model backends behind one interface (`backend.ModelBackend`): the simulated model,
Anthropic, model servers, replay, and what serves them (limits, pacing, estimates)."""
