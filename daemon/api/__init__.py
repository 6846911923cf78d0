"""The control API: the FastAPI app, its request/response models and the agent routes."""
