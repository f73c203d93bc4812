"""Repair operators and the planted faults that exercise them."""
