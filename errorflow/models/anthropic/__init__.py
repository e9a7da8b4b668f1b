"""The Anthropic Messages API: request, reply, failures and the backend."""
