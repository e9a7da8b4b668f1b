"""Usage with a prompt cache's share: what a real model's reply says it used.

`Usage.input_tokens` stays the total a request read (what budgets charge); a reply from
a server with a prompt cache also says how many of those were read from the cache and
how many were written to it, which cost 0.1× and 1.25× an uncached token on Anthropic's
API (5-minute cache). A backend without a cache returns plain `Usage`: both are zero.
"""

from __future__ import annotations

from dataclasses import dataclass

from errorflow.models.backend import Usage


@dataclass(frozen=True)
class CachedUsage(Usage):
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def uncached_input_tokens(self) -> int:
        return max(0, self.input_tokens - self.cache_read_tokens - self.cache_write_tokens)


def cache_read(usage: Usage) -> int:
    return usage.cache_read_tokens if isinstance(usage, CachedUsage) else 0


def cache_write(usage: Usage) -> int:
    return usage.cache_write_tokens if isinstance(usage, CachedUsage) else 0
