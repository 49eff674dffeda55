"""Kubeconfig ``exec`` credential plugins, bounded in time and in what they may print (issue 33).

A kubeconfig user may get its credential from a program (``users[].user.exec``: an SSO login, a
cloud CLI), which kubernetes_asyncio runs while it loads the kubeconfig
(``KubeConfigLoader.load_from_exec_plugin``) through its ``ExecProvider``, with no limit: a plugin
that waits for a login nobody gives hung every verb however short its timeout. Here the same
protocol (client-go's ``ExecCredential``, ``client.authentication.k8s.io``: the request in
``$KUBERNETES_EXEC_INFO``, the credential as JSON on the plugin's standard output) is carried out
by :class:`BoundedExecProvider`, put in the library's place once by :func:`install`:

* the plugin gets the time in :data:`PLUGIN_LIMIT` (the caller's: the remaining time of the
  request that needs the credential), then it is killed (its process group, when it does not
  talk to a terminal), and so it is when the caller is cancelled (a ``wait --timeout`` running out);
* it may print at most :data:`MAX_OUTPUT` bytes of credential and :data:`MAX_STDERR` of messages;
* every failure (no such program, a non-zero exit, no answer in time, an answer of another shape)
  is a ``ConfigException`` with one line that names the plugin and what went wrong.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from contextvars import ContextVar
from typing import Any

from kubernetes_asyncio.config import kube_config
from kubernetes_asyncio.config.config_exception import ConfigException
from kubernetes_asyncio.config.exec_provider import ExecProvider

#: Seconds a plugin started now may run (None: no limit); set by whoever needs a credential.
PLUGIN_LIMIT: ContextVar[float | None] = ContextVar("t9k_jobs_exec_plugin_limit", default=None)
#: The most a plugin may write on its standard output (the credential), bytes.
MAX_OUTPUT = 2**20
#: The most of a plugin's standard error that is kept (its last line is quoted), bytes.
MAX_STDERR = 64 * 2**10


class BoundedExecProvider(ExecProvider):
    """kubernetes_asyncio's ``ExecProvider`` (its parsing of ``users[].user.exec``: command, args,
    env, apiVersion) whose :meth:`run` is bounded (see the module docstring)."""

    async def run(self, previous_response: str | None = None) -> Any:  # noqa: ARG002 - the library's signature
        """The ``status`` of the plugin's ``ExecCredential`` (a mapping with ``token``, or
        ``clientCertificateData`` and ``clientKeyData``). Raises ``ConfigException`` (one line)."""
        command = self.args[0]
        interactive = sys.stdin.isatty() and sys.stdout.isatty()
        request = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": {"interactive": interactive}}
        env = {**self.env, "KUBERNETES_EXEC_INFO": json.dumps(request)}
        limit = PLUGIN_LIMIT.get()
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.args,
                env=env,
                stdin=None if interactive else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                # A plugin that asks at the terminal must stay in the terminal's foreground group;
                # any other gets a session of its own, so that what it started goes with it.
                start_new_session=not interactive,
            )
        except FileNotFoundError:
            raise ConfigException(
                f"exec plugin {command!r} is not installed (not found on PATH): install it, or fix "
                "users[].user.exec.command in the kubeconfig"
            ) from None
        except OSError as exc:
            raise ConfigException(f"exec plugin {command!r} cannot be started: {exc.strerror or exc}") from None
        try:
            async with asyncio.timeout(limit):
                out, err = await asyncio.gather(
                    _read_limited(proc.stdout, MAX_OUTPUT), _read_limited(proc.stderr, MAX_STDERR, keep_end=True)
                )
                code = await proc.wait()
        except TimeoutError:
            _kill(proc, interactive)
            await proc.wait()
            raise ConfigException(
                f"exec plugin {command!r} gave no credential within {limit:g} s and was stopped (a login "
                "waiting for you? log in first, or give more time: --request-timeout)"
            ) from None
        except _TooMuch:
            _kill(proc, interactive)
            await proc.wait()
            raise ConfigException(f"exec plugin {command!r} printed more than {MAX_OUTPUT} bytes: not a credential") from None
        except BaseException:  # cancelled by the caller's own limit: the plugin goes too
            _kill(proc, interactive)
            with contextlib.suppress(BaseException):
                await asyncio.shield(proc.wait())
            raise
        if code != 0:
            said = _last_line(err)
            raise ConfigException(f"exec plugin {command!r} failed (exit {code})" + (f": {said}" if said else ""))
        return self._status(command, out)

    def _status(self, command: str, out: bytes) -> dict[str, Any]:
        """The ``status`` of the ``ExecCredential`` the plugin printed, checked."""
        try:
            data = json.loads(out)
        except ValueError:
            raise ConfigException(f"exec plugin {command!r} printed no ExecCredential (not JSON)") from None
        if not isinstance(data, dict) or data.get("kind") != "ExecCredential":
            raise ConfigException(f"exec plugin {command!r} printed no ExecCredential (kind must be ExecCredential)")
        if data.get("apiVersion") != self.api_version:
            raise ConfigException(
                f"exec plugin {command!r} answered in {data.get('apiVersion')!r}, not the kubeconfig's {self.api_version!r}"
            )
        status = data.get("status")
        if not isinstance(status, dict):
            raise ConfigException(f"exec plugin {command!r}: its ExecCredential has no status")
        has_token = isinstance(status.get("token"), str) and status["token"]
        has_cert = isinstance(status.get("clientCertificateData"), str) and isinstance(status.get("clientKeyData"), str)
        if not has_token and not has_cert:
            raise ConfigException(
                f"exec plugin {command!r}: its ExecCredential's status has neither a token nor "
                "clientCertificateData and clientKeyData"
            )
        return status


class _TooMuch(Exception):
    """A plugin printed more than it may."""


async def _read_limited(stream: asyncio.StreamReader | None, limit: int, keep_end: bool = False) -> bytes:
    """All of ``stream`` up to ``limit`` bytes: beyond, :class:`_TooMuch`, or with ``keep_end``
    its last ``limit`` bytes (messages: the end says most)."""
    if stream is None:
        return b""
    held = bytearray()
    while chunk := await stream.read(65536):
        held += chunk
        if len(held) > limit:
            if not keep_end:
                raise _TooMuch
            del held[: len(held) - limit]
    return bytes(held)


def _kill(proc: asyncio.subprocess.Process, interactive: bool) -> None:
    """SIGKILL the plugin (and its process group when it has its own)."""
    if proc.returncode is not None:
        return
    try:
        if interactive:
            proc.kill()
        else:
            os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _last_line(err: bytes) -> str:
    lines = [ln.strip() for ln in err.decode("utf-8", errors="replace").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def install() -> None:
    """Put :class:`BoundedExecProvider` in kubernetes_asyncio's place (idempotent), and keep the
    library's own error log quiet: the error it logs is raised, and said once, by the caller."""
    kube_config.ExecProvider = BoundedExecProvider  # type: ignore[misc]
    quiet = logging.getLogger(kube_config.__name__)
    if not any(isinstance(h, logging.NullHandler) for h in quiet.handlers):
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False


install()
