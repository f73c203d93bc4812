"""Source and simulator adapters, each with a YAML descriptor of its fields and operations."""
