"""The control API: the FastAPI app and its routes (the models they speak are `daemon.contract`)."""
