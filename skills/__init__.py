"""Built-in skills, by stage. Importing this package registers them."""

from forge_skills import blueprint, packaging, synthesis, tabletop_collect, tabletop_evidence  # noqa: F401
from forge_skills import checks, repair_ops  # noqa: F401  (contract predicates, repair operators)
