"""What ``t9k-jobs`` loads before it runs a verb, kept to what that verb needs (issue 35).

A command line is answered in a fresh interpreter each time, so its start-up is paid on every
``get`` and ``validate``: ``kubectl version --client`` costs about 40 ms of CPU here, and
``t9k-jobs`` is measured against it (``benchmarks/cli_latency.py``, docs/benchmarks.md). Two
things here keep typer from doing work the verb does not need:

* :func:`command_for` hands click a command group holding only the verb on the command line, so the
  parameters of the other fifteen verbs are never converted (typer converts every registered
  command when it builds the group); ``t9k-jobs --help``, an unknown verb and no verb at all get
  the whole group, as before.
* :func:`light_rich_help` lets typer's help and usage errors (``typer.rich_utils``) load without
  ``rich.markdown`` (markdown-it) and ``rich.traceback`` (pygments): that module imports both at
  its top, but uses Markdown only in the ``markdown`` markup mode and Traceback only for pretty
  exceptions, neither of which t9k-jobs turns on. Each name stands in for its class and loads it
  on first use, so nothing changes if typer does use one.

* :func:`quick_values` spares pydantic where typer would use it for nothing: typer 0.29 coerces
  every value of the verb's options, defaults included, through a pydantic ``TypeAdapter`` it
  builds on first use (importing pydantic costs ``version`` and ``get`` more than the rest of
  their work). A value of a plain kind that needs no conversion beyond the obvious (a ``str``
  for ``str``, ``"8"`` for an ``int`` within its bounds, an Enum's exact value, a path with no
  checks asked for) is taken as typer would take it; anything else (a bad value above all, so
  that its message is typer's own) goes to typer's coercion.

Nothing here changes what a command prints or its exit code (tests/cli/test_startup.py).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import enum
import os
import pathlib
import sys
import types
from typing import Any

#: typer.rich_utils' module-level imports that t9k-jobs' help never uses: module -> class names.
_UNUSED_AT_HELP = {"rich.markdown": ("Markdown",), "rich.traceback": ("Traceback",)}


class _Later(type):
    """The class of a stand-in for a class of another module, loaded on first use (a call or an
    attribute): ``Markdown(...)`` and ``Traceback.from_exception(...)`` work as the real ones."""

    def _real(cls) -> Any:
        module, name = cls.__dict__["_where"]
        return getattr(importlib.import_module(module), name)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls._real()(*args, **kwargs)

    def __getattr__(cls, name: str) -> Any:
        return getattr(cls._real(), name)


class _RichUtilsFinder(importlib.abc.MetaPathFinder):
    """Loads ``typer.rich_utils`` with stand-ins for :data:`_UNUSED_AT_HELP` (see the module doc)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "typer.rich_utils":
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _StandInLoader(spec.loader)
        return spec


class _StandInLoader(importlib.abc.Loader):
    def __init__(self, real: Any) -> None:
        self.real = real

    def create_module(self, spec: Any) -> Any:
        return self.real.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        placed = []
        for name, classes in _UNUSED_AT_HELP.items():
            if name in sys.modules:
                continue
            stub = types.ModuleType(name)
            for cls in classes:
                setattr(stub, cls, _Later(cls, (), {"_where": (name, cls)}))
            sys.modules[name] = stub
            placed.append((name, stub))
        try:
            self.real.exec_module(module)
        finally:
            # Only typer.rich_utils holds the stand-ins: a later `import rich.markdown` is the real one.
            for name, stub in placed:
                if sys.modules.get(name) is stub:
                    del sys.modules[name]


def light_rich_help() -> None:
    """Make a later import of ``typer.rich_utils`` (help, usage errors) skip markdown-it and
    pygments (see the module doc). Idempotent; nothing changes once it was imported."""
    if "typer.rich_utils" in sys.modules or any(isinstance(f, _RichUtilsFinder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _RichUtilsFinder())


def command_name(info: Any) -> str:
    """The name typer gives a registered command (``typer.models.CommandInfo``): its own, else its
    function's name with ``_`` as ``-``."""
    return info.name or info.callback.__name__.lower().replace("_", "-")


def command_for(app: Any, argv: list[str]) -> Any:
    """The click command that runs ``argv`` (the arguments after the program name) with ``app``
    (a ``typer.Typer``): a group holding only the verb ``argv`` starts with when ``app`` has that
    verb, else the whole of ``app`` (``--help``, no verb, an unknown one: every verb, for the list
    and the suggestions: ``app`` itself). Either is called as ``command_for(app, argv)()``."""
    import typer.main

    wanted = [c for c in app.registered_commands if argv and command_name(c) == argv[0]]
    if len(wanted) != 1 or app.registered_groups or app.registered_callback:
        return app
    one = object.__new__(type(app))
    one.__dict__.update(app.__dict__)
    one.registered_commands = wanted
    # A group even with one command (typer would make a lone command the program itself).
    return quick_values(typer.main.get_group(one))


def quick_values(command: Any) -> Any:
    """Give each option and argument of ``command`` (a click command typer made, and each command
    of a group) the coercion of :class:`_QuickValues`; returns ``command``."""
    for sub in getattr(command, "commands", {}).values():
        quick_values(sub)
    for param in getattr(command, "params", ()):
        _quick_param(param)
    made = getattr(command, "get_help_option", None)
    if made is not None:  # --help is made when first asked for

        def get_help_option(ctx: Any) -> Any:
            return _quick_param(made(ctx))

        command.get_help_option = get_help_option
    return command


def _quick_param(param: Any) -> Any:
    if getattr(param, "_runtime_param", False) is None and hasattr(param, "type_descriptor"):
        param._runtime_param = _QuickValues(param.type_descriptor)
    return param


class _QuickValues:
    """One parameter's coercion: the obvious values here, the rest by typer's own (built when
    first needed), with typer's result and messages (see the module doc)."""

    def __init__(self, descriptor: Any) -> None:
        self.descriptor = descriptor
        self._typer: Any = None

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        multi = param.multiple or param.nargs == -1
        if value is None:
            return () if multi else None
        quick = self._quick(value, multi)
        if quick is not _NOT_QUICK:
            return quick
        if self._typer is None:
            from typer._coercion import build_runtime_param

            self._typer = build_runtime_param(self.descriptor)
        return self._typer.coerce(value, param=param, ctx=ctx)

    def _quick(self, value: Any, multi: bool) -> Any:
        d = self.descriptor
        info = d.parameter_info
        kind = d.annotation
        if d.file_annotation is not None or getattr(info, "parser", None) is not None:
            return _NOT_QUICK
        if multi:
            if str(kind) == "list[str]" and isinstance(value, (tuple, list)) and all(type(v) is str for v in value):
                return list(value)
            return _NOT_QUICK
        if kind is bool:
            return value if isinstance(value, bool) else _NOT_QUICK
        if kind is str:
            return value if type(value) is str else _NOT_QUICK
        if kind is int:
            number = value if type(value) is int else _decimal(value)
            if number is None or getattr(info, "clamp", False):
                return _NOT_QUICK
            if (info.min is not None and number < info.min) or (info.max is not None and number > info.max):
                return _NOT_QUICK
            return number
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            if not info.case_sensitive:
                return _NOT_QUICK
            if isinstance(value, kind):
                return value
            hits = [m for m in kind if type(value) is str and str(m.value) == value]
            return hits[0] if len(hits) == 1 else _NOT_QUICK
        if kind is pathlib.Path:
            return _path(value, info)
        return _NOT_QUICK


_NOT_QUICK = object()


def _decimal(value: Any) -> int | None:
    """``value`` as an int when it is a plain decimal string (ASCII digits, at most 18), else None."""
    if type(value) is str and 0 < len(value) <= 18 and value.isascii() and value.isdigit():
        return int(value)
    return None


def _path(value: Any, info: Any) -> Any:
    """A ``Path`` option given as a string, when no check but readability was asked for (typer's
    defaults) and the path is readable or absent; else :data:`_NOT_QUICK`."""
    if isinstance(value, pathlib.Path):
        raw: Any = value
    elif type(value) is str:
        raw = value
    else:
        return _NOT_QUICK
    if (
        info.exists
        or info.resolve_path
        or info.writable
        or not info.file_okay
        or not info.dir_okay
        or info.allow_dash
        or getattr(info, "path_type", None) is not None
    ):
        return _NOT_QUICK
    try:
        os.stat(raw)
    except (OSError, ValueError):
        return pathlib.Path(raw)
    if info.readable and not os.access(raw, os.R_OK):
        return _NOT_QUICK
    return pathlib.Path(raw)
