"""What torchrun runs for a PyTorchTrainingJob replica: the script, its arguments and the
environment that carries the python options torchrun cannot pass (reference §3.4).

With ``torchrunConfig`` a replica's training container runs ``torchrun <flags> <script> <args>``.
torchrun (``torch/distributed/run.py``) starts every worker process as ``python -u <script>``
(``python -u -m <module>`` with ``-m``; the program itself with ``--no-python``) and reads every
option before the script as its own, so ``torchrun ... -u train.py`` exits 2 ("unrecognized
arguments: -u"). So the script is found as the container would have run it, and the python
options before it are carried over:

- ``-u`` is dropped: torchrun runs python with ``-u`` itself; ``-q`` and ``-R`` change nothing in
  a script (an interactive banner, hash randomisation that is on anyway);
- ``-O``/``-OO``, ``-B``, ``-d``, ``-v``, ``-s``, ``-P``, ``-W arg`` and the ``-X`` options that
  have one become their environment variable (``PYTHONOPTIMIZE``, ``PYTHONDONTWRITEBYTECODE``,
  ``PYTHONWARNINGS``, ``PYTHONDEVMODE``...: the python documentation's "Command line and
  environment"); a variable the container sets itself keeps its value;
- with any other option (``-c code``, ``-E``, ``-I``, ``-S``, ``-X`` without a variable...), or
  with ``--no-python`` in ``extraOptions``, torchrun runs the python command as written, as a
  program (``torchrun <flags> --no-python python -c <code>``): every worker runs what the
  container would have run.

Refused: nothing to run (``python`` alone), a script that is torchrun itself (t9k-jobs starts
torchrun), a shell (torchrun would run it with python) unless ``extraOptions`` has
``--no-python``, an option where the script should be, and ``-W``, ``-X`` or ``-m`` without its
value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

#: Single-letter python options carried as an environment variable (repeated: the count).
_FLAG_ENV = {
    "O": "PYTHONOPTIMIZE",
    "B": "PYTHONDONTWRITEBYTECODE",
    "d": "PYTHONDEBUG",
    "v": "PYTHONVERBOSE",
    "s": "PYTHONNOUSERSITE",
    "P": "PYTHONSAFEPATH",
}
#: Single-letter python options that change nothing under torchrun: ``-u`` (torchrun runs python
#: with it), ``-q`` (the interactive banner), ``-R`` (hash randomisation, on anyway).
_FLAG_NOOP = frozenset("uqR")
#: ``-X`` options with an environment variable, and the value a bare ``-X name`` gives it.
_X_ENV = {
    "dev": ("PYTHONDEVMODE", "1"),
    "utf8": ("PYTHONUTF8", "1"),
    "faulthandler": ("PYTHONFAULTHANDLER", "1"),
    "tracemalloc": ("PYTHONTRACEMALLOC", "1"),
    "importtime": ("PYTHONPROFILEIMPORTTIME", "1"),
    "warn_default_encoding": ("PYTHONWARNDEFAULTENCODING", "1"),
    "no_debug_ranges": ("PYTHONNODEBUGRANGES", "1"),
    "int_max_str_digits": ("PYTHONINTMAXSTRDIGITS", None),
    "pycache_prefix": ("PYTHONPYCACHEPREFIX", None),
}
#: torchrun's own options that run the script as a program, not with python.
NO_PYTHON = ("--no-python", "--no_python")
#: The training container of a PyTorchTrainingJob replica: the first of these names, else the first container.
PYTORCH_CONTAINERS = ("pytorch", "python")
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "busybox", "env"})
_PYTHON = re.compile(r"python(\d+(\.\d+)*)?")


def is_python(program: str) -> bool:
    """Whether ``program`` (a command's first word) is a Python interpreter: ``python``,
    ``python3``, ``/opt/conda/bin/python3.11`` (not ``python-config`` or a script)."""
    return bool(_PYTHON.fullmatch(os.path.basename(program.strip())))


class TorchrunError(ValueError):
    """A command that torchrun cannot run; ``field`` is ``command`` or ``args``, ``index`` the
    item the problem is at (``None``: the field as a whole)."""

    def __init__(self, field_: str, index: int | None, message: str) -> None:
        self.field = field_
        self.index = index
        self.message = message
        super().__init__(message)

    @property
    def path(self) -> str:
        return self.field if self.index is None else f"{self.field}[{self.index}]"


@dataclass(frozen=True)
class TorchrunScript:
    """What follows torchrun's flags: ``argv`` (the script or ``-m module``, then its
    arguments; with ``no_python``, a program and its arguments, run as ``--no-python``), ``env``
    (python options as environment variables, in the order given), where the script came from
    (``source``: ``command`` or ``args``) and whether a command that does not run python was
    dropped (``replaced``: T9k, "with torchrunConfig the command no longer takes effect")."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    source: str = "command"
    replaced: bool = False
    no_python: bool = False

    def torchrun_args(self, extra_options: list[str] | tuple[str, ...] = ()) -> list[str]:
        """The arguments after torchrun's flags and ``extra_options``: ``--no-python`` when the
        argv is a program (and ``extra_options`` do not say it already), then the argv."""
        flag = ["--no-python"] if self.no_python and not any(o.strip() in NO_PYTHON for o in extra_options) else []
        return flag + self.argv


class _AsWritten(Exception):
    """A python option torchrun cannot pass: the command is run as written, as a program."""


def torchrun_script(command: list[str], args: list[str], extra_options: list[str] | tuple[str, ...] = ()) -> TorchrunScript:
    """The script torchrun runs for a container with ``command`` and ``args``.

    A ``command`` that starts with python gives its options and the rest of itself followed by
    ``args``, as the container would have run them (``[python, -u, train.py]`` with ``[--lr,
    "0.1"]`` gives ``train.py --lr 0.1``; ``[python, -c, code]`` gives the program ``python -c
    code``, run with ``--no-python``); otherwise ``args`` (python and its options read the same
    way when ``args`` starts with python), or with no ``args`` the ``command`` itself.
    ``extra_options`` are torchrunConfig's (``--no-python``: the script is a program, run as
    written). Raises :class:`TorchrunError` for what torchrun cannot run (see the module docstring).
    """
    no_python = any(o.strip() in NO_PYTHON for o in extra_options)
    if command and is_python(command[0]):
        # Item i of command[1:] + args is command[i + 1], or args[i - (len(command) - 1)].
        def at(i: int) -> tuple[str, int]:
            return ("command", i + 1) if i < len(command) - 1 else ("args", i - (len(command) - 1))

        return _python(command[0], command[1:] + args, at, "command", False, no_python, ("command", len(command) - 1))
    if args and is_python(args[0]):
        return _python(args[0], args[1:], lambda i: ("args", i + 1), "args", bool(command), no_python, ("args", 0))
    if args:
        return _checked(TorchrunScript(list(args), {}, "args", bool(command), no_python), ("args", 0))
    return _checked(TorchrunScript(list(command), {}, "command", False, no_python), ("command", 0))


def _python(
    program: str,
    items: list[str],
    at: Callable[[int], tuple[str, int]],
    source: str,
    replaced: bool,
    no_python: bool,
    interpreter: tuple[str, int],
) -> TorchrunScript:
    """A python command (``program`` and its ``items``): its script after the options, or the
    command as written (a program) when an option cannot be carried or ``no_python``."""
    if not items:
        raise TorchrunError(
            *interpreter,
            "nothing for torchrun to run: give the training script (and its arguments) after python, or in args",
        )
    if not no_python:
        try:
            argv, env, start = _python_options(items, at)
        except _AsWritten:
            pass
        else:
            where = at(start) if argv else interpreter
            return _checked(TorchrunScript(argv, env, where[0], replaced), where)
    script = TorchrunScript([program, *items], {}, source, replaced, no_python=True)
    _check_module(items, at)
    return script


def _python_options(items: list[str], at: Callable[[int], tuple[str, int]]) -> tuple[list[str], dict[str, str], int]:
    """The python options at the head of ``items``: ``(script argv, env, index of the script)``.
    ``at(i)`` names the field and index of item ``i`` for an error. Raises :class:`_AsWritten`
    for an option no variable carries."""
    env: dict[str, str] = {}
    counts: dict[str, int] = {}
    warnings: list[str] = []

    def done(argv: list[str], start: int) -> tuple[list[str], dict[str, str], int]:
        out = {var: str(n) for var, n in counts.items()}
        if warnings:
            out["PYTHONWARNINGS"] = ",".join(warnings)
        out.update(env)
        return argv, out, start

    i = 0
    while i < len(items):
        item = items[i]
        if not item.startswith("-") or item == "-":
            if item == "-":
                raise _AsWritten
            return done(items[i:], i)
        if item.startswith("--"):
            raise _AsWritten
        first = i
        cluster = item[1:]
        j = 0
        while j < len(cluster):
            ch = cluster[j]
            if ch in "WXm":
                value = cluster[j + 1 :]
                if not value:
                    if i + 1 >= len(items):
                        raise TorchrunError(*at(i), f"python's -{ch} needs a value after it")
                    i += 1
                    value = items[i]
                if ch == "m":
                    return done(["-m", value, *items[i + 1 :]], first)
                if ch == "W":
                    warnings.append(value)
                else:
                    name, eq, given = value.partition("=")
                    if name not in _X_ENV:
                        raise _AsWritten
                    var, default = _X_ENV[name]
                    if not eq and default is None:
                        raise TorchrunError(*at(i), f"python's -X {name} needs =value")
                    env[var] = given if eq else str(default)
                break
            if ch in _FLAG_ENV:
                counts[_FLAG_ENV[ch]] = counts.get(_FLAG_ENV[ch], 0) + 1
            elif ch not in _FLAG_NOOP:
                raise _AsWritten
            j += 1
        i += 1
    return done([], len(items))


def _check_module(items: list[str], at: Callable[[int], tuple[str, int]]) -> None:
    """Refuse ``python ... -m torch.distributed.run`` (torchrun itself) in a command run as written."""
    for i, item in enumerate(items):
        if item in ("-c", "-") or not item.startswith("-"):
            return
        if item == "-m" and i + 1 < len(items) and items[i + 1] in TORCHRUN_MODULES:
            raise TorchrunError(*at(i), _TORCHRUN_ITSELF)


TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
_TORCHRUN_ITSELF = (
    "runs torchrun, and with torchrunConfig t9k-jobs starts torchrun itself: give the training script and its "
    "arguments (in args, or command: [python, train.py, ...]) and torchrun's options in torchrunConfig"
)


def _checked(script: TorchrunScript, where: tuple[str, int]) -> TorchrunScript:
    """Refuse a script torchrun cannot run; ``where`` is the field and index of ``argv[0]``."""
    argv = script.argv
    if not argv:
        raise TorchrunError(
            where[0], where[1],
            "nothing for torchrun to run: give the training script (and its arguments) after python, or in args",
        )  # fmt: skip
    first = argv[0].strip()
    if first.startswith("-") and first != "-m":
        raise TorchrunError(
            *where,
            f"{first!r} is where the training script goes, and torchrun would read it as its own option; "
            "torchrun's options go in torchrunConfig.extraOptions, the script and its arguments in args",
        )
    program = os.path.basename(first)
    module = argv[1].strip() if first == "-m" and len(argv) > 1 else None
    if program == "torchrun" or module in TORCHRUN_MODULES:
        raise TorchrunError(*where, _TORCHRUN_ITSELF)
    if not script.no_python and module is None and program in SHELLS:
        raise TorchrunError(
            *where,
            f"{first!r} would be the training script, and torchrun runs it with python; give the python script (in "
            "args, or command: [python, train.py, ...]), or add --no-python to torchrunConfig.extraOptions to run "
            "a program",
        )
    return script
