"""The Anthropic Messages API: request, reply and the backend (what a failed call says
is shared with the OpenAI backend: errorflow.models.sdk.failures)."""
