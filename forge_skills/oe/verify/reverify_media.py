"""What forge reverify checks of a released item besides its key: that its media show what its
evidence holds (every frame the answer depends on) and that its options are plain words."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from forge.store import Store


def _frames(source: dict[str, Any]) -> list[int]:
    timed = [v for v in source["views"] if v.get("time") is not None and v.get("role") != "overview"]
    return [v["index"] for v in sorted(timed, key=lambda v: (v["time"], v["index"]))]


def _options_plain(options: list[str], source: dict[str, Any], template: dict[str, Any]) -> bool:
    names = {o["name"] for o in source["objects"]}
    allowed = names | {"yes", "no", "A", "B", "C", "D"} | {f"View {i + 1}" for i in range(len(source["views"]))}
    allowed |= {label for _, _, label in template["options"].get("intervals", [])}
    allowed |= set(template["options"].get("values", [])) | set(template["options"].get("labels", []))
    allowed |= {f"Frame {i + 1}" for i in range(len(source["views"]))}
    return all(o in allowed for o in options)


def _colours(a: np.ndarray) -> int:
    packed = (a[..., 0].astype(np.uint32) << 16) | (a[..., 1].astype(np.uint32) << 8) | a[..., 2]
    return int(len(np.unique(packed)))


def _media_problem(package: Path, row: dict[str, Any], template: dict[str, Any], source: dict[str, Any],
                   slots: dict[str, Any], store: Store, view: int | None) -> str | None:
    # A bare rendered view can itself have few colours; media must keep at least half of the
    # richest source view's colours (a label map keeps a handful).
    richest = max(_colours(store.get_image(v["rgb"])) for v in source["views"] if view is None or v["index"] == view)
    for m in row["media"]:
        img = Image.open(io.BytesIO((package / m["path"]).read_bytes()))
        a = np.asarray(img.convert("RGB"))
        if img.mode != "RGB" or _colours(a) < min(48, max(2, richest // 2)):
            return "visible media are not a processed RGB image"
        layout = template["media"].get("layout")
        if layout in ("multi_view", "frames", "first_last", "top_down_forward"):
            frames = _frames(source)
            ends = (frames[0], frames[-1]) if frames else ()
            if "window" in slots:
                frames = frames[slots["window"][0]: slots["window"][1] + 1]
            needed = {"frames": [v for v in source["views"] if v["index"] in frames],
                      "first_last": [v for v in source["views"] if v["index"] in ends],
                      "top_down_forward": [v for v in source["views"]
                                           if v.get("role") == "overview" or v["index"] == slots.get("frame")],
                      }.get(layout) or [v for v in source["views"] if "pair" not in slots or v["index"] in slots["pair"]]
            width = sum(v["width"] for v in needed)
            if a.shape[1] < width:
                return "the media do not show every view the answer depends on"
    return None
