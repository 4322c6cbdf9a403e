"""Fixture factories for tests and the demo: tiny models of each architecture, adapters, sample data."""
