"""forge: build verified embodied-AI benchmarks from an evaluation intent.

Reading the package top to bottom follows the pipeline: ``intent`` -> ``artifact_types`` ->
``skills`` (registry) -> ``planner`` -> ``store`` -> ``contracts`` -> ``executor`` ->
``gates`` -> ``control`` (the stage loop) -> ``packaging`` -> ``status`` / ``audit``.
"""

__version__ = "0.1.0"

# Bumping this is a deliberate full rebuild: every artifact id includes it.
ENGINE_FORMAT_VERSION = "1"

# The on-disk layout of a released package.
PACKAGE_FORMAT_VERSION = "1.0"
