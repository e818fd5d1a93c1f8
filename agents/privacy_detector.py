"""The optional model detector of personal data in prose (``privacy.detector``, docs/privacy.md).

Patterns (``kb.privacy``) find numbers with validators and well-formed addresses; no pattern finds
a name, a health fact, or an address or a birth date written in words. When ``kb.config.yaml``
names a model under ``privacy.detector`` (a local one is recommended: ``api_base`` pointing at
it), ingest asks it, through litellm, for values of the kinds set to ``mask`` among
``kb.privacy.MODEL_KINDS``. It is shown the text with every pattern finding already replaced by a
placeholder (``kb.intake.redact_personal``), so no value a pattern found is sent to it.

The reply must be one JSON object, ``{"findings": [{"kind": "person", "text": "Ana Souza"}]}``.
A finding of a kind not asked for, or whose text is not in what the model was shown word for
word, is dropped (it cannot be masked, and a model must not make values up). A reply that is not
such an object is answered once with what is wrong; a second bad reply stops the ingest with a
ModelError (exit 10) and nothing is added: the input is never stored unexamined.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator
from typing import Any, Protocol

from kb.config import ModelRole, Privacy
from kb.errors import ModelError
from kb.privacy import MODEL_KINDS, PLACEHOLDER_RE, Detector

from .llm import LiteLLMClient, ModelReply

CHUNK_CHARS = 6000  # text per request; a longer item is sent in pieces split at line ends
_DESCRIPTIONS = {
    "person": "a person's name (given name, family name or both), not a company, product or place",
    "health": "a health fact about a person: a condition, diagnosis, disability, medication, treatment or pregnancy",
    "address": "a postal or home address, also written in words or without a postcode",
    "dob": "a person's date of birth, also written in words",
}
SYSTEM = """You find personal data in text for a privacy filter. Report every value of these kinds:
{kinds}
Values already replaced by placeholders such as [PHONE-1] or [CARD-2] are not to be reported.
Copy each value exactly as it is written in the text (same characters, same spacing), only the
value itself. Answer with one JSON object and nothing else:
{{"findings": [{{"kind": "<one of: {names}>", "text": "<the value, copied>"}}]}}
Answer {{"findings": []}} when there is none."""


class _Client(Protocol):
    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> ModelReply: ...


def parse_findings(reply: str, shown: str, kinds: Collection[str]) -> list[tuple[str, str]]:
    """The (kind, value) pairs of a reply; ``ValueError`` saying what is wrong when it is not the
    JSON object asked for. Findings of other kinds, or not in ``shown`` verbatim, are dropped."""
    text = reply.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, re.DOTALL)
    if fenced:
        text = fenced.group(1)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(data, dict) or not isinstance(data.get("findings"), list):
        raise ValueError('not an object with a "findings" list')
    out: list[tuple[str, str]] = []
    for n, item in enumerate(data["findings"], 1):
        if not isinstance(item, dict) or not isinstance(item.get("kind"), str) or not isinstance(item.get("text"), str):
            raise ValueError(f'finding {n} is not an object with a "kind" and a "text" string')
        kind, value = item["kind"], item["text"].strip()
        if kind in kinds and len(value) >= 2 and value in shown and not PLACEHOLDER_RE.search(value):
            out.append((kind, value))
    return out


def chunks(text: str, size: int = CHUNK_CHARS) -> Iterator[str]:
    """``text`` in pieces of at most about ``size`` characters, split after a line end."""
    piece: list[str] = []
    length = 0
    for line in text.splitlines(keepends=True):
        if piece and length + len(line) > size:
            yield "".join(piece)
            piece, length = [], 0
        piece.append(line)
        length += len(line)
    if piece:
        yield "".join(piece)


class ModelDetector:
    """A ``kb.privacy.Detector`` backed by a model through litellm."""

    def __init__(self, settings: ModelRole, client: _Client | None = None) -> None:
        self.settings = settings
        self.client: _Client = client or LiteLLMClient(settings)

    def __call__(self, text: str, kinds: Collection[str]) -> list[tuple[str, str]]:
        asked = [k for k in MODEL_KINDS if k in kinds]
        if not asked or not text.strip():
            return []
        found: list[tuple[str, str]] = []
        for piece in chunks(text):
            found.extend(self._ask(piece, asked))
        return found

    def _ask(self, piece: str, kinds: list[str]) -> list[tuple[str, str]]:
        system = SYSTEM.format(kinds="\n".join(f"- {k}: {_DESCRIPTIONS[k]}" for k in kinds), names=", ".join(kinds))
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": piece}]
        problem = ""
        for _attempt in range(2):
            reply = self.client.complete(messages)
            try:
                return parse_findings(reply.content or "", piece, kinds)
            except ValueError as exc:
                problem = str(exc)
                messages = [
                    *messages,
                    {"role": "assistant", "content": reply.content or ""},
                    {"role": "user", "content": f"That reply is {problem}. Answer with the JSON object only, as asked."},
                ]
        raise ModelError(
            f"privacy detector {self.settings.model}: its reply is {problem}, twice; nothing was added",
            hint="check the model under privacy.detector in kb.config.yaml (or remove privacy.detector), then add again",
        )


def detector_for(privacy: Privacy) -> Detector | None:
    """The configured model detector, or None (the default: patterns only)."""
    if privacy.detector is None or not set(MODEL_KINDS) & privacy.kinds("mask"):
        return None
    return ModelDetector(privacy.detector)
