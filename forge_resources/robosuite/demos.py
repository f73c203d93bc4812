"""Real teleoperated demonstrations (robosuite's HDF5 format) replayed state by state.

Each file holds ``data/demo_N/{states, actions}`` and the environment's name and settings; the
model each demo ran in is ``models/<model_file>`` beside it. States are MuJoCo's flattened
``[time, qpos, qvel]`` of that model, so a replay sets them one by one on the recorded model
(made portable by :mod:`.assets`) and never integrates physics.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from forge.errors import ForgeError
from forge_resources.robosuite.assets import PortableModel, portable_model
from forge_resources.robosuite.queries import SimQueries


class DemoError(ForgeError):
    """A demonstration file that cannot be read or replayed."""


@dataclass
class Demo:
    path: Path  # the HDF5 file
    key: str  # demo_N
    env_name: str  # robosuite's environment class name (Lift, Stack, Door, NutAssembly, PickPlace, Wipe)
    env_info: dict[str, Any]
    states: np.ndarray
    actions: np.ndarray
    model_file: Path
    recorded_with: str = ""  # robosuite version that wrote the file

    @property
    def name(self) -> str:
        return f"{self.path.parent.parent.name}/{self.key}"

    def __len__(self) -> int:
        return len(self.states)


def read_demos(path: str | Path) -> list[Demo]:
    """Every demo of one HDF5 file, in order."""
    import h5py

    path = Path(path)
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise DemoError(f"{path}: not a readable HDF5 file ({exc})") from None
    with f:
        if "data" not in f:
            raise DemoError(f"{path}: no 'data' group (robosuite demo format)")
        data = f["data"]
        attrs = dict(data.attrs)
        info = json.loads(attrs.get("env_info", "{}") or "{}")
        keys = sorted(data.keys(), key=lambda k: int(re.sub(r"\D", "", k) or 0))
        out = []
        for key in keys:
            group = data[key]
            if "states" not in group:
                raise DemoError(f"{path}: {key} has no states")
            model = path.parent / "models" / str(group.attrs.get("model_file", "model.xml"))
            out.append(Demo(path, key, str(attrs.get("env", info.get("env_name", ""))), info,
                            np.asarray(group["states"][()], dtype=float),
                            np.asarray(group["actions"][()], dtype=float) if "actions" in group else np.zeros((0, 0)),
                            model, str(attrs.get("repository_version", ""))))
    return out


def find_demos(root: str | Path) -> list[Demo]:
    """The demos under a folder laid out as robosuite ships them (``<task>/<robot>/demo.hdf5``)."""
    return [d for p in sorted(Path(root).glob("*/*/demo.hdf5")) for d in read_demos(p)]


@dataclass
class RecordedScene(SimQueries):
    """A demo's own model, loaded on this machine, with its states set one at a time."""

    demo: Demo
    portable: PortableModel = field(init=False)

    def __post_init__(self) -> None:
        import mujoco

        if not self.demo.model_file.is_file():
            raise DemoError(f"{self.demo.path}: its model {self.demo.model_file.name} is not in models/")
        self.portable = portable_model(self.demo.model_file.read_text(), str(self.demo.model_file))
        try:
            self.model = mujoco.MjModel.from_xml_string(self.portable.xml)
        except ValueError as exc:
            raise DemoError(f"{self.demo.model_file}: MuJoCo cannot load it: {exc}") from None
        self.data = mujoco.MjData(self.model)
        width = 1 + self.model.nq + self.model.nv
        if self.demo.states.shape[1] != width:
            raise DemoError(f"{self.demo.path} {self.demo.key}: states have {self.demo.states.shape[1]} values, the "
                            f"model's [time, qpos, qvel] has {width}")
        self.index = -1

    def set(self, index: int) -> None:
        import mujoco

        state = self.demo.states[index]
        nq, nv = self.model.nq, self.model.nv
        self.data.time = state[0]
        self.data.qpos[:] = state[1:1 + nq]
        self.data.qvel[:] = state[1 + nq:1 + nq + nv]
        mujoco.mj_forward(self.model, self.data)
        self.index = index if index >= 0 else len(self.demo) + index

    @property
    def model_label(self) -> str:
        return str(self.demo.model_file)

    def render(self, camera: str, width: int = 320, height: int = 240) -> np.ndarray:
        """An RGB frame of the current state from one of the model's cameras."""
        import mujoco

        if camera not in self.names["cameras"]:
            raise DemoError(f"{self.demo.model_file}: no camera {camera!r}; it has {self.names['cameras']}")
        renderer = self.renderer(width, height)
        hidden = mujoco.MjvOption()
        hidden.sitegroup[:] = 0  # grip-site markers and other visual aids are not part of the scene
        renderer.update_scene(self.data, camera=camera, scene_option=hidden)
        return renderer.render().copy()

    def renderer(self, width: int, height: int) -> Any:
        """This scene's offscreen renderer at one size (made once, freed at exit)."""
        import mujoco

        cached = getattr(self, "_render_cache", None)
        if cached is None or cached[0] != (width, height):
            self.model.vis.global_.offwidth = max(self.model.vis.global_.offwidth, width)
            self.model.vis.global_.offheight = max(self.model.vis.global_.offheight, height)
            self._render_cache = ((width, height), mujoco.Renderer(self.model, height=height, width=width))
            _track(self._render_cache[1])
        return self._render_cache[1]


_OPEN_RENDERERS: list[Any] = []


def _track(renderer: Any) -> None:
    """Free renderers at exit before MuJoCo terminates the EGL display (its handler is registered
    by the first context; handlers run in reverse order)."""
    import atexit

    if not _OPEN_RENDERERS:
        atexit.register(_close_renderers)
    _OPEN_RENDERERS.append(renderer)


def _close_renderers() -> None:
    while _OPEN_RENDERERS:
        _OPEN_RENDERERS.pop().close()
