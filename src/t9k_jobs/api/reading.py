"""Reading a manifest safely: bounded bytes, strict text, YAML or JSON without surprises.

A manifest may come from anyone, so reading it is bounded before anything is parsed:

- at most :data:`MAX_MANIFEST_BYTES` (3 MiB, the largest request body the Kubernetes API server
  accepts) are read, from a regular file or standard input (``-``); FIFOs, devices and
  directories are refused without blocking on them;
- the bytes must be UTF-8 text (a UTF-8 byte-order mark is dropped); UTF-16/32, other 8-bit
  encodings and binary data are refused with the offending position;
- JSON (the first character is ``{`` or ``[``) is read as JSON, tabs included; anything else as
  YAML 1.1 as Kubernetes' YAML reader does, with ``1e3``-style numbers read as floats (as there);
- nesting deeper than :data:`MAX_DEPTH` is refused while the text is scanned, before any
  structure is built; YAML aliases whose expansion (kubectl expands them before sending) would be
  larger than :data:`MAX_MANIFEST_BYTES` are refused; duplicate mapping keys are refused (the API
  server's strict decoding reports them too).

Every refusal is a :class:`ReadError` holding one line.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any, BinaryIO

import yaml

#: The largest manifest read, in bytes: the API server refuses request bodies over 3 MiB.
MAX_MANIFEST_BYTES = 3 * 1024 * 1024
#: The deepest nesting of mappings and sequences accepted (a pod template needs about 15).
MAX_DEPTH = 100

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # type: ignore[assignment]
# YAML 1.2 (and Kubernetes' reader) take 1e3 and 1E-3 as numbers; PyYAML's 1.1 rules want a dot.
_FLOAT_12 = re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")


class ReadError(ValueError):
    """A manifest that cannot be read; ``str()`` is one line (without the source's name)."""


class _StrictLoader(_Loader):  # type: ignore[misc, valid-type]
    """The safe loader, refusing duplicate keys (merge keys ``<<`` excepted)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base class reports it
                continue
            if first is not None:
                raise ReadError(
                    f"{_where(key_node)}duplicate key {_short(key)} (first at line {first.start_mark.line + 1}); "
                    "each key may appear once in a mapping"
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, list("-+0123456789"))


def read_source(source: str | Path, stdin: BinaryIO | None = None) -> bytes:
    """The bytes of ``source`` (a path, or ``-`` for standard input), at most 3 MiB.

    Raises :class:`ReadError` for a missing or unreadable file, one that is not a regular file
    (a FIFO or a device is never read from, so nothing blocks), or one over the limit.
    """
    if str(source) == "-":
        stream = stdin if stdin is not None else sys.stdin.buffer
        data = stream.read(MAX_MANIFEST_BYTES + 1)
        if len(data) > MAX_MANIFEST_BYTES:
            raise ReadError(_too_large())
        return data
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ReadError(f"cannot read the file: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            what = _file_type(mode)
            raise ReadError(f"is {what}, not a regular file; give a manifest file, or - to read standard input")
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_MANIFEST_BYTES:
            chunk = os.read(fd, MAX_MANIFEST_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_MANIFEST_BYTES:
            raise ReadError(_too_large())
        return b"".join(chunks)
    except OSError as exc:
        raise ReadError(f"cannot read the file: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def decode(data: bytes) -> str:
    """``data`` as text: UTF-8 only; raises :class:`ReadError` naming the encoding or the byte."""
    for bom, name in ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
                      (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16")):  # fmt: skip
        if data.startswith(bom):
            raise ReadError(f"is {name} text; save it as UTF-8")
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    nul = data.find(b"\0")
    if nul >= 0:
        raise ReadError(f"{_position(data, nul)}holds a NUL byte: binary data, not YAML or JSON text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        byte = data[exc.start]
        raise ReadError(
            f"{_position(data, exc.start)}byte 0x{byte:02x} is not UTF-8 (another encoding, such as Latin-1?); "
            "save the file as UTF-8"
        ) from None


def parse_documents(text: str) -> list[Any]:
    """The non-empty documents of ``text``: one JSON value, or every YAML document.

    Raises :class:`ReadError` for syntax errors (with line and column), nesting deeper than
    :data:`MAX_DEPTH`, alias expansion over :data:`MAX_MANIFEST_BYTES`, and duplicate keys.
    """
    if text.lstrip()[:1] in ("{", "["):
        return [_parse_json(text)]
    try:
        _check_depth(text)
        loader = _StrictLoader(text)
        try:
            docs = []
            while loader.check_node():
                node = loader.get_node()
                _check_expansion(node)
                docs.append(loader.construct_document(node))
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ReadError(f"{where}not valid YAML: {problem}") from None
    return [d for d in docs if d is not None]


def _parse_json(text: str) -> Any:
    depth = 0
    in_string = escaped = False
    for i, ch in enumerate(text):  # nesting is bounded before the (recursive) decoder runs
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
            if depth > MAX_DEPTH:
                raise ReadError(f"{_text_position(text, i)}nested deeper than {MAX_DEPTH} levels")
        elif ch in "}]":
            depth -= 1

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ReadError(f"duplicate key {_short(key)} in a JSON object; each key may appear once")
            out[key] = value
        return out

    def constant(name: str) -> Any:
        raise ReadError(f"{name} is not a JSON number")

    try:
        return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise ReadError(f"line {exc.lineno}, column {exc.colno}: not valid JSON: {exc.msg}") from None


def _check_depth(text: str) -> None:
    """Scan the YAML events (no structure is built) and refuse nesting over MAX_DEPTH.

    libyaml (PyYAML's C loader, 6.0.2 on) has a nesting limit of its own, far deeper than ours,
    which its scanner can reach while it looks ahead (``[[[[...``), before we see an event. Its
    refusal is then replayed, up to where libyaml stopped, with PyYAML's pure-Python parser, which
    has no limit and is not recursive: it reaches our limit first (one line in our words);
    otherwise libyaml's own error stands."""
    try:
        _scan_depth(text, _Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        if _Loader is yaml.SafeLoader or mark is None:
            raise
        try:
            _scan_depth(text[: mark.index + 1], yaml.SafeLoader)
        except yaml.YAMLError:
            pass  # the prefix ends mid-document: libyaml's error is the one to report
        raise


def _scan_depth(text: str, loader: type[yaml.SafeLoader]) -> None:
    depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise ReadError(f"{_where(event)}nested deeper than {MAX_DEPTH} levels")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a document whose aliases expand past MAX_MANIFEST_BYTES of JSON (an alias bomb)."""
    size: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in size:
            continue
        if isinstance(node, yaml.ScalarNode):
            size[id(node)] = len(node.value) + 3
            continue
        children = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else node.value
        if not children_done:
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in size)
            continue
        total = 2 + sum(size.get(id(c), 0) for c in children)
        if total > MAX_MANIFEST_BYTES:
            raise ReadError(
                f"{_where(node)}YAML aliases expand it to more than 3 MiB "
                "(the largest request the API server accepts)"
            )
        size[id(node)] = total


def _where(item: Any) -> str:
    mark = getattr(item, "start_mark", None)
    return f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""


def _position(data: bytes, offset: int) -> str:
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"line {line}, column {column}: "


def _text_position(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"line {line}, column {column}: "


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _too_large() -> str:
    return f"is larger than 3 MiB ({MAX_MANIFEST_BYTES} bytes), the largest request the API server accepts"


def _file_type(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"
