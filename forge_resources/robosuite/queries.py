"""Named queries on a MuJoCo model and its state: body and site positions, joint angles, box
extents and contacts, by the model's own names. Recorded demos and live tasks answer the same
queries, so one set of physical goal checks (:mod:`.outcomes`) serves both."""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np

from forge.errors import ForgeError


class QueryError(ForgeError):
    """A name the model does not have."""


class SimQueries:
    """Mixed into anything with ``model`` and ``data`` (MuJoCo) and a ``model_label`` for errors."""

    model: Any
    data: Any

    @property
    def model_label(self) -> str:
        return "the model"

    def _id(self, kind: Any, name: str) -> int:
        import mujoco

        i = mujoco.mj_name2id(self.model, kind, name)
        if i < 0:
            raise QueryError(f"{self.model_label}: no {kind.name[6:].lower()} named {name!r}")
        return i

    def body_position(self, name: str) -> np.ndarray:
        import mujoco

        return self.data.xpos[self._id(mujoco.mjtObj.mjOBJ_BODY, name)].copy()

    def site_position(self, name: str) -> np.ndarray:
        import mujoco

        return self.data.site_xpos[self._id(mujoco.mjtObj.mjOBJ_SITE, name)].copy()

    def joint_position(self, name: str) -> float:
        import mujoco

        return float(self.data.qpos[self.model.jnt_qposadr[self._id(mujoco.mjtObj.mjOBJ_JOINT, name)]])

    def body_half_extent(self, name: str) -> np.ndarray:
        """Half sizes (x, y) of the body's widest box geom: a bin's floor, a table's top."""
        import mujoco

        body = self._id(mujoco.mjtObj.mjOBJ_BODY, name)
        boxes = [self.model.geom_size[g] for g in range(self.model.ngeom)
                 if self.model.geom_bodyid[g] == body and self.model.geom_type[g] == mujoco.mjtGeom.mjGEOM_BOX]
        if not boxes:
            raise QueryError(f"{self.model_label}: body {name!r} has no box geom to measure")
        return np.array(max(boxes, key=lambda s: s[0] * s[1])[:2], dtype=float)

    def bodies_touching(self, a: str, b: str) -> bool:
        """Whether any geom of body ``a`` (or its children) touches one of body ``b``."""
        ga, gb = self.geoms_under(a), self.geoms_under(b)
        for c in self.data.contact[: self.data.ncon]:
            if (c.geom1 in ga and c.geom2 in gb) or (c.geom1 in gb and c.geom2 in ga):
                return True
        return False

    @cached_property
    def _parents(self) -> np.ndarray:
        return np.asarray(self.model.body_parentid)

    def geoms_under(self, body: str) -> set[int]:
        """The geoms of ``body`` and of every body below it."""
        import mujoco

        root = self._id(mujoco.mjtObj.mjOBJ_BODY, body)
        under = {root}
        for b in range(self.model.nbody):  # bodies are numbered after their parents
            if self._parents[b] in under and b != 0:
                under.add(b)
        return {g for g in range(self.model.ngeom) if self.model.geom_bodyid[g] in under}

    @property
    def names(self) -> dict[str, list[str]]:
        import mujoco

        def of(kind: Any, n: int) -> list[str]:
            return [mujoco.mj_id2name(self.model, kind, i) or "" for i in range(n)]

        return {"bodies": of(mujoco.mjtObj.mjOBJ_BODY, self.model.nbody),
                "joints": of(mujoco.mjtObj.mjOBJ_JOINT, self.model.njnt),
                "cameras": of(mujoco.mjtObj.mjOBJ_CAMERA, self.model.ncam)}
