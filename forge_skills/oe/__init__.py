"""The Offline-EQA track: its definition, stage runner and vocabulary."""
