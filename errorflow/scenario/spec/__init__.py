"""The scenario specification: the pydantic models of a scenario file (agents, tools,
needs, services, policies, sweeps) and the vocabularies they use (roles, profiles,
argument schemas, the tool catalog)."""
