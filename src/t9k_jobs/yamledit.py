"""Set one field of a YAML or JSON manifest in its text, keeping everything else as written.

``pause``, ``resume`` and ``scale`` of a local run edit the manifest the run watches, as a person
would: comments, order, quoting and layout stay; only the value changes, or the missing keys are
added in the style around them (block YAML: new lines indented like their siblings; flow
mappings and JSON: ``"key": value`` inside the braces). The edit is checked by reading the result
back: it must equal the old document with that one field set.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import yaml


class EditError(ValueError):
    """The field cannot be set in this text without rewriting it; ``str()`` says why (one line)."""


def _scalar(value: Any) -> str:
    return json.dumps(value)  # true/false, numbers, "strings": the same in YAML and JSON


def _find(mapping: yaml.MappingNode, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    for k, v in mapping.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            return k, v
    return None


def _nest(keys: list[str], value: Any, flow: bool, indent: int) -> str:
    """``keys`` down to ``value`` as flow (``"a": {"b": 1}``) or block text (first line unindented,
    the next ones at ``indent + 2`` per level, every line ending with a newline)."""
    if flow:
        text = _scalar(value)
        for key in reversed(keys[1:]):
            text = "{" + f"{json.dumps(key)}: {text}" + "}"
        return f"{json.dumps(keys[0])}: {text}"
    lines = []
    for depth, key in enumerate(keys):
        pad = " " * (indent + 2 * depth) if depth else ""
        tail = f" {_scalar(value)}" if depth == len(keys) - 1 else ""
        lines.append(f"{pad}{key}:{tail}\n")
    return "".join(lines)


def set_field(text: str, path: list[str], value: Any) -> str:
    """``text`` (one YAML or JSON document whose root is a mapping) with ``path`` (mapping keys,
    e.g. ``["spec", "runMode", "pause", "enabled"]``) set to ``value`` (a bool, number or string).

    Missing mappings on the way are added; an existing value is replaced in place. Raises
    :class:`EditError` when the text cannot be edited that way (anchors and aliases, a value on
    the way that is not a mapping, several documents) or the result would read differently."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        before = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise EditError(f"cannot read it as YAML: {exc}".splitlines()[0]) from None
    if not isinstance(root, yaml.MappingNode) or not isinstance(before, dict):
        raise EditError("its root is not a mapping")
    if "&" in text and "*" in text:
        # An alias would make one edit change several places: leave such files to their author.
        for node in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(node, yaml.AliasEvent):
                raise EditError("it uses YAML aliases")
    node: yaml.Node = root
    for depth, key in enumerate(path):
        last = depth == len(path) - 1
        if not isinstance(node, yaml.MappingNode):
            raise EditError(f"{'.'.join(path[:depth])} is not a mapping")
        found = _find(node, key)
        if found is not None:
            child = found[1]
            if last:
                if not isinstance(child, yaml.ScalarNode) or child.start_mark.index == child.end_mark.index:
                    raise EditError(f"{'.'.join(path)} is not a plain value")
                new = text[: child.start_mark.index] + _scalar(value) + text[child.end_mark.index :]
                return _checked(new, before, path, value)
            if isinstance(child, yaml.ScalarNode) and child.value in ("", "~", "null") and child.tag.endswith(":null"):
                if child.start_mark.index == child.end_mark.index:  # `key:` with nothing after it
                    pos = found[0].end_mark.index
                    rest = text[pos:]
                    colon = rest.index(":") + 1
                    insert = " {" + _nest(path[depth + 1 :], value, True, 0) + "}"
                    new = text[: pos + colon] + insert + text[pos + colon :]
                else:
                    insert = "{" + _nest(path[depth + 1 :], value, True, 0) + "}"
                    new = text[: child.start_mark.index] + insert + text[child.end_mark.index :]
                return _checked(new, before, path, value)
            node = child
            continue
        rest_keys = path[depth:]
        if node.flow_style:
            if not node.value:
                inner = "{" + _nest(rest_keys, value, True, 0) + "}"
                new = text[: node.start_mark.index] + inner + text[node.end_mark.index :]
            else:
                at = node.value[0][0].start_mark.index
                new = text[:at] + _nest(rest_keys, value, True, 0) + ", " + text[at:]
            return _checked(new, before, path, value)
        if not node.value:
            raise EditError(f"{'.'.join(path[:depth]) or 'the document'} is an empty mapping")
        first = node.value[0][0]
        column = first.start_mark.column
        at = first.start_mark.index
        new = text[:at] + _nest(rest_keys, value, False, column) + " " * column + text[at:]
        return _checked(new, before, path, value)
    raise EditError("an empty path")  # pragma: no cover - path is never empty


def _checked(new: str, before: dict[str, Any], path: list[str], value: Any) -> str:
    expected = copy.deepcopy(before)
    here = expected
    for key in path[:-1]:
        if not isinstance(here.get(key), dict):
            here[key] = {}
        here = here[key]
    here[path[-1]] = value
    try:
        after = yaml.safe_load(new)
    except yaml.YAMLError:
        after = None
    if after != expected:
        raise EditError(f"setting {'.'.join(path)} in place would change more than that field")
    return new


__all__ = ["EditError", "set_field"]
