"""The intent sections of the built-in source kinds (registered by the ``builtin`` plugin)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from forge.sources import SourceSpec


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ImageSize(_Strict):
    width: int = Field(320, ge=64, le=1920, description="image width in pixels")
    height: int = Field(240, ge=48, le=1080, description="image height in pixels")


class _Range(_Strict):
    """A min/max pair whose bounds are in order."""

    @model_validator(mode="after")
    def _ordered(self) -> "_Range":
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is larger than max ({self.max})")
        return self


class ObjectCount(_Range):
    min: int = Field(4, ge=1, le=12)
    max: int = Field(8, ge=1, le=12)


class CountRange(_Range):
    min: int = Field(1, ge=0, le=4)
    max: int = Field(2, ge=0, le=4)


class _SceneSource(SourceSpec):
    """A simulated source drawing objects from the scene catalogue for one layout."""

    LAYOUT: ClassVar[str] = ""

    @field_validator("categories", check_fields=False)
    @classmethod
    def _known_categories(cls, value: list[str] | None) -> list[str] | None:
        """Categories the catalogue has for this layout, checked before anything runs."""
        if value is None:
            return value
        from forge.intent import did_you_mean
        from forge_resources.pybullet_sim import catalogue

        usable = sorted(c for c, e in catalogue()["categories"].items() if cls.LAYOUT in e["scale"])
        unknown = [c for c in value if c not in usable]
        if unknown:
            raise ValueError(f"unknown object categories {unknown}{did_you_mean(unknown, usable)}; "
                             f"{cls.LAYOUT} scenes have {usable}")
        if not value:
            raise ValueError("give at least one category, or leave the field out for all of them")
        return value


class TabletopSource(_SceneSource):
    """pybullet tabletop scenes: an arm beside a table with objects on it."""

    LAYOUT: ClassVar[str] = "tabletop"

    kind: Literal["pybullet_tabletop"]
    scenes: int | None = Field(None, ge=1, le=5000, description="scene count; derived from items when absent")
    robot: Literal["panda", "kuka", "xarm"] = "panda"
    objects: ObjectCount = ObjectCount()
    views: int = Field(3, ge=2, le=6, description="camera views per scene")
    image: ImageSize = ImageSize()
    categories: list[str] | None = Field(None, description="object categories to draw from; all when absent")
    trays: CountRange = Field(default_factory=lambda: CountRange(min=0, max=1),
                              description="trays on the table, with objects put in them")
    lying_fraction: float = Field(0.0, ge=0.0, le=1.0, description="share of objects with an up axis dropped on their side")


class RoomSource(_SceneSource):
    """Room-scale household scenes in pybullet seen by a mobile robot or a quadruped along its path."""

    LAYOUT: ClassVar[str] = "room"

    kind: Literal["pybullet_room"]
    scenes: int | None = Field(None, ge=1, le=5000, description="scene count; derived from items when absent")
    embodiment: Literal["husky", "laikago", "a1", "minitaur"] = "husky"
    objects: ObjectCount = ObjectCount(min=5, max=9)
    tables: CountRange = CountRange(min=1, max=2)
    trays: CountRange = CountRange(min=1, max=2)
    frames: int = Field(6, ge=2, le=8, description="frames along the camera path")
    max_turn_deg: float = Field(100.0, ge=0.0, le=150.0, description="largest total turn of the path (at least 40 degrees, or this when smaller)")
    lying_fraction: float = Field(0.4, ge=0.0, le=1.0, description="share of objects with an up axis dropped on their side")
    image: ImageSize = ImageSize()
    categories: list[str] | None = Field(None, description="object categories to draw from; all when absent")

    @property
    def views(self) -> int:
        return self.frames


class GroundSource(_SceneSource):
    """Ground layouts in pybullet seen from a drone (top-down) or a vehicle (forward, plus an overview)."""

    LAYOUT: ClassVar[str] = "ground"

    kind: Literal["pybullet_ground"]
    scenes: int | None = Field(None, ge=1, le=5000, description="scene count; derived from items when absent")
    embodiment: Literal["uav", "racecar"] = "uav"
    objects: ObjectCount = ObjectCount(min=6, max=10)
    frames: int = Field(4, ge=2, le=8, description="frames along the flight or drive")
    max_turn_deg: float = Field(40.0, ge=0.0, le=120.0)
    altitude_m: tuple[float, float] = Field((7.0, 9.0), description="drone altitude range in metres")
    image: ImageSize = ImageSize()
    categories: list[str] | None = Field(None, description="object categories to draw from; all when absent")

    @field_validator("altitude_m")
    @classmethod
    def _altitude_range(cls, value: tuple[float, float]) -> tuple[float, float]:
        low, high = value
        if not 2.0 <= low <= high <= 60.0:
            raise ValueError("give [low, high] metres with 2 <= low <= high <= 60")
        return value

    @property
    def views(self) -> int:
        return self.frames + (1 if self.embodiment == "racecar" else 0)


class ImageFolderSource(SourceSpec):
    """Real images in a folder, read through an adapter that registers what it can."""

    FOLDERS: ClassVar[tuple[str, ...]] = ("root",)

    kind: Literal["image_folder"]
    adapter: Literal["dota", "frames"]
    root: str = Field(description="dataset folder, relative to the intent file")
    tile: int = Field(600, ge=128, le=4096, description="DOTA: tile size in pixels (images are split like DOTA_devkit)")
    tile_overlap: int = Field(100, ge=0, le=1024)
    zoom: int = Field(0, ge=0, le=2048, description="DOTA: also cut square zoomed crops of this size whose border "
                                                    "cuts no box, so every object in them can be counted (0: none)")
    zooms_per_image: int = Field(6, ge=1, le=100)
    scenes: int | None = Field(None, ge=1, description="ignored: the folder decides the unit count")
    trust_label_completeness: bool = Field(
        False, description="treat the labels as exhaustive although the adapter cannot show it (DOTA's are not): "
                           "allows counts and absences from labels; off by default")
    media: Literal["auto", "copy", "reference"] = Field(
        "auto", description="copy pixels into the package, or only reference the dataset files; auto follows "
                            "the adapter's licence (DOTA images are never copied)")

    @model_validator(mode="after")
    def _overlap_below_tile(self) -> "ImageFolderSource":
        if self.tile_overlap >= self.tile:
            raise ValueError(f"tile_overlap ({self.tile_overlap}) must be smaller than tile ({self.tile})")
        return self

    def fixed_units(self, entry: dict[str, Any]) -> int | None:
        from forge_resources.image_folder import adapter_for

        root = Path(self.root)  # resolved from the intent's folder by the planner
        entry["root"] = str(root.resolve())
        return len(adapter_for(self.adapter).units(root, entry))

    def no_units(self, entry: dict[str, Any]) -> str:
        from forge_resources.image_folder import adapter_for

        root = Path(self.root)
        where = str(root) if root.resolve() == root.absolute() else f"{root} (which leads to {root.resolve()})"
        rejected = adapter_for(self.adapter).rejected(root)
        why = (f"; {len(rejected)} files were passed over, such as {next(iter(rejected))}: "
               f"{next(iter(rejected.values()))}" if rejected else "")
        return f"the folder {where} holds nothing the {self.adapter} adapter reads ({self._expects()}){why}"

    def _expects(self) -> str:
        return ("label files in labelTxt/ with their images in images/" if self.adapter == "dota" else
                "numbered frames <number>_<camera>.png or stereo pairs <stem>_left / <stem>_right")

    def unavailable(self, capabilities: list[str]) -> dict[str, str]:
        """Real-image labels that are not exhaustive cannot show a count, unless the intent
        vouches for them."""
        from forge_resources.image_folder import adapter_for

        adapter = adapter_for(self.adapter)
        if self.trust_label_completeness or adapter.labels_complete:
            return {}
        return {cap: adapter.completeness_note for cap in capabilities if cap in adapter.rules_out}


class HouseholdSource(SourceSpec):
    """Household scenes from real AI2-THOR metadata dumps and ALFRED trials, their initial states
    varied by moving objects among receptacles that may hold them."""

    FOLDERS: ClassVar[tuple[str, ...]] = ("data_root",)

    kind: Literal["household"]
    data_root: str = Field(description="folder holding ai2thor/ (THOR dumps) and alfred/ (trials and layouts), "
                                       "relative to the intent file")
    floor_plans: list[int] | None = Field(None, description="only these floor plans (all the data holds when absent)")
    moves: int = Field(4, ge=0, le=20, description="objects a variation moves among compatible receptacles")
    scenes: int | None = Field(None, ge=1, le=5000, description="scene units (a floor plan and a variation); derived "
                                                               "from ie.tasks when absent")


class RobosuiteSource(SourceSpec):
    """Seeded scenes of robosuite's manipulation environments (MuJoCo), seen from a camera rig."""

    kind: Literal["robosuite_scenes"]
    scenes: int | None = Field(None, ge=1, le=5000, description="scene count; derived from items when absent")
    envs: list[Literal["PickPlace", "NutAssembly", "Stack", "Lift", "Door"]] = Field(
        default_factory=lambda: ["PickPlace", "NutAssembly", "Stack", "Lift", "Door"],
        description="robosuite environments scenes are drawn from, in turn (Wipe has no objects to ask about)")
    views: int = Field(3, ge=2, le=6, description="camera views per scene")
    image: ImageSize = ImageSize()

    @field_validator("envs")
    @classmethod
    def _some(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("name at least one environment, or leave the field out for all of them")
        return value


class RobosuiteDemoSource(SourceSpec):
    """Moments of real robosuite demonstrations, replayed on their recorded models."""

    FOLDERS: ClassVar[tuple[str, ...]] = ("root",)

    kind: Literal["robosuite_demos"]
    root: str = Field(description="folder of the demonstrations (<task>/<robot>/demo.hdf5 with models/ beside each), "
                                  "relative to the intent file")
    frames: int | None = Field(None, ge=1, description="moments to render; every moment the demonstrations offer when "
                                                       "absent (one every 12 states at least)")
    scenes: int | None = Field(None, ge=1, description="ignored: the moments to render are set by frames")
    views: int = Field(3, ge=2, le=6, description="camera views per moment")
    image: ImageSize = ImageSize()

    def fixed_units(self, entry: dict[str, Any]) -> int | None:
        from forge_resources.robosuite.demo_frames import moment_count

        entry["root"] = str(Path(self.root).resolve())
        available = moment_count(entry["root"])
        return min(self.frames, available) if self.frames else available


class RobosuiteDemoClipSource(SourceSpec):
    """Clips of real robosuite demonstrations: a few moments in time order from one camera."""

    FOLDERS: ClassVar[tuple[str, ...]] = ("root",)

    kind: Literal["robosuite_demo_clips"]
    root: str = Field(description="folder of the demonstrations, relative to the intent file")
    clips: int | None = Field(None, ge=1, description="clips to render; every one the demonstrations offer when absent")
    scenes: int | None = Field(None, ge=1, description="ignored: the clips to render are set by clips")
    frames: int = Field(4, ge=3, le=8, description="moments per clip")
    stride: int = Field(20, ge=5, le=200, description="recorded states between two moments (20 Hz: 20 is a second)")
    image: ImageSize = ImageSize()

    @property
    def views(self) -> int:
        return self.frames

    def fixed_units(self, entry: dict[str, Any]) -> int | None:
        from forge_resources.robosuite.demo_frames import clip_count

        entry["root"] = str(Path(self.root).resolve())
        available = clip_count(entry["root"], self.frames, self.stride)
        return min(self.clips, available) if self.clips else available


LIBERO_SUITES = Literal["libero_spatial", "libero_object", "libero_goal", "libero_10", "libero_90"]


class LiberoSceneSource(SourceSpec):
    """LIBERO's task scenes (kitchens, living rooms, studies) at their recorded initial states."""

    kind: Literal["libero_scenes"]
    scenes: int | None = Field(None, ge=1, le=20000, description="scene units (a task at one of its initial "
                                                                "states); derived from items when absent")
    suites: list[LIBERO_SUITES] = Field(
        default_factory=lambda: ["libero_spatial", "libero_object", "libero_goal", "libero_10", "libero_90"],
        min_length=1, description="LIBERO suites whose tasks scenes are drawn from, in turn")
    tasks: list[str] | None = Field(None, description="only these tasks of the suites (BDDL file stems)")
    views: int = Field(3, ge=2, le=6, description="views per scene")
    agent_view: bool = Field(True, description="LIBERO's own agent camera as the first view (the arm's rig)")
    eye_heights: list[float] | None = Field(None, min_length=1, description="camera heights above the floor in "
                                            "metres (a household robot about 1.4, a mobile base 1.0, a quadruped "
                                            "0.5): free cameras stand at these heights instead of the arm's rig")
    image: ImageSize = ImageSize()

    @field_validator("eye_heights")
    @classmethod
    def _heights(cls, value: list[float] | None) -> list[float] | None:
        if value is not None and not all(0.2 <= h <= 3.0 for h in value):
            raise ValueError(f"eye heights {value} must each lie between 0.2 and 3.0 metres")
        return value

    @field_validator("tasks")
    @classmethod
    def _known_tasks(cls, value: list[str] | None) -> list[str] | None:
        if not value:
            return value
        from forge_resources.libero import runtime

        if runtime.missing() is not None:
            return value  # the build stops on the missing extra with its own message
        known = {t for s in runtime.SUITES for t in runtime.tasks(s)}
        unknown = [t for t in value if t not in known]
        if unknown:
            from forge.intent import did_you_mean

            raise ValueError(f"unknown LIBERO tasks {unknown}{did_you_mean(unknown, sorted(known))}")
        return value


class RobosuiteTaskSource(SourceSpec):
    """Seeded scenes of robosuite's manipulation environments as interactive tasks."""

    FOLDERS: ClassVar[tuple[str, ...]] = ("demos",)

    kind: Literal["robosuite_tasks"]
    demos: str | None = Field(None, description="folder of real demonstrations (<task>/<robot>/demo.hdf5), relative "
                                               "to the intent file: each of an environment asked is tried as a task "
                                               "whose reference is its recorded actions")
    scenes: int | None = Field(None, ge=1, le=5000, description="seeds to try (an environment and a seed each); "
                                                               "derived from ie.tasks when absent")
    envs: list[Literal["Lift", "Stack", "PickPlace", "NutAssembly"]] = Field(
        default_factory=lambda: ["Lift", "Stack", "PickPlace", "NutAssembly"], min_length=1,
        description="robosuite environments, in turn (scene types lift, stack, pick_place, nut_assembly)")


class LiberoTaskSource(SourceSpec):
    """LIBERO's tasks at their recorded initial states as interactive tasks."""

    kind: Literal["libero_tasks"]
    scenes: int | None = Field(None, ge=1, le=6500, description="task units to try (a task at one of its initial "
                                                                "states); derived from ie.tasks when absent")
    suites: list[LIBERO_SUITES] = Field(default_factory=lambda: ["libero_spatial", "libero_object", "libero_goal"],
                                        min_length=1, description="LIBERO suites whose tasks are tried, in turn "
                                                                  "(each suite is a scene type)")
    tasks: list[str] | None = Field(None, description="only these tasks of the suites (BDDL file stems)")
    _known_tasks = field_validator("tasks")(LiberoSceneSource._known_tasks.__func__)


BUILTIN_SOURCES = (TabletopSource, RoomSource, GroundSource, ImageFolderSource, HouseholdSource, RobosuiteSource,
                   RobosuiteDemoSource, RobosuiteDemoClipSource, RobosuiteTaskSource, LiberoSceneSource,
                   LiberoTaskSource)
