"""The errors of the day-two verbs and of the Python SDK (:class:`t9k_jobs.Client`).

Every error's ``str()`` is the one line the CLI prints after ``error: ``, and ``exit_code`` is
the CLI's exit status for it: 2 for bad usage or input (as ``validate``), 1 for everything else
(not found, already exists, a wait that timed out or ended otherwise, an unreachable cluster)::

    JobsError                      exit 1
    ├── UsageError                 exit 2   an unknown kind, a bad duration, --for, option mix, no
    │                                       name, an argument of the wrong type, a bad kubeconfig
    │   ├── InvalidJob             exit 2   a manifest that is not a valid job (lines())
    │   └── NotSupported           exit 2   a verb the target cannot do (--timestamps locally)
    ├── NotFound                   exit 1   no such job (or local run, replica, container)
    ├── AlreadyExists              exit 1   create: the name is taken; run: the job runs here
    ├── WaitTimeout                exit 1   wait: time ran out (``phase``: where the job was)
    ├── JobEndedOtherwise          exit 1   wait: the job ended in another phase (``phase``)
    └── ClusterError               exit 1   the API server cannot be reached or refused the request
"""

from __future__ import annotations


class JobsError(Exception):
    """A verb cannot do what was asked. ``str()`` is one line; ``exit_code`` the CLI's status."""

    exit_code = 1

    def lines(self) -> list[str]:
        """The lines the CLI prints (after ``error: ``): one, but :class:`InvalidJob` may have several."""
        return [str(self)]


class UsageError(JobsError):
    """Bad usage: an unknown kind, a bad duration, phase or option, a value out of range (exit 2)."""

    exit_code = 2


class InvalidJob(UsageError):
    """A manifest that is not a valid job: ``errors`` holds one ``<source>: <field path>: <what is
    accepted>`` line per problem (as ``t9k-jobs validate`` prints them); ``str()`` joins them with
    ``; ``. Exit code 2."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = list(errors) or ["invalid job"]
        super().__init__("; ".join(self.errors))

    def lines(self) -> list[str]:
        return list(self.errors)


class NotSupported(UsageError):
    """The target cannot do this verb (``--timestamps`` on a local run, ``run`` on a cluster, pause of
    a run started by an older version, which has no manifest copy). Exit code 2."""


class NotFound(JobsError):
    """No such job, local run, replica or container (exit code 1)."""


class AlreadyExists(JobsError):
    """``create``: a job of that kind and name is already in the namespace; ``run``: a run of that
    job is running in the same runs dir (exit code 1)."""


class WaitTimeout(JobsError):
    """``wait``: the time ran out before the job reached the phase; ``phase`` is where it was (exit 1)."""

    def __init__(self, message: str, phase: str | None = None) -> None:
        super().__init__(message)
        self.phase = phase


class JobEndedOtherwise(JobsError):
    """``wait``: the job ended (or was stopped, or deleted) in another ``phase`` than the one waited
    for; the message says why (exit code 1)."""

    def __init__(self, message: str, phase: str | None = None) -> None:
        super().__init__(message)
        self.phase = phase


class ClusterError(JobsError):
    """The API server cannot be reached, the kubeconfig cannot be used, or the server refused the
    request (forbidden, the CRDs not installed...). Exit code 1."""


__all__ = [
    "AlreadyExists",
    "ClusterError",
    "InvalidJob",
    "JobEndedOtherwise",
    "JobsError",
    "NotFound",
    "NotSupported",
    "UsageError",
    "WaitTimeout",
]
