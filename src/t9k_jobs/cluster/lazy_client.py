"""kubernetes_asyncio without importing all of it (issue 35: the operator's idle memory, the CLI's start).

``import kubernetes_asyncio`` runs the package's ``__init__``, which imports every generated API
class and every model of the Kubernetes API: about 1,250 modules, 1.3 s of CPU and 95 MiB of
memory on this machine, for a client that uses the library's kubeconfig loading, its TLS and
token handling, one ``ApiClient`` and the Lease lock of its leader election (a handful of
modules). :func:`install` puts lazy stand-ins for the four package ``__init__`` modules that do
this (``kubernetes_asyncio``, ``.client``, ``.client.api``, ``.client.models``) in
``sys.modules``: each is the real package (its ``__path__``, so every submodule imports as
usual) whose names are looked up in the real ``__init__``'s own ``from M import N`` lines and
imported on first use. ``client.V1Lease`` imports ``v1_lease`` and nothing else;
``from kubernetes_asyncio.client.models import *`` and ``dir()`` see every name.

It is installed when :mod:`t9k_jobs.cluster` is imported, unless kubernetes_asyncio was imported
before (then nothing changes). docs/decisions.md, "kubernetes_asyncio, imported by the name".
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import types
from pathlib import Path
from typing import Any

#: The packages whose ``__init__`` imports what the client rarely needs.
LAZY_PACKAGES = (
    "kubernetes_asyncio",
    "kubernetes_asyncio.client",
    "kubernetes_asyncio.client.api",
    "kubernetes_asyncio.client.models",
)
_FROM = re.compile(r"^from\s+([\w.]+)\s+import\s+(\w+)(?:\s+as\s+(\w+))?\s*(?:#.*)?$", re.M)
_IMPORT_AS = re.compile(r"^import\s+([\w.]+)\s+as\s+(\w+)\s*(?:#.*)?$", re.M)
_CONSTANT = re.compile(r"^(__\w+__)\s*=\s*(\"[^\"\n]*\"|'[^'\n]*')\s*$", re.M)


class LazyPackage(types.ModuleType):
    """A package whose names (``_lazy_names``: name -> (module, attribute or None for the module
    itself)) are imported when first read, then kept."""

    _lazy_names: dict[str, tuple[str, str | None]]

    def __getattr__(self, name: str) -> Any:
        where = self.__dict__.get("_lazy_names", {}).get(name)
        if where is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        module, attr = where
        value = importlib.import_module(module)
        if attr is not None:
            value = getattr(value, attr)
        setattr(self, name, value)
        return value

    def __dir__(self) -> list[str]:
        return sorted(set(self.__dict__) | set(self.__dict__.get("_lazy_names", {})))


def _lazy(name: str) -> LazyPackage | None:
    """The stand-in of package ``name`` (see the module doc), or None when it cannot be found or
    its ``__init__`` holds more than imports and string constants."""
    spec = importlib.util.find_spec(name)
    if spec is None or not (spec.origin or "").endswith(".py") or not spec.submodule_search_locations:
        return None  # not installed, or installed without its sources: the real package then
    try:
        source = Path(spec.origin).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if not _only_imports(source):
        return None
    names: dict[str, tuple[str, str | None]] = {}
    for module, attr, alias in _FROM.findall(source):
        names[alias or attr] = (module, attr)
    for module, alias in _IMPORT_AS.findall(source):
        names[alias] = (module, None)
    package = LazyPackage(name)
    package.__file__ = spec.origin
    package.__path__ = list(spec.submodule_search_locations)
    package.__spec__ = spec
    package.__loader__ = spec.loader
    package.__package__ = name
    for key, value in _CONSTANT.findall(source):
        setattr(package, key, value[1:-1])
    package._lazy_names = names
    package.__all__ = sorted(n for n in names if not n.startswith("_"))
    return package


def _only_imports(source: str) -> bool:
    """Whether ``source`` (a package ``__init__``) holds nothing but a docstring, comments,
    ``from M import N [as A]`` and ``import M as A`` lines, string constants and an ``__all__``
    list: then running it does nothing the stand-in's names do not do on first use."""
    body = re.sub(r'^(""".*?"""|\'\'\'.*?\'\'\')', "", source, count=1, flags=re.S | re.M)  # the docstring
    body = re.sub(r"^__all__\s*=\s*\[[^\]]*\]\s*$", "", body, flags=re.M)
    for line in body.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not (_FROM.match(stripped) or _IMPORT_AS.match(stripped) or _CONSTANT.match(stripped)):
            return False
    return True


def install() -> bool:
    """Put the stand-ins of :data:`LAZY_PACKAGES` in ``sys.modules`` (idempotent). False, and
    nothing changed, when kubernetes_asyncio was imported already or is not installed."""
    first = sys.modules.get(LAZY_PACKAGES[0])
    if isinstance(first, LazyPackage):
        return True
    if first is not None:
        return False
    made = []
    for name in LAZY_PACKAGES:
        parent, _, child = name.rpartition(".")
        package = _lazy(name)
        if package is None:
            for done in reversed(made):
                sys.modules.pop(done, None)
            return False
        sys.modules[name] = package
        if parent:
            setattr(sys.modules[parent], child, package)
        made.append(name)
    return True
