"""The ``shape_canvas`` source kind: flat canvases of coloured discs and squares seen by a
camera straight above, drawn in numpy with exact segmentation and depth.

The camera is a pinhole ``HEIGHT`` metres above the canvas plane, so the built-in evidence
structurer measures these scenes like any rendered source."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from forge.artifact_types import ArtifactContent
from forge_skills.oe.types import Blueprint, ObjectState, SourceRecord, ViewRecord
from forge.keys import digest
from forge.skills import SkillContext, skill
from forge.sources import SourceSpec

HEIGHT = 2.0  # camera above the canvas, metres
NEAR, FAR = 0.1, 10.0
BACKGROUND = (205, 205, 200)
COLOURS = {"red": (215, 35, 35), "green": (40, 160, 60), "blue": (40, 70, 215), "yellow": (235, 205, 30),
           "purple": (130, 45, 170), "orange": (240, 125, 25)}
CATEGORIES = ("disc", "square")


class ShapeCount(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    min: int = Field(3, ge=1, le=10)
    max: int = Field(6, ge=1, le=10)

    @model_validator(mode="after")
    def _ordered(self) -> "ShapeCount":
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is larger than max ({self.max})")
        return self


class ShapeCanvasSource(SourceSpec):
    """Flat canvases of coloured discs and squares, one top-down view each."""

    kind: Literal["shape_canvas"]
    scenes: int | None = Field(None, ge=1, le=5000, description="canvas count; derived from items when absent")
    shapes: ShapeCount = ShapeCount()
    width: int = Field(320, ge=96, le=1024)
    height: int = Field(240, ge=72, le=1024)


class Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    category: str
    colour: str
    x: float
    y: float
    size: float = Field(description="radius of a disc, half the side of a square (metres)")


class CanvasSpec(ArtifactContent):
    """A planned canvas: its shapes in metres on the plane, and the image size."""

    scene_index: int
    seed: int
    width: int
    height: int
    focal: float
    shapes: list[Shape]


class CanvasParams(BaseModel):
    scene_index: int


def extent(width: int, height: int, focal: float) -> tuple[float, float]:
    """Half width and half height of the canvas area the camera sees, in metres."""
    return width / 2 * HEIGHT / focal, height / 2 * HEIGHT / focal


@skill("shapes.plan_canvas", stage="S2", params=CanvasParams)
def plan_canvas(ctx: SkillContext, blueprint: Blueprint) -> list[CanvasSpec]:
    """One seeded canvas: a few shapes of distinct colour per category, apart from each other."""
    src = next(s for s in blueprint.sources if s["kind"] == "shape_canvas")
    index = ctx.params.scene_index
    seed = int(digest(blueprint.seed, blueprint.name, "shape_canvas", index, length=12), 16)
    rng = np.random.default_rng(seed)
    width, height = int(src["width"]), int(src["height"])
    focal = width / 2.4  # the view spans 2.4 m across at HEIGHT
    half_w, half_h = extent(width, height, focal)
    n = int(rng.integers(src["shapes"]["min"], src["shapes"]["max"] + 1))
    shapes: list[Shape] = []
    used: set[tuple[str, str]] = set()
    for _ in range(200 * n):
        if len(shapes) == n:
            break
        category = CATEGORIES[int(rng.integers(len(CATEGORIES)))]
        colour = sorted(COLOURS)[int(rng.integers(len(COLOURS)))]
        size = float(rng.uniform(0.08, 0.16))
        x = float(rng.uniform(-half_w + size + 0.05, half_w - size - 0.05))
        y = float(rng.uniform(-half_h + size + 0.05, half_h - size - 0.05))
        if (colour, category) in used or any(np.hypot(x - s.x, y - s.y) < (size + s.size) * 1.5 + 0.05 for s in shapes):
            continue
        used.add((colour, category))
        shapes.append(Shape(name=f"shape {len(shapes) + 1}", category=category, colour=colour,
                            x=round(x, 4), y=round(y, 4), size=round(size, 4)))
    return [CanvasSpec(scene_index=index, seed=seed, width=width, height=height, focal=round(focal, 4), shapes=shapes)]


@skill("shapes.draw_canvas", stage="S2")
def draw_canvas(ctx: SkillContext, canvas: CanvasSpec) -> list[SourceRecord]:
    """The canvas seen from above: RGB, metric depth and segmentation of one view."""
    rgb, depth, seg = render(canvas)
    view = ViewRecord(
        index=0, rgb=ctx.put_png(rgb), width=canvas.width, height=canvas.height,
        intrinsics={"fx": canvas.focal, "fy": canvas.focal, "cx": canvas.width / 2, "cy": canvas.height / 2,
                    "width": canvas.width, "height": canvas.height},
        # World to camera, column-major: the camera looks down -z from (0, 0, HEIGHT), image up is +y.
        view_matrix=[1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, -HEIGHT, 1.0],
        camera_position=[0.0, 0.0, HEIGHT], near=NEAR, far=FAR, forward=[0.0, 0.0, -1.0])
    objects = [ObjectState(name=s.name, category=s.category, color=s.colour, body=k + 1,
                           position=[s.x, s.y, 0.005], orientation=[0.0, 0.0, 0.0, 1.0],
                           aabb_min=[s.x - s.size, s.y - s.size, 0.0], aabb_max=[s.x + s.size, s.y + s.size, 0.01],
                           tilt_deg=0.0)
               for k, s in enumerate(canvas.shapes)]
    return [SourceRecord(source_kind="shape_canvas", simulator="numpy canvas", scene_index=canvas.scene_index,
                         views=[view], arrays=ctx.put_arrays({"depth_0": depth, "seg_0": seg}), objects=objects)]


def render(canvas: CanvasSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    h, w = canvas.height, canvas.width
    us, vs = np.meshgrid(np.arange(w) + 0.5, np.arange(h) + 0.5)
    x = (us - w / 2) * HEIGHT / canvas.focal
    y = (h / 2 - vs) * HEIGHT / canvas.focal
    rgb = np.empty((h, w, 3), dtype=np.uint8)
    rgb[:] = BACKGROUND
    depth = np.full((h, w), HEIGHT, dtype=np.float32)
    seg = np.zeros((h, w), dtype=np.int32)
    for k, s in enumerate(canvas.shapes):
        if s.category == "disc":
            mask = (x - s.x) ** 2 + (y - s.y) ** 2 <= s.size ** 2
        else:
            mask = (np.abs(x - s.x) <= s.size) & (np.abs(y - s.y) <= s.size)
        rgb[mask] = COLOURS[s.colour]
        depth[mask] = HEIGHT - 0.01
        seg[mask] = k + 1
    return rgb, depth, seg
