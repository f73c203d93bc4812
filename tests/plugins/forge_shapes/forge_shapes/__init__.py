"""forge-shapes: a plugin that adds a source kind (flat canvases of coloured shapes seen from a
camera straight above), a capability (where an object lies in the image), a question type
whose answer is a vector of numbers scored by relative error, with its own blind solver, a
template, and a contract requirement on its scene plans."""

from pathlib import Path

from forge.registry import register

from forge_shapes import canvas, checks, position  # noqa: F401  (skills and checks register on import)
from forge_shapes.protocols import relative_error

HERE = Path(__file__).resolve().parent

register("source_kind", "shape_canvas", canvas.ShapeCanvasSource)
register("resource_dir", "shapes", HERE / "resources")
register("contract_dir", "shapes", HERE / "contracts")
register("template_dir", "shapes", HERE / "templates")
register("capability", position.CAPABILITY.name, position.CAPABILITY)
register("question_type", position.QUESTION_TYPE.name, position.QUESTION_TYPE)
register("scoring_protocol", "relative_error", relative_error)
register("rule_reverifier", "image_position", position.reverify_position)
