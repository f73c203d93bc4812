"""The Offline-EQA track's artifact types: blueprint, scene plans and source records,
evidence, templates, bindings and items (``forge.artifact_types`` holds the engine's base
class and the package type every track releases).

``VISIBLE_FIELDS`` names what a model under evaluation may see; everything else is hidden.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from forge.artifact_types import ArtifactContent


# --- S1 ---------------------------------------------------------------------------------


class TemplateRef(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    path: str


class Blueprint(ArtifactContent):
    """Capability targets, question types, resources and output schema for one benchmark."""

    name: str
    version: str
    seed: int
    track: str
    items_target: int
    capabilities: list[str]
    question_types: list[str]
    capability_targets: dict[str, int]
    templates: list[TemplateRef]
    sources: list[dict[str, Any]]
    gates: dict[str, Any]
    output_schema: str = "oe-item/1"
    intent_hash: str
    capability_sources: dict[str, list[str]] = Field(default_factory=dict, description="phrases of the intent's focus "
                                                                                         "that chose each capability")
    composition_tolerance: float = 0.05
    difficulty: dict[str, float] = Field(default_factory=dict, description="share of items asked per difficulty "
                                         "band (easy, medium, hard); empty: no mix asked")
    unavailable: dict[str, str] = Field(default_factory=dict, description="capabilities the sources cannot support, "
                                                                          "and why (their share goes to the others)")


# --- S2 ---------------------------------------------------------------------------------

    def summary(self) -> str:
        return f"{self.name} {self.version}: {self.items_target} items, {self.capabilities}"

class ObjectSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    category: str
    color: str
    rgba: list[float]
    urdf: str
    scale: float
    xy: list[float]
    yaw: float
    z: float | None = Field(None, description="height of the surface it is set down on (a table top, a tray "
                                              "floor); the layout's support height when absent")
    base_rpy: list[float] = Field(default_factory=lambda: [0.0, 0.0, 0.0],
                                  description="resting pose (roll, pitch, yaw) applied before the yaw")
    up_axis: list[float] = Field(default_factory=lambda: [0.0, 0.0, 1.0], description="the mesh's up axis")
    texture: bool = Field(False, description="keep the mesh's own texture under the tint (when it is what makes "
                                             "the category recognisable); otherwise the tint alone colours it")


class BodySpec(BaseModel):
    """A static or robot body of the scene: furniture, trays, the embodiment itself."""

    model_config = ConfigDict(extra="forbid")
    name: str
    category: str
    urdf: str
    position: list[float]
    yaw: float = 0.0
    scale: float = 1.0
    fixed: bool = True
    joints: list[float] = Field(default_factory=list)
    rgba: list[float] | None = None


class CameraSpec(BaseModel):
    """A calibrated camera: orbit form (target, distance, yaw, pitch) or pose form (eye, target, up)."""

    model_config = ConfigDict(extra="forbid")
    index: int
    target: list[float]
    distance: float = 0.0
    yaw: float = 0.0
    pitch: float = 0.0
    fov: float
    width: int
    height: int
    near: float = 0.05
    far: float = 5.0
    eye: list[float] | None = None
    up: list[float] | None = None
    role: str = Field("view", description="view, frame (one moment of a trajectory), top_down, forward, overview")
    time: float | None = Field(None, description="seconds since the trajectory started, for frames")


class SceneSpec(ArtifactContent):
    """A seeded, fully parameterized scene: what to load where, and where to look from."""

    source_kind: str
    scene_index: int
    seed: int
    robot: str
    objects: list[ObjectSpec]
    cameras: list[CameraSpec]
    layout: str = "tabletop"
    bodies: list[BodySpec] = Field(default_factory=list)
    support_height: float = Field(0.626, description="height objects are dropped onto when they give no z")

    def summary(self) -> str:
        return f"scene {self.scene_index} seed {self.seed}: {', '.join(o.name for o in self.objects)}"

class ViewRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    index: int
    rgb: str = Field(description="blob hash of the RGB PNG")
    width: int
    height: int
    intrinsics: dict[str, float]
    view_matrix: list[float] = Field(description="world-to-camera, column-major 4x4 as pybullet returns it")
    camera_position: list[float]
    near: float
    far: float
    role: str = "view"
    time: float | None = None
    forward: list[float] | None = Field(None, description="unit viewing direction in the world frame")
    body_pixels: dict[str, int] = Field(default_factory=dict, description="visible pixels of each static body")
    whole_pixels: dict[str, int] | None = Field(None, description="per object seen in the view: the pixels of its "
                                                "whole projection inside the image, as if nothing stood in front "
                                                "of it (None: not measured)")
    outside_pixels: dict[str, int] | None = Field(None, description="per object the image border cuts: the "
                                                  "pixels of its whole projection that fall outside the image")
    recipe: dict[str, Any] | None = Field(None, description="dataset file, SHA-256 and crop of a view whose pixels "
                                                            "may not be redistributed")
    attributes: dict[str, Any] = Field(default_factory=dict, description="the source's own facts of this view "
                                       "(exposure, a sensor's name, a pose's provenance), carried into the evidence")


class ObjectState(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    category: str
    color: str
    body: int
    position: list[float]
    orientation: list[float]
    aabb_min: list[float]
    aabb_max: list[float]
    support: str | None = Field(None, description="what the object rests on, from contact points after settling")
    tilt_deg: float | None = Field(None, description="angle (0-90) between the line of the object's up axis and "
                                                     "the vertical")
    up_axis: list[float] = Field(default_factory=lambda: [0.0, 0.0, 1.0], description="the mesh's up axis")
    touching: list[str] = Field(default_factory=list, description="other objects it is in contact with, from the "
                                                                  "simulator's contacts")
    opening_deg: float | None = Field(None, description="how far an articulated object (a door on its hinge) "
                                                        "stands open, in degrees")
    unnameable: str | None = Field(None, description="why no name would single it out (a mesh stretched out of "
                                                     "its shape); None when it may be named")


class SourceRecord(ArtifactContent):
    """Observations collected in a simulator or read from a dataset."""

    source_kind: str
    simulator: str
    scene_index: int
    views: list[ViewRecord]
    arrays: str = Field(description="blob hash of the HDF5 file with raw depth and segmentation per view")
    objects: list[ObjectState]
    bodies: dict[str, str] = Field(default_factory=dict, description="static body name -> category (floor, table, tray)")
    naming: Literal["colour", "identity"] = Field("colour", description="how objects are named in items: by the colour "
                                                  "they render in (colour), or by their own identity (a milk carton) "
                                                  "when no other object shares it (identity)")
    robot_base: list[float] | None = Field(None, description="world position of the arm's base, when one stands in "
                                                             "the scene")
    gripper: dict[str, Any] | None = Field(None, description="the gripper's finger opening (metres), state (open, "
                                                             "closed, or None while moving) and the object it holds")
    parts: dict[str, dict[str, Any]] = Field(default_factory=dict, description="drawers and doors of static bodies, "
                                             "by label: fixture, state (open, closed, partly open), the horizontal "
                                             "direction it opens toward, position and segmentation value")
    timeline: list[dict[str, Any]] | None = Field(None, description="per view of a clip (views are moments in "
                                                                    "time order): the gripper and object heights")

    def summary(self) -> str:
        return f"{self.simulator} scene {self.scene_index}: {len(self.views)} views, {len(self.objects)} objects"

class ImageUnit(ArtifactContent):
    """One unit of a real-image folder: a DOTA tile, a frame sequence or a stereo pair."""

    source_kind: str
    adapter: str
    root: str = Field(description="dataset folder the files are relative to")
    unit_index: int
    kind: str = Field(description="tile, sequence or stereo_pair")
    files: list[str]
    sha256: list[str]
    crop: list[int] | None = Field(None, description="x0, y0, x1, y1 of the tile in the image")
    labels: str | None = Field(None, description="label file, relative to the root")
    labels_complete: bool = Field(True, description="whether every object of the labelled categories is labelled")
    order: list[float] = Field(default_factory=list, description="capture order of each file (frame numbers)")
    sides: list[str] = Field(default_factory=list, description="stereo side of each file (left, right)")

    def summary(self) -> str:
        crop = f" crop {self.crop}" if self.crop else ""
        return f"{self.adapter} {self.kind} {self.unit_index}: {', '.join(self.files)}{crop}"

class ImageLabel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    category: str
    polygon: list[float] = Field(description="x1 y1 ... x4 y4 in tile pixels")
    difficult: bool
    truncated: bool
    center: list[float] = Field(description="mean of the label's full (unclipped) corners, in tile pixels")


class ImageRecord(ArtifactContent):
    """Real images read through an adapter, with the labels it could parse."""

    source_kind: str
    adapter: str
    unit_index: int
    views: list[ViewRecord]
    labels: list[ImageLabel]
    metres_per_pixel: float | None
    root: str = Field(description="dataset folder")
    labels_file: str | None = Field(None, description="label file the labels were parsed from, relative to the root")
    crop: list[int] | None = None
    redistribute: bool = Field(description="whether the pixels may be copied into a package")
    licence_note: str
    labels_complete: bool = Field(True, description="whether every object of the labelled categories is labelled")


# --- S3 ---------------------------------------------------------------------------------

    def summary(self) -> str:
        return f"{self.adapter} unit {self.unit_index}: {len(self.views)} views, {len(self.labels)} labels"

class ObjectViewFact(BaseModel):
    """What one view shows of one object, measured from simulator ground truth."""

    model_config = ConfigDict(extra="forbid")
    object: str
    view: int
    visible_pixels: int
    in_frustum: bool
    bbox_2d: list[int] | None = None
    center_2d: list[float] | None = None
    median_depth: float | None = None
    projected_center: list[float] | None = None
    truncation: float | None = Field(None, description="share of the object's projected 3D box outside the image "
                                                       "(1: behind the camera)")
    colour: str | None = Field(None, description="colour name its visible pixels carry in this view (None: too "
                                                 "few pixels or no clear name)")
    colour_lab: list[float] | None = Field(None, description="CIELAB of its lit surface in this view")
    visible_share: float | None = Field(None, description="visible pixels over the pixels of the object's whole "
                                                          "projection inside the image (rendered alone from the same "
                                                          "camera); None where not measured")
    contrast: float | None = Field(None, description="CIELAB distance between the object's pixels and the pixels "
                                                     "around it (median colours): how well it stands out")
    border_share: float | None = Field(None, description="share of the object's whole projection (rendered alone) "
                                                         "that falls outside the image; None where not measured")


class EvidenceObject(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="how questions refer to it: its rendered colour and category, when that "
                                  "singles it out")
    category: str
    color: str = Field(description="colour name read from its rendered pixels ('' when none is clear)")
    source_name: str | None = Field(None, description="the object's name in its source record, when it differs")
    referable: bool = Field(True, description="whether questions may name it (a clear colour no other object of "
                                              "its category shares)")
    naming: str | None = Field(None, description="why it may not be named, when it may not")
    position: list[float] | None = None
    box_3d_min: list[float] | None = None
    box_3d_max: list[float] | None = None
    support: str | None = None
    tilt_deg: float | None = None
    attributes: dict[str, Any] = Field(default_factory=dict, description="source-specific registered facts "
                                                                           "(label quality, ground area)")


class EvidenceView(BaseModel):
    model_config = ConfigDict(extra="forbid")
    index: int
    rgb: str
    width: int
    height: int
    camera_position: list[float] | None = None
    role: str = "view"
    time: float | None = None
    forward: list[float] | None = None
    body_pixels: dict[str, int] = Field(default_factory=dict)
    recipe: dict[str, Any] | None = Field(None, description="how to rebuild this view from a dataset file "
                                                            "that may not be redistributed")
    intrinsics: dict[str, float] | None = Field(None, description="fx, fy, cx, cy, width, height of a calibrated view")
    view_matrix: list[float] | None = Field(None, description="world-to-camera, column-major 4x4 (OpenGL: the "
                                                             "camera looks along -z)")
    attributes: dict[str, Any] = Field(default_factory=dict, description="the source's own facts of this view, "
                                                                         "as its record gave them")


class EvidenceRecord(ArtifactContent):
    """Registered facts of one scene, each traceable to a view of a source record."""

    source: str = Field(description="artifact id of the SourceRecord the facts were measured on")
    scene_index: int
    views: list[EvidenceView]
    objects: list[EvidenceObject]
    facts: list[ObjectViewFact]
    metres_per_pixel: float | None = Field(None, description="ground sampling distance of nadir images")
    labels_complete: bool = Field(True, description="whether every object of the registered kinds is registered: "
                                                    "counts and absences need it")
    robot_base: list[float] | None = Field(None, description="world position of the arm's base (reach is measured "
                                                             "from it)")
    gripper: dict[str, Any] | None = Field(None, description="the gripper's opening, state and held object, from "
                                                             "the simulator")
    timeline: list[dict[str, Any]] | None = Field(None, description="per view of a clip: the gripper (opening, "
                                                                    "state, held object) and each object's height")
    parts: dict[str, dict[str, Any]] = Field(default_factory=dict, description="drawers and doors of static bodies "
                                             "and their states, as the source record gave them")
    conventions: dict[str, Any] = Field(default_factory=dict, description="what the source states about its scenes "
                                        "(what counts as an object, a scale reference), from its descriptor")
    referent_rules: dict[str, Any] = Field(default_factory=dict, description="what a person needs to make out a "
                                           "named object in this source's views (visible share, contrast, border, "
                                           "pixels per category), from its descriptor")


# --- S4 ---------------------------------------------------------------------------------

    def summary(self) -> str:
        return f"scene {self.scene_index}: {len(self.facts)} facts from source {self.source[:12]}"

class Template(ArtifactContent):
    """An expert question template: evidence slots, answer rule, options, realizations."""

    id: str
    version: int
    capability: str
    question_type: str
    scope: str
    slots: dict[str, Any]
    answer_rule: dict[str, Any]
    admission: dict[str, Any]
    options: dict[str, Any]
    realizations: list[str]
    visibility: dict[str, Any] = Field(default_factory=dict)
    assumptions: dict[str, str] = Field(default_factory=dict, description="conventions the key relies on -> the "
                                                                           "sentence that states them to the model")
    media: dict[str, Any]
    scoring: dict[str, Any]
    max_per_evidence: int
    file: str
    file_hash: str
    code_version: str = Field("", description="hash of the registered code its items depend on: answer rule, "
                                              "re-verifier, question type, scoring protocol")

    def summary(self) -> str:
        return f"{self.id} v{self.version} ({self.file})"

class Binding(ArtifactContent):
    """A template's slots filled with registered evidence, and the answer those facts imply."""

    template: str
    template_artifact: str
    evidence: str
    scene_index: int
    view: int | None
    slots: dict[str, Any]
    answer: str
    derivation: dict[str, Any]
    admission_scores: dict[str, float]
    variant: int
    presentation: dict[str, Any] = Field(description="what realization needs: texts, option rules, media sources, markers")
    position_seed: int = Field(0, description="picks the option order; cycles over a template's bindings")
    difficulty: str = Field("medium", description="easy, medium or hard, from the margins of its derivation")

    def summary(self) -> str:
        return f"{self.template} slots={self.slots} answer={self.answer}"

class MediaRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    blob: str
    role: str
    label: str
    recipe: dict[str, Any] | None = Field(None, description="rebuild instructions when the pixels may not be "
                                                            "redistributed")


class OEItem(ArtifactContent):
    """An Offline-EQA item: what the model sees, and the hidden key that scores it."""

    VISIBLE_FIELDS: ClassVar[tuple[str, ...]] = (
        "question", "options", "targets", "media", "response_format", "question_type", "capability", "instruction",
    )

    question: str
    instruction: str = Field("", description="one line stating the conventions the key relies on (what counts, "
                                             "the scale, the reach), shown with the question")
    options: list[str]
    media: list[MediaRef]
    response_format: str
    question_type: str
    capability: str
    answer: str
    answer_index: int | None
    scoring: dict[str, Any]
    template: str
    binding: str
    answer_indices: list[int] | None = Field(None, description="several correct options, the correct order, or each option's target")
    answer_value: float | None = Field(None, description="the numeric answer, scored with tolerance")
    evidence: str
    derivation: dict[str, Any]
    media_sources: list[str] = Field(default_factory=list, description="source RGB blobs the media were drawn from")
    option_values: list[str] = Field(default_factory=list, description="what each displayed option refers to")
    targets: list[str] = Field(default_factory=list, description="matching items: what each option is matched to")
    kinds: list[str] = Field(default_factory=list, description="categories of the objects the question names (answers "
                                                              "are balanced within each)")
    determinant: dict[str, Any] = Field(default_factory=dict, description="what the answer is a function of: the "
                                                                          "quantity, where it is measured, the referents")

    difficulty: str = Field("medium", description="easy, medium or hard, from the margins of its derivation")
    markers: list[dict[str, Any]] = Field(default_factory=list, description="the markers as drawn: label, centre "
                                          "(x, y as shares of the image width and height), ring radius (share of the "
                                          "height); what a solver reading only the markers would see")

    payload: dict[str, Any] = Field(default_factory=dict, description="hidden data the key scores with (a mask, a "
                                    "pose), from the rule's derivation: shipped only in the answer key, never shown")

    def key(self) -> dict[str, Any]:
        """The answer key a scoring protocol reads (``answers.jsonl`` holds it, hidden)."""
        return {"scoring": self.scoring, "options": self.options, "answer": self.answer,
                "answer_index": self.answer_index, "answer_indices": self.answer_indices,
                "answer_value": self.answer_value, "targets": self.targets,
                **({"payload": self.payload} if self.payload else {})}

    def values(self) -> list[str]:
        return self.option_values or self.options

    def summary(self) -> str:
        return f"{self.question} -> {self.answer}"
