"""MCP tools (`kind: mcp`): the tools of a Model Context Protocol server, called through
the official `mcp` SDK (a dependency of errorflow, imported only when a scenario has an MCP tool).

One session per server and process (`host`), started when a run loads its tools and
reused by every agent and trial; the server's tools and input schemas (`arguments`);
what a call answers (`results`); one tool (`tool`); checks of a scenario against the
server, and ground truth.
"""
