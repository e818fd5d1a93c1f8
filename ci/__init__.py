"""Deterministic validators (no model, no network): one module per rule family."""
