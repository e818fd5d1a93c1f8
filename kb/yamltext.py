"""Reading YAML that people and agents write (page headers, kb.config.yaml, memory case files)
without letting it stall or mislead kb: duplicate keys (of which YAML would silently keep the
last), aliases and explicit tags (``!!int``) are refused (kb never writes them, and an "alias bomb" of a
few hundred bytes expands to gigabytes when traversed), input size is bounded, deep nesting and
impossible values (``2025-13-40`` unquoted) become one clear error instead of a crash.

``load_yaml`` raises ``YamlProblem`` (with the line when known); each caller turns it into its
own error type (a FormatError for pages and case files, a ConfigError for the config).
"""

from __future__ import annotations

from typing import Any

import yaml


class YamlProblem(Exception):
    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


class _NoAliasLoader(yaml.SafeLoader):
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
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, list | dict):
                raise YamlProblem("a mapping key must be a scalar", key_node.start_mark.line + 1)
            if key in seen:
                raise YamlProblem(f"duplicate key {key!r}: only one of them would count", key_node.start_mark.line + 1)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str, max_bytes: int) -> Any:
    """``text`` parsed with the safe loader, no aliases, at most ``max_bytes`` of UTF-8."""
    size = len(text.encode("utf-8", errors="replace"))
    if size > max_bytes:
        raise YamlProblem(f"YAML of {size:,} bytes is over the limit of {max_bytes:,}")
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
