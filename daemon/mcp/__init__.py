"""`clade mcp`: a Model Context Protocol server (stdio) over the daemon's control API."""
