"""The scenario: the model of a scenario file (model, agent_policy), what it is checked
against (catalog: the tool kinds; profiles: the simulated model's behaviours), the loader
and its error messages (loader, marked_yaml, explain, checks, problems, wording),
overrides, identity (what makes two runs the same experiment) and the bundled
scenarios. It imports only errorflow.core, errorflow.policies and itself."""
