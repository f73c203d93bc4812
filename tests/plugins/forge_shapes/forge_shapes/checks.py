"""The contract check of canvas plans (requirement CANVAS-1)."""

from __future__ import annotations

import itertools
import math

from forge.contracts import CheckContext, Outcome, check

from forge_shapes.canvas import CanvasSpec, extent


@check("canvas_shapes_apart")
def canvas_shapes_apart(canvas: CanvasSpec, ctx: CheckContext) -> Outcome:
    """Every shape lies wholly inside the view and no two shapes touch."""
    half_w, half_h = extent(canvas.width, canvas.height, canvas.focal)
    problems = [f"{s.name} reaches past the view" for s in canvas.shapes
                if abs(s.x) + s.size > half_w or abs(s.y) + s.size > half_h]
    for a, b in itertools.combinations(canvas.shapes, 2):
        # Squares reach sqrt(2) times their half side at the corners.
        if math.hypot(a.x - b.x, a.y - b.y) <= (a.size + b.size) * math.sqrt(2):
            problems.append(f"{a.name} and {b.name} touch")
    if not canvas.shapes:
        problems.append("no shapes")
    return Outcome(not problems, "; ".join(problems))
