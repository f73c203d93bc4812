"""S5 verify: contract checks, quality gates, blind solvers, independent re-verification."""
