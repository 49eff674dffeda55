"""What torchrun runs for a PyTorchTrainingJob replica: the script, its arguments and the
environment that carries the python options torchrun cannot pass (reference §3.4).

With ``torchrunConfig`` a replica's training container runs ``torchrun <flags> <script> <args>``.
torchrun (``torch/distributed/run.py``) starts every worker process as ``python -u <script>``
(``python -u -m <module>`` with ``-m``; the program itself with ``--no-python``) and reads every
option before the script as its own, so ``torchrun ... -u train.py`` exits 2 ("unrecognized
arguments: -u"). So the script is found as the container would have run it, and the python
options before it are carried over where an equivalent exists:

- ``-u`` is dropped: torchrun runs python with ``-u`` itself; ``-q`` and ``-R`` change nothing in
  a script (an interactive banner, hash randomisation that is on anyway);
- ``-O``/``-OO``, ``-B``, ``-d``, ``-v``, ``-s``, ``-P``, ``-W arg`` and the ``-X`` options that
  have one become their environment variable (``PYTHONOPTIMIZE``, ``PYTHONDONTWRITEBYTECODE``,
  ``PYTHONWARNINGS``, ``PYTHONDEVMODE``...: the python documentation's "Command line and
  environment"); a variable the container sets itself keeps its value;
- any other option (``-c``, ``-i``, ``-E``, ``-I``, ``-S``, ``-b``, ``-x``, a ``-X`` without a
  variable) has no way through torchrun and is refused, as are a script that is torchrun itself
  (t9k-jobs starts torchrun), a shell (torchrun would run it with python) unless
  ``extraOptions`` has ``--no-python``, and an option where the script should be.
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
ACCEPTED_OPTIONS = "-u, -q, -R, -O, -OO, -B, -d, -v, -s, -P, -W arg, -X " + "|".join(_X_ENV) + ", -m module"
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
    arguments), ``env`` (python options as environment variables, in the order given), where
    the script came from (``source``: ``command`` or ``args``) and whether a command that does
    not run python was dropped (``replaced``: T9k, "with torchrunConfig the command no longer
    takes effect")."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    source: str = "command"
    replaced: bool = False


def torchrun_script(command: list[str], args: list[str], extra_options: list[str] | tuple[str, ...] = ()) -> TorchrunScript:
    """The script torchrun runs for a container with ``command`` and ``args``.

    A ``command`` that starts with python gives its options and the rest of itself followed by
    ``args``, as the container would have run them (``[python, -u, train.py]`` with ``[--lr,
    "0.1"]`` gives ``train.py --lr 0.1``); otherwise ``args`` (python and its options dropped
    when ``args`` starts with python), or with no ``args`` the ``command`` itself.
    ``extra_options`` are torchrunConfig's (``--no-python`` lets the script be any program).
    Raises :class:`TorchrunError` for what torchrun cannot run (see the module docstring).
    """
    no_python = any(o.strip() in NO_PYTHON for o in extra_options)
    if command and is_python(command[0]):
        # Item i of command[1:] + args is command[i + 1], or args[i - (len(command) - 1)].
        def at(i: int) -> tuple[str, int]:
            return ("command", i + 1) if i < len(command) - 1 else ("args", i - (len(command) - 1))

        argv, env, start = _python_options(command[1:] + args, at)
        where = at(start) if argv else ("command", len(command) - 1)
        return _checked(TorchrunScript(argv, env, where[0], False), where, no_python)
    if args and is_python(args[0]):
        argv, env, start = _python_options(args[1:], lambda i: ("args", i + 1))
        return _checked(TorchrunScript(argv, env, "args", bool(command)), ("args", start + 1), no_python)
    if args:
        return _checked(TorchrunScript(list(args), {}, "args", bool(command)), ("args", 0), no_python)
    return _checked(TorchrunScript(list(command), {}, "command", False), ("command", 0), no_python)


def _python_options(items: list[str], at: Callable[[int], tuple[str, int]]) -> tuple[list[str], dict[str, str], int]:
    """The python options at the head of ``items``: ``(script argv, env, index of the script)``.
    ``at(i)`` names the field and index of item ``i`` for an error."""
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
        if item == "-":
            raise TorchrunError(*at(i), _refuse("'-' (a script on standard input)"))
        if not item.startswith("-"):
            return done(items[i:], i)
        if item.startswith("--"):
            raise TorchrunError(*at(i), _refuse(repr(item)))
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
                        raise TorchrunError(
                            *at(i),
                            f"python's -X {name} has no environment variable torchrun could pass; accepted: -X "
                            + ", -X ".join(_X_ENV),
                        )
                    var, default = _X_ENV[name]
                    if not eq and default is None:
                        raise TorchrunError(*at(i), f"python's -X {name} needs =value")
                    env[var] = given if eq else str(default)
                break
            if ch in _FLAG_ENV:
                counts[_FLAG_ENV[ch]] = counts.get(_FLAG_ENV[ch], 0) + 1
            elif ch not in _FLAG_NOOP:
                raise TorchrunError(*at(i), _refuse(f"-{ch}"))
            j += 1
        i += 1
    return done([], len(items))


def _refuse(option: str) -> str:
    return (
        f"python's option {option} cannot reach the script: torchrun starts it as python -u <script> and reads "
        f"options before the script as its own; accepted before the script: {ACCEPTED_OPTIONS} "
        "(torchrun's own options go in torchrunConfig.extraOptions)"
    )


def _checked(script: TorchrunScript, where: tuple[str, int], no_python: bool) -> TorchrunScript:
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
    if program == "torchrun" or module in ("torch.distributed.run", "torch.distributed.launch"):
        raise TorchrunError(
            *where,
            "runs torchrun, and with torchrunConfig t9k-jobs starts torchrun itself: give the training script and its "
            "arguments (in args, or command: [python, train.py, ...]) and torchrun's options in torchrunConfig",
        )
    if not no_python and module is None and program in SHELLS:
        raise TorchrunError(
            *where,
            f"{first!r} would be the training script, and torchrun runs it with python; give the python script (in "
            "args, or command: [python, train.py, ...]), or add --no-python to torchrunConfig.extraOptions to run "
            "a program",
        )
    return script
