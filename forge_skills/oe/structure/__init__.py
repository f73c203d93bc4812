"""S3 structure: register per-object, per-view facts of collected sources."""
