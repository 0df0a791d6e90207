"""FastAPI service and Python client: encrypted training jobs and predictions. Never holds a
secret key."""
