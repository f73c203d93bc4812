"""Requirement contracts (YAML), one file per artifact type."""
