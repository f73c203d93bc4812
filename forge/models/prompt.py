"""What is sent: chat messages with images as data URLs, the output instruction, the prompt hash,
and the parsing of a reply into its pydantic output type."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from pydantic import BaseModel, ValidationError

from forge.keys import bytes_digest, digest

Message = dict[str, Any]

IMAGE_TOKENS = 256  # a rough prompt-token estimate per image, for budgets checked before a call

_MAGIC = ((b"\x89PNG", "image/png"), (b"\xff\xd8", "image/jpeg"), (b"GIF8", "image/gif"), (b"RIFF", "image/webp"))


def image_part(data: bytes) -> dict[str, Any]:
    """One image as a chat content part (a base64 data URL)."""
    mime = next((m for magic, m in _MAGIC if data.startswith(magic)), "image/png")
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{base64.b64encode(data).decode()}"}}


def with_images(messages: Sequence[Message], images: Sequence[bytes]) -> list[Message]:
    """The messages with the images appended to the last user message."""
    out = [dict(m) for m in messages]
    if not images:
        return out
    last = max((i for i, m in enumerate(out) if m.get("role") == "user"), default=None)
    if last is None:
        out.append({"role": "user", "content": []})
        last = len(out) - 1
    content = out[last].get("content") or []
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    out[last]["content"] = parts + [image_part(img) for img in images]
    return out


@dataclass(frozen=True)
class Prompt:
    """One question to a role: its messages, images and output type, and its hash."""

    messages: tuple[Message, ...]
    images: tuple[bytes, ...] = ()
    output_model: type[BaseModel] | None = None
    hash: str = field(init=False)

    def __post_init__(self) -> None:
        # Images enter the hash by digest: hashing megabytes of base64 per call is wasted work.
        object.__setattr__(self, "hash", digest(list(self.messages), [bytes_digest(i) for i in self.images],
                                                output_schema(self.output_model)))

    def chat(self) -> list[Message]:
        return with_images(self.messages, self.images)


def estimate_tokens(messages: Sequence[Message]) -> int:
    """A rough prompt size (4 characters a token), for budgets checked before a call."""
    total = 0
    for m in messages:
        content = m.get("content")
        parts = [content] if isinstance(content, str) else content or []
        for p in parts:
            if isinstance(p, str):
                total += len(p) // 4
            elif isinstance(p, dict):
                total += IMAGE_TOKENS if p.get("type") == "image_url" else len(p.get("text", "")) // 4
        total += 4
    return total


def output_schema(output_model: type[BaseModel] | None) -> dict[str, Any] | None:
    return output_model.model_json_schema() if output_model is not None else None


def response_format(output_model: type[BaseModel], mode: str) -> dict[str, Any]:
    schema = output_model.model_json_schema()
    if mode == "json_schema":
        name = re.sub(r"[^A-Za-z0-9_-]", "_", output_model.__name__)[:64]
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    # llama.cpp's servers read an optional "schema" here and constrain decoding to it.
    return {"type": "json_object", "schema": schema}


def instructed(messages: Sequence[Message], output_model: type[BaseModel]) -> list[Message]:
    """The messages with the output schema spelled out in the system message (for ``json_object``,
    where the server is not told the schema by the protocol)."""
    note = ("Reply with one JSON object and nothing else. It must follow this JSON Schema: "
            + json.dumps(output_model.model_json_schema(), separators=(",", ":")))
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system" and isinstance(out[0].get("content"), str):
        out[0]["content"] = f"{out[0]['content']}\n\n{note}"
    else:
        out.insert(0, {"role": "system", "content": note})
    return out


class InvalidOutput(ValueError):
    """A reply that is not JSON or does not fit its output type; the text goes back to the model."""


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S)


def parse_output(text: str, output_model: type[BaseModel]) -> BaseModel:
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text.strip()
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        raise InvalidOutput(f"the reply is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") \
            from None
    try:
        return output_model.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors())
        raise InvalidOutput(f"the JSON does not fit the schema of {output_model.__name__}: {problems}") from None


def feedback(reply: str, problem: InvalidOutput) -> list[Message]:
    """The follow-up turn that sends a validation error back to the model."""
    return [{"role": "assistant", "content": reply},
            {"role": "user", "content": f"That reply was rejected: {problem}. Reply again with only the corrected "
                                        "JSON object."}]
