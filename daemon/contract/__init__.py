"""The control API's contract: the request bodies (`requests`) and response bodies (`responses`)
that the API validates, and the agent tools, the MCP server, the CLI and the TUI speak.

Pure pydantic models over the entry fields (`daemon.grimoire.fields`): no route, no store, no
I/O. Every room that speaks the API imports them from here, so none reaches up into `daemon.api`.
"""
