"""What a model is asked about an item, and which part of its reply goes to the package's scorer.

The prompt is the same for every model: the item's id on the first line (an opaque handle, so a
log or a scripted server can tell items apart), its instruction line (the conventions its key
relies on) where it has one, its question, lettered options, numbered
targets, what each attached image shows, and the item's own response format. Images go as data
URLs through the model client.

A reply is read leniently but the same way for every model: the candidate answers below are
tried in order and the first one the package's scorer can parse is scored; a reply none of them
parses is invalid (it scores 0 and stays in the denominator).

Standard library only: packages ship this file beside their scorer, so the exported inspect_ai
task asks and reads exactly as ``forge eval`` does.
"""

from __future__ import annotations

import re
import string
from typing import Any, Callable

Message = dict[str, Any]


LETTERS = string.ascii_uppercase

SYSTEM = ("You answer questions about images. Look at every attached image, then reply with the answer only, "
          "exactly in the response format the question asks for.")


def item_text(item: dict[str, Any]) -> str:
    lines = [f"Item {item['id']}", ""]
    if item.get("instruction"):  # the conventions the key relies on, stated before the question
        lines += [str(item["instruction"]).strip()]
    lines += [str(item.get("question", "")).strip()]
    options = item.get("options") or []
    if options:
        lines += ["", "Options:"] + [f"{LETTERS[i]}. {o}" for i, o in enumerate(options)]
    targets = item.get("targets") or []
    if targets:
        lines += ["", "Targets:"] + [f"{i + 1}. {t}" for i, t in enumerate(targets)]
    media = item.get("media") or []
    if media:
        lines += [""] + [f"Image {i + 1}: {m.get('label') or m.get('role') or 'image'}" for i, m in enumerate(media)]
    lines += ["", str(item.get("response_format", "")).strip()]
    return "\n".join(lines).strip() + "\n"


def messages(item: dict[str, Any]) -> list[Message]:
    """The chat messages for one item (its images are attached by the client)."""
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": item_text(item)}]


_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_FENCE = re.compile(r"```[a-zA-Z]*\s*(.*?)\s*```", re.S)
_MARKER = re.compile(r"(?:final answer|answer)\s*(?:is|:|=|-)?\s*[:\-]?\s*(.+)", re.I)
_LEAD = re.compile(r"^\(?([A-Za-z])[\).:]\s")


def candidates(reply: str) -> list[str]:
    """Readings of a reply, most literal first: the whole reply, the text after its last
    'answer' marker, its last and first lines, and a leading option letter ('B. the mug')."""
    text = _THINK.sub("", reply or "")
    fenced = _FENCE.findall(text)
    if fenced:
        text = fenced[-1]
    text = text.replace("**", "").replace("__", "").strip()
    out = [text]
    markers = _MARKER.findall(text)
    if markers:
        out.append(markers[-1].strip())
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if len(lines) > 1:
        out += [lines[-1], lines[0]]
    for c in list(out):
        lead = _LEAD.match(c)
        if lead:
            out.append(lead.group(1))
        out.append(c.rstrip(".!").strip())
    seen: list[str] = []
    for c in out:
        if c and c not in seen:
            seen.append(c)
    return seen or [""]


def read_reply(reply: str, parse: Callable[[str], Any]) -> tuple[str | None, Any]:
    """(the reading the scorer parsed, what it parsed to); (None, None) when no reading parses."""
    for c in candidates(reply):
        try:
            parsed = parse(c)
        except Exception:  # a scorer that cannot read this reading treats it as invalid
            parsed = None
        if parsed is not None:
            return c, parsed
    return None, None
