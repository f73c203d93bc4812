"""forge: build verified embodied-AI benchmarks from an evaluation intent.

The engine knows no track, source kind, capability or question type by name: plugins register
them (``registry``; the built-in skills are the ``builtin`` plugin). Reading it in pipeline order:
``registry`` -> ``intent`` (with ``sources``, ``vocabulary``) -> ``artifact_types`` -> ``skills``
-> ``tracks`` -> ``planner`` (the workflow graph) -> ``stagegraph`` (the workflow run as a LangGraph
``StateGraph``) -> ``store`` -> ``contracts`` -> ``executor``
(``invocation`` identity, ``backends`` that run work, the driver-side ``recorder``) ->
``gatelog`` -> ``repair`` -> ``export`` -> ``status`` / ``audit`` / ``review``.
"""

__version__ = "0.1.0"

# Bumping this is a deliberate full rebuild: every artifact id includes it.
ENGINE_FORMAT_VERSION = "1"

# The on-disk layout of a released package.
PACKAGE_FORMAT_VERSION = "1.0"
