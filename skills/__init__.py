"""Built-in skills, by stage. Importing this package (the ``builtin`` plugin) registers them,
and registers with the engine what it looks up by kind: the OE item scorer and the colour
vocabulary blind solvers strip, the template library, the re-verifier, and the folders of
built-in contracts and resource descriptors."""

import importlib.resources
from pathlib import Path

from forge.codeversion import register_project_package
from forge.registry import register

# Resource adapters live in their own package; their modules count for code versions too (named
# before the skills that import them load).
register_project_package("forge_resources")

from forge_skills import blueprint, packaging, synthesis, tabletop_collect, room_plan, ground_plan, scene_render, scene_evidence  # noqa: F401
from forge_skills import image_collect, rules_image, rules_scene  # noqa: F401  (real-image folders; scene answer rules)
from forge_skills import checks, repair_ops, fault_mutators  # noqa: F401  (contract predicates, repair operators, planted faults)
from forge_skills import appearance, oe_scorer, reverify, template_library, vocabulary  # noqa: F401
from forge_skills import oe_track  # noqa: F401  (registers the OE track)
from forge.registry import entries

from forge_resources.sources import BUILTIN_SOURCES

for _source in BUILTIN_SOURCES:
    register("source_kind", _source.model_fields["kind"].annotation.__args__[0], _source)
register("scorer", "oe", oe_scorer.score_item)
# Scoring protocols other plugins register (``scoring_protocol:<name>``, a module with parse and
# score) are found by the scorer in-process; packages ship their files beside score.py.
oe_scorer.PROTOCOL_FINDER = lambda name: entries("scoring_protocol").get(name)
register("vocabulary", "colours", frozenset(appearance.NAMES))
register("template_library", "builtin", template_library.template_refs)
register("template_dir", "builtin", template_library.builtin_root())
register("template_catalogue", "builtin", template_library.template_catalogue)
register("reverifier", "oe", reverify.reverify_package)
register("contract_dir", "builtin", Path(str(importlib.resources.files("forge_contracts"))))
register("resource_dir", "builtin", Path(str(importlib.resources.files("forge_resources"))))
