"""Built-in skills: the Offline-EQA track in one home (``oe``, with its stages ``collect``,
``structure``, ``synthesize``, ``verify``, ``package`` and ``repair``), the Interactive Embodied
track (``ie``), and what both share (``package``: gates E and F, reports and exports;
``scoring``: the item scorer; ``evaluate``: the IRT diagnosis).

Importing this package (the ``builtin`` plugin) registers the skills, contract checks, answer
rules, blind solvers and planted faults of its modules, and registers with the engine what it
looks up by kind: the tracks, the IE worlds, the source kinds, capabilities and question types,
the OE item scorer and the colour vocabulary blind solvers strip, the template library, the
re-verifiers, gate E's episode panel, and the folders of built-in contracts and resource
descriptors."""

import importlib.resources
from pathlib import Path

from forge.codeversion import register_project_package
from forge.registry import entries, register

# Resource adapters live in their own package; their modules count for code versions too (named
# before the skills that import them load).
register_project_package("forge_resources")

from forge_resources.sources import BUILTIN_SOURCES  # noqa: E402
from forge_skills.oe.collect import (ground, images, libero_scenes, render, robosuite_demos,  # noqa: E402,F401  (S2 skills)
                                     robosuite_scenes, room, tabletop)
from forge_skills.oe.structure import appearance, scene_evidence  # noqa: E402,F401  (S3 skills)
from forge_skills.oe.synthesize import blueprint, rules_fixtures, rules_manipulation, rules_image, rules_program, rules_scene, synthesis, templates  # noqa: E402,F401
from forge_skills.oe.verify import checks, item_checks, reverify, reverify_fixtures, reverify_manipulation  # noqa: E402,F401  (contract predicates, re-verification)
from forge_skills.package import assessment, package_checks, report_check, report_page  # noqa: E402,F401
from forge_skills.oe.package import oe_package  # noqa: E402,F401
from forge_skills.scoring import scorer  # noqa: E402  (the OE item scorer)
from forge_skills.oe.repair import fault_mutators, operators  # noqa: E402,F401  (repair operators, planted faults)
from forge_skills.oe import track, vocabulary  # noqa: E402,F401  (the OE track; capabilities, question types)
from forge_skills.ie import (blueprint as ie_blueprint, checks as ie_checks, package as ie_package,  # noqa: E402,F401
                             repair as ie_repair, reverify as ie_reverify, manipulation as ie_manipulation,
                             manipulation_checks as ie_manipulation_checks,
                             manipulation_episodes as ie_manipulation_episodes, evaluation as ie_evaluation, scenes as ie_scenes, synthesis as ie_synthesis,
                             templates as ie_templates, track as ie_track, worlds as ie_worlds,
                             episode_panel as ie_episode_panel)  # (the IE track)

for _source in BUILTIN_SOURCES:
    register("source_kind", _source.model_fields["kind"].annotation.__args__[0], _source)
register("scorer", "oe", scorer.score_item)
# Scoring protocols other plugins register (``scoring_protocol:<name>``, a module with parse and
# score) are found by the scorer in-process; packages ship their files beside score.py.
scorer.PROTOCOL_FINDER = lambda name: entries("scoring_protocol").get(name)
register("vocabulary", "colours", frozenset(appearance.NAMES))
register("template_library", "builtin", templates.template_refs)
register("template_dir", "builtin", templates.builtin_root())
register("template_catalogue", "builtin", templates.template_catalogue)
register("reverifier", "oe", reverify.reverify_package)
register("reverifier", "ie", ie_reverify.reverify_ie_package)
register("package_evaluator", "ie", ie_evaluation)
register("episode_panel", "builtin", ie_episode_panel)
register("package_metrics", "report", report_check.recheck)
register("package_report", "html", report_page.package_report)
register("contract_dir", "builtin", Path(str(importlib.resources.files("forge_contracts"))))
register("resource_dir", "builtin", Path(str(importlib.resources.files("forge_resources"))))
