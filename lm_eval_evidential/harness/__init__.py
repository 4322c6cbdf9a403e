"""Harness layer: the `evidential` model, the EDL task class, the records hook."""
