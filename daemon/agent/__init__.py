"""Agent-facing memory: tool definitions (Anthropic tool-use format) and working memory."""
