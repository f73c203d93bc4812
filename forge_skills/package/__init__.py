"""What both tracks' packages share at S5: gates E and F (the panel, the response matrix, the
IRT diagnosis), the report, the exports and the package checks."""
