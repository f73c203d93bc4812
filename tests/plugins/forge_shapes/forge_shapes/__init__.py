"""forge-shapes: a plugin that adds a source kind (flat canvases of coloured shapes seen from a
camera straight above), a capability (where an object lies in the image), a question type
whose answer is a vector of numbers scored by relative error, with its own blind solver, a
template, and a contract requirement on its scene plans; and points on shapes (``points.py``): a
reply scored against a hidden region, and numbered points the rule draws on the image."""

from pathlib import Path

from forge.registry import register

from forge_shapes import canvas, checks, points, position  # noqa: F401  (skills and checks register on import)
from forge_shapes.protocols import inside_region, relative_error

HERE = Path(__file__).resolve().parent

register("source_kind", "shape_canvas", canvas.ShapeCanvasSource)
register("resource_dir", "shapes", HERE / "resources")
register("contract_dir", "shapes", HERE / "contracts")
register("template_dir", "shapes", HERE / "templates")
register("capability", position.CAPABILITY.name, position.CAPABILITY)
register("question_type", position.QUESTION_TYPE.name, position.QUESTION_TYPE)
register("scoring_protocol", "relative_error", relative_error)
register("rule_reverifier", "image_position", position.reverify_position)
register("question_type", points.POINT_ON_OBJECT.name, points.POINT_ON_OBJECT)
register("question_type", points.MARKED_POINT_CHOICE.name, points.MARKED_POINT_CHOICE)
register("scoring_protocol", "inside_region", inside_region)
register("rule_reverifier", "point_on_shape", points.reverify_on_object)
register("rule_reverifier", "numbered_point", points.reverify_numbered)
