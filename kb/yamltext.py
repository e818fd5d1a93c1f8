"""Reading YAML that people and agents write (page headers, kb.config.yaml, memory case files)
without letting it stall or mislead kb: duplicate keys (of which YAML would silently keep the
last), aliases and explicit tags (``!!int``) are refused (kb never writes them, and an "alias bomb" of a
few hundred bytes expands to gigabytes when traversed), input size is bounded, deep nesting and
impossible values (``2025-13-40`` unquoted) become one clear error instead of a crash.

``load_yaml`` raises ``YamlProblem`` (with the line when known); each caller turns it into its
own error type (a FormatError for pages and case files, a ConfigError for the config).
"""

from __future__ import annotations

import re
from typing import Any

import yaml


class YamlProblem(Exception):
    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def _check_mapping(loader: yaml.constructor.SafeConstructor, node: yaml.MappingNode) -> None:
    seen: set[object] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, list | dict):
            raise YamlProblem("a mapping key must be a scalar", key_node.start_mark.line + 1)
        if key in seen:
            raise YamlProblem(f"duplicate key {key!r}: only one of them would count", key_node.start_mark.line + 1)
        seen.add(key)


class _NoAliasLoader(yaml.SafeLoader):
    """The reference: pure Python, refuses aliases and tags as it composes; every refusal and
    error message comes from it."""

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise YamlProblem(f"YAML aliases (*{event.anchor}) are not accepted; write the value out", event.start_mark.line + 1)
        event = self.peek_event()
        tag = getattr(event, "tag", None)
        if tag is not None:  # `!!int ` with no value crashes PyYAML's constructor; kb never writes tags
            raise YamlProblem(f"YAML tags ({tag}) are not accepted; write the value plainly or quote it", event.start_mark.line + 1)
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[object, object]:
        _check_mapping(self, node)
        return super().construct_mapping(node, deep=deep)


if yaml.__with_libyaml__:

    class _CLoader(yaml.CSafeLoader):
        """libyaml's parser and composer with the same constructor, used only on text that the
        pre-scan shows to hold no alias, anchor or tag and to nest at most ``C_DEPTH`` deep."""

        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[object, object]:
            _check_mapping(self, node)
            return super().construct_mapping(node, deep=deep)

    C_LOADER: type[yaml.constructor.SafeConstructor] | None = _CLoader
else:  # pragma: no cover - PyYAML built without libyaml
    C_LOADER = None

C_DEPTH = 50  # far below where the pure loader's recursion gives up, far above any header
_SUSPECT = re.compile(r"[&*!]")  # an anchor, an alias or a tag cannot be written without one of these
_NESTING = "[{-:?"  # every level of nesting needs one: a flow bracket, a sequence dash, a key's colon


def libyaml_may_load(text: str) -> bool:
    """True when libyaml may load ``text`` with the same result as the pure loader: printable,
    no alias, anchor or explicit tag, nesting at most ``C_DEPTH``; anything else (and any
    parse error) goes to the pure loader, which then gives today's result or message."""
    if C_LOADER is None or yaml.reader.Reader.NON_PRINTABLE.search(text):
        return False
    if not _SUSPECT.search(text) and sum(text.count(c) for c in _NESTING) < C_DEPTH:
        return True
    depth = 0
    try:
        for event in yaml.parse(text, Loader=C_LOADER):  # type: ignore[arg-type]
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                return False
            if getattr(event, "tag", None) is not None:
                return False
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > C_DEPTH:
                    return False
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        return False
    return True


def load_yaml(text: str, max_bytes: int) -> Any:
    """``text`` parsed with the safe loader, no aliases, at most ``max_bytes`` of UTF-8.

    libyaml does the work when the pre-scan allows it; the pure-Python loader otherwise, and on
    any error of the libyaml path, so that results, messages and lines are the pure loader's."""
    size = len(text.encode("utf-8", errors="replace"))
    if size > max_bytes:
        raise YamlProblem(f"YAML of {size:,} bytes is over the limit of {max_bytes:,}")
    if C_LOADER is not None and libyaml_may_load(text):
        try:
            return yaml.load(text, Loader=C_LOADER)  # type: ignore[arg-type]
        except (yaml.YAMLError, YamlProblem, ValueError, RecursionError):
            pass  # the pure loader below says what is wrong, in its words
    try:
        return yaml.load(text, Loader=_NoAliasLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "context_mark", None) or getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise YamlProblem(f"malformed YAML ({problem})", mark.line + 1 if mark is not None else None) from None
    except ValueError as exc:  # the timestamp constructor on impossible dates, e.g. 2025-13-40
        raise YamlProblem(f"impossible value ({exc}); quote it if it is text") from None
    except RecursionError:
        raise YamlProblem("YAML nested too deeply") from None
