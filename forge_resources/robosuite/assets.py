"""Recorded MuJoCo models made loadable on this machine.

A demonstration's model XML names its assets by absolute paths on the machine that recorded it,
and robosuite has since moved and replaced some of them. Each path is mapped onto the installed
package's assets: the same relative path, else a file of that name elsewhere in the assets (the
mesh folders were reorganised), else the collision mesh standing in for a split visual mesh.
What was moved or stood in is recorded; what cannot be found is an error naming it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from forge.errors import ForgeError

ASSET_MARK = "/models/assets/"
_FILE_ATTR = re.compile(r'file="([^"]*)"')
_LIST_ATTR = re.compile(r'="\[([^\]"]*)\]"')  # pos="[0, 0, 0.005]", as an old writer left lists
_TEXTURE = re.compile(r"<texture\b[^>]*>")


class AssetError(ForgeError):
    """A recorded model names an asset the installed robosuite does not have."""


@dataclass
class PortableModel:
    xml: str
    moved: dict[str, str] = field(default_factory=dict)  # recorded relative path -> installed one
    stand_ins: dict[str, str] = field(default_factory=dict)  # visual mesh -> collision mesh used instead
    retyped: list[str] = field(default_factory=list)  # cube textures whose installed image is a 2D one


@lru_cache(maxsize=1)
def assets_root() -> Path:
    from forge_resources.robosuite import quiet_robosuite

    robosuite = quiet_robosuite()
    return Path(robosuite.__file__).resolve().parent / "models" / "assets"


@lru_cache(maxsize=1)
def _by_name() -> dict[str, tuple[str, ...]]:
    index: dict[str, list[str]] = {}
    root = assets_root()
    for folder, _, files in os.walk(root):
        for name in files:
            index.setdefault(name, []).append(os.path.relpath(os.path.join(folder, name), root))
    return {k: tuple(sorted(v)) for k, v in index.items()}


def _locate(recorded: str) -> tuple[str | None, str]:
    """(installed relative path or None, how it was found)."""
    rel = os.path.normpath(recorded)
    if (assets_root() / rel).is_file():
        return rel, "same"
    top = rel.split(os.sep)[0]
    for name, how in ((os.path.basename(rel), "moved"), (os.path.basename(rel).replace("_vis.", "."), "stand-in")):
        hits = [h for h in _by_name().get(name, ()) if not h.startswith("bullet_data")]
        if hits:  # prefer the same top folder (robots, objects, arenas, ...), then the shortest path
            return sorted(hits, key=lambda h: (h.split(os.sep)[0] != top, len(h), h))[0], how
    return None, "missing"


def portable_model(xml: str, source: str = "model XML") -> PortableModel:
    out = PortableModel(xml="")
    missing: list[str] = []

    def swap(match: re.Match) -> str:
        path = match.group(1)
        at = path.find(ASSET_MARK)
        if at < 0:
            return match.group(0)
        recorded = path[at + len(ASSET_MARK):]
        found, how = _locate(recorded)
        if found is None:
            missing.append(os.path.normpath(recorded))
            return match.group(0)
        if how == "moved":
            out.moved[os.path.normpath(recorded)] = found
        elif how == "stand-in":
            out.stand_ins[os.path.normpath(recorded)] = found
        return f'file="{assets_root() / found}"'

    text = _FILE_ATTR.sub(swap, xml)
    if missing:
        raise AssetError(f"{source}: the installed robosuite has no asset for {sorted(set(missing))}")
    text = _LIST_ATTR.sub(lambda m: '="' + " ".join(p.strip() for p in m.group(1).split(",")) + '"', text)
    out.xml = _TEXTURE.sub(lambda m: _retype(m.group(0), out), text)
    return out


def _retype(tag: str, out: PortableModel) -> str:
    """A cube texture read from one image needs a square image; robosuite's current object
    textures are 2D images wrapped on the mesh, and are declared so."""
    if 'type="cube"' not in tag or "file=" not in tag:
        return tag
    from PIL import Image

    path = _FILE_ATTR.search(tag).group(1)
    with Image.open(path) as image:
        w, h = image.size
    if w == h or w * 3 == h * 4 or w * 4 == h * 3:
        return tag
    out.retyped.append(os.path.basename(path))
    return tag.replace('type="cube"', 'type="2d"')
