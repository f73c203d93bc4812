"""What the agent of a LIBERO task can name, by what a person looking at the scene calls it.

Objects go by their kind ("the black bowl", "the ketchup bottle"); two or three of a kind by where
LIBERO's agent camera shows them in the initial state, along the direction they spread most
("the black bowl on the left", "the black bowl at the back", "the black bowl in the middle"),
never by LIBERO's numbering. Fixtures offer their regions ("the top of the wooden cabinet", "the
front compartment of the desk caddy"), their drawers and doors ("the top drawer of the wooden
cabinet", "the microwave") and their knobs ("the stove"). Regions of the table beside a thing are
named by it, as LIBERO's instructions name them ("the table to the right of the plate"); other
regions of the table are not named: nothing in the view marks where they lie.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from forge_resources.libero.motion import HANDLE_WORDS, RIM_WORDS, LiberoThing
from forge_resources.libero.scenes import FIXTURE_NAMES, category_of, object_name

# A fixture region's ending -> (how a person names it, given the fixture's name; things go in it).
REGIONS: dict[str, tuple[str, bool]] = {
    "top_side": ("top of the {f}", False),
    "cook_region": ("{f}", False),
    "heating_region": ("{f}", True),
    "top_region": ("top drawer of the {f}", True),
    "middle_region": ("middle drawer of the {f}", True),
    "bottom_region": ("bottom drawer of the {f}", True),
    "front_contain_region": ("front compartment of the {f}", True),
    "back_contain_region": ("back compartment of the {f}", True),
    "left_contain_region": ("left compartment of the {f}", True),
    "right_contain_region": ("right compartment of the {f}", True),
}
# Fixtures whose regions are named otherwise than a cabinet's.
SHELF_REGIONS = {"top_region": ("top shelf of the {f}", True), "bottom_region": ("bottom shelf of the {f}", True)}
RACK_REGIONS = {"top_region": ("{f}", False)}
TABLES = ("table", "kitchen_table", "living_room_table", "study_table", "floor", "main_table")
SIDES = {"left": "to the left of", "right": "to the right of", "front": "in front of", "behind": "behind"}
POSITIONS = {2: ("{} on the left", "{} on the right"), 3: ("{} on the left", "{} in the middle", "{} on the right")}
DEPTHS = {2: ("{} at the front", "{} at the back"), 3: ("{} at the front", "{} in the middle", "{} at the back")}


def things_of(env: Any, queries: Any, camera: str = "agentview", names: dict[str, str] | None = None) -> tuple[LiberoThing, ...]:
    """The task's things; ``names`` (instance -> name) keeps the names an initial state gave."""
    named = dict(names or {})
    if not named:
        named = object_names(env, queries, camera)
    out = []
    for instance, obj in env.objects_dict.items():
        category = category_of(instance)
        out.append(LiberoThing(named.get(instance, object_name(category)), instance, obj.root_body, "object",
                               rim=any(w in category for w in RIM_WORDS),
                               handle=any(w in category for w in HANDLE_WORDS)))
    for instance, fixture in env.fixtures_dict.items():
        category = category_of(instance)
        if category in TABLES:
            continue
        label = FIXTURE_NAMES.get(category, category.replace("_", " "))
        out += _fixture_things(env, instance, fixture, category, label)
    return tuple(out + _table_spots(env, queries, named))


def _table_spots(env: Any, queries: Any, named: dict[str, str]) -> list[LiberoThing]:
    """Regions of the table named by the one object or fixture beside them ("the table to the right
    of the plate"): LIBERO's own instructions place things so."""
    import mujoco

    nouns: dict[str, list[str]] = defaultdict(list)
    for instance in env.objects_dict:
        nouns[category_of(instance)].append(named.get(instance, object_name(category_of(instance))))
    for instance in env.fixtures_dict:
        nouns[category_of(instance)].append(FIXTURE_NAMES.get(category_of(instance), category_of(instance)))
    out = []
    for site_name in env.object_sites_dict:
        table = next((t for t in TABLES if site_name.startswith(t + "_")), None)
        side = next((w for w in SIDES if site_name.endswith(f"_{w}_region")), None)
        if table is None or side is None:
            continue
        category = site_name[len(table) + 1: -len(f"_{side}_region")]
        if len(nouns.get(category, [])) != 1:
            continue  # beside none of the scene's things, or beside one of several alike
        site = mujoco.mj_name2id(queries.model, mujoco.mjtObj.mjOBJ_SITE, site_name)
        body = mujoco.mj_id2name(queries.model, mujoco.mjtObj.mjOBJ_BODY, int(queries.model.site_bodyid[site]))
        out.append(LiberoThing(f"table {SIDES[side]} the {nouns[category][0]}", site_name, body, "region",
                               site=site_name, inside=False, owner=table))
    return out


def _fixture_things(env: Any, instance: str, fixture: Any, category: str, label: str) -> list[LiberoThing]:
    regions = {**REGIONS, **(SHELF_REGIONS if "shelf" in category else RACK_REGIONS if "rack" in category else {})}
    body = fixture.root_body
    out = []
    knob = list(fixture.joints) if "stove" in category else []
    for site_name, site in env.object_sites_dict.items():
        if site.parent_name != instance or not site_name.startswith(instance + "_"):
            continue
        ending = site_name[len(instance) + 1:]
        if ending not in regions:
            continue
        pattern, inside = regions[ending]
        joints = tuple(site.joints or ())
        kind = "part" if joints else "knob" if knob and ending == "cook_region" else "region"
        if ending == "heating_region" and list(fixture.joints):  # the microwave: its door opens and shuts
            kind, joints = "part", tuple(fixture.joints)
        if kind == "knob":
            joints = tuple(knob)
        out.append(LiberoThing(pattern.format(f=label), site_name, body, kind, site=site_name, inside=inside,
                               joints=joints, owner=instance, own_joints=bool(site.joints)))
    return out


def object_names(env: Any, queries: Any, camera: str) -> dict[str, str]:
    """Instance -> name: a kind alone, or with its place among two or three alike in the camera's view."""
    by_kind: dict[str, list[str]] = defaultdict(list)
    for instance in env.objects_dict:
        by_kind[object_name(category_of(instance))].append(instance)
    out = {}
    for noun, instances in by_kind.items():
        if len(instances) == 1:
            out[instances[0]] = noun
            continue
        if len(instances) > 3:
            continue  # four alike have no short names: the task keeps none of them
        seen = {i: _in_camera(queries, camera, queries.body_position(env.objects_dict[i].root_body)) for i in instances}
        lateral = np.ptp([p[0] for p in seen.values()])
        depth = np.ptp([p[1] for p in seen.values()])
        axis, words = (0, POSITIONS) if lateral >= depth else (1, DEPTHS)
        ordered = sorted(instances, key=lambda i: seen[i][axis])
        for instance, pattern in zip(ordered, words[len(instances)]):
            out[instance] = pattern.format(noun)
    return out


def _in_camera(queries: Any, camera: str, point: np.ndarray) -> tuple[float, float]:
    """(rightward, away) of a point in the camera's frame, in metres (MuJoCo cameras look along -z)."""
    import mujoco

    cam = mujoco.mj_name2id(queries.model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
    pos, rot = queries.data.cam_xpos[cam], queries.data.cam_xmat[cam].reshape(3, 3)
    local = rot.T @ (np.asarray(point) - pos)
    return float(local[0]), float(-local[2])

