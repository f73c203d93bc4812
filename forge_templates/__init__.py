"""The expert template library (YAML), grouped by resource family."""
