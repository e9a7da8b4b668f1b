"""An MCP tool's server, as a scenario names it (`kind: mcp`, `server:`).

A server is started from a command over stdio, or reached at a streamable-HTTP URL.
Only the specification lives here, checked without contacting the server (a scenario
validates offline, and one a message carries never starts a program): that the server
has the tool, and the tool's input schema, are read when a run loads its tools
(errorflow.world.mcp). Two tools naming the same server share one connection.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from pydantic import Field, model_validator

from errorflow.bus.url import URLError, check_http_url
from errorflow.core.shapes import Strict

#: A command-line word or an environment value: printable, bounded.
Word = Annotated[str, Field(min_length=1, max_length=2000, pattern=r"^[^\x00-\x1f\x7f]*$")]
#: An environment variable's name.
EnvName = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
#: A tool's name on its server (MCP names are not scenario identifiers: `git-log`, `fs.read`).
RemoteName = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[^\x00-\x20\x7f]+$")]


class McpServer(Strict):
    """`command` (with `args`, `env`, `cwd`): a program that speaks MCP on its stdin and
    stdout; or `url`: a streamable-HTTP endpoint (`http://127.0.0.1:8000/mcp`)."""

    command: Word | None = None
    args: list[Word] = Field(default_factory=list, max_length=64)
    #: Added to the few variables the SDK passes on (HOME, PATH, ...): nothing else of
    #: errorflow's environment reaches the server.
    env: dict[EnvName, Word] | None = Field(default=None, max_length=64)
    #: The server's working directory (a scenario file's: its folder, by default).
    cwd: Word | None = None
    url: Word | None = None
    #: How long starting, the handshake and listing the tools may take.
    startup_timeout_s: float = Field(default=30.0, gt=0, le=600)

    @model_validator(mode="after")
    def _command_or_url(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("an MCP server is a `command` (stdio) or a `url` (HTTP), one of them")
        if self.url is not None:
            local = [n for n in ("args", "env", "cwd") if getattr(self, n)]
            if local:
                raise ValueError(f"{', '.join(local)} apply to a `command` server, not a `url`")
            try:
                check_http_url(self.url)
            except URLError as exc:
                raise ValueError(str(exc)) from None
        return self

    @property
    def key(self) -> str:
        """What tells one server from another: tools with the same key share a session."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True)

    @property
    def label(self) -> str:
        """The server in one line, for messages: its URL, or its command line."""
        if self.url is not None:
            return self.url
        return " ".join([self.command or "", *self.args])[:200]


def resolve_mcp_paths(data: object, base_dir: Path) -> object:
    """`data` (a scenario's plain data) with each stdio MCP server's `cwd` made absolute
    against `base_dir` (the scenario file's folder; the folder itself when none is given),
    so the server finds the paths its arguments name from any working directory."""
    if not isinstance(data, dict) or not isinstance(data.get("tools"), dict):
        return data
    tools: dict[object, object] = {}
    for name, tool in data["tools"].items():
        server = tool.get("server") if isinstance(tool, dict) else None
        if isinstance(tool, dict) and tool.get("kind") == "mcp" and isinstance(server, dict):
            cwd = server.get("cwd")
            if "command" in server and (cwd is None or isinstance(cwd, str)):
                where = base_dir / cwd if cwd else base_dir
                tool = {**tool, "server": {**server, "cwd": str(where.resolve())}}
        tools[name] = tool
    return {**data, "tools": tools}
