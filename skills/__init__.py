"""Built-in skills, by stage. Importing this package registers them."""

from forge_skills import blueprint, packaging, synthesis, tabletop_collect, room_plan, ground_plan, scene_render, scene_evidence  # noqa: F401
from forge_skills import image_collect, rules_image, rules_scene  # noqa: F401  (real-image folders; scene answer rules)
from forge_skills import checks, repair_ops  # noqa: F401  (contract predicates, repair operators)
