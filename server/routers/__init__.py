"""One router per resource: keysets, datasets, models (with predictions), jobs, health."""
