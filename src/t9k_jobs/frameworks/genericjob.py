"""GenericJob: any multi-replica program, success and failure decided by rules (reference §2)."""

from __future__ import annotations

import re
from typing import Any

from ..api.common import training_container
from ..api.kinds import GenericJob
from .base import Framework
from .notes import Templates
from .types import BuildContext, Final, Outcome, ReplicaGroup

# $(type) | $(rank) | $(replicas[T]) | $(service.T[R].host) | $(service.port[NAME])
_TOKEN = re.compile(
    r"\$\((?:(?P<type>type)|(?P<rank>rank)|replicas\[(?P<rtype>[^\]\s]+)\]"
    r"|service\.(?P<stype>[a-z0-9-]+)\[(?P<srank>\d+)\]\.host"
    r"|service\.port\[(?P<port>[^\]\s]+)\])\)"
)
_HOST_PORT = re.compile(
    r"\$\(service\.(?P<stype>[a-z0-9-]+)\[(?P<srank>\d+)\]\.host\):\$\(service\.port\[(?P<port>[^\]\s]+)\]\)"
)


def substitute(
    text: str,
    job: GenericJob,
    replica_type: str,
    rank: int,
    ctx: BuildContext,
) -> str:
    """Expand the GenericJob variables of reference §2.2 in ``text``.

    ``$(type)``, ``$(rank)``, ``$(replicas[<type>])`` always; ``$(service.<type>[<rank>].host)``
    and ``$(service.port[<name>])`` only when ``spec.service`` is set (T9k docs). A port that
    directly follows a host (``$(service.worker[1].host):$(service.port[http])``) is that
    replica's port; a port on its own is this replica's own port (the two differ only in the
    local runtime, where replicas share one host). Unknown tokens are left for Kubernetes'
    own ``$(VAR)`` expansion.
    """
    counts = {r.type: r.replicas for r in job.spec.replica_specs}
    ports = {p.name: p.port for p in (job.spec.service.ports if job.spec.service else [])}
    services = job.spec.service is not None

    def host(stype: str, srank: str) -> str | None:
        if not services or stype not in counts or int(srank) >= counts[stype]:
            return None
        return ctx.addressing.host(job.name, stype, int(srank))

    def port(stype: str, srank: int, name: str) -> str | None:
        if not services or name not in ports:
            return None
        return str(ctx.addressing.port(job.name, stype, srank, name, ports[name]))

    def pair(m: re.Match[str]) -> str:
        h = host(m["stype"], m["srank"])
        p = port(m["stype"], int(m["srank"]), m["port"])
        if h is None or p is None:
            return m.group(0)
        return f"{h}:{p}"

    def one(m: re.Match[str]) -> str:
        if m["type"]:
            return replica_type
        if m["rank"]:
            return str(rank)
        if m["rtype"]:
            return str(counts[m["rtype"]]) if m["rtype"] in counts else m.group(0)
        if m["stype"]:
            return host(m["stype"], m["srank"]) or m.group(0)
        value = port(replica_type, rank, m["port"])
        return value if value is not None else m.group(0)

    return _TOKEN.sub(one, _HOST_PORT.sub(pair, text))


class GenericJobFramework(Framework[GenericJob]):
    kind = "GenericJob"

    def groups(self, job: GenericJob) -> list[ReplicaGroup]:
        ports = None
        if job.spec.service is not None:
            ports = tuple(p.dump() for p in job.spec.service.ports)
        return [
            ReplicaGroup(
                type=spec.type,
                replicas=spec.replicas,
                template=spec.template,
                restart_policy=spec.restart_policy.policy,
                limit=spec.restart_policy.limit,
                training_container=training_container(spec.template, ()),
                service_ports=ports,
            )
            for spec in job.spec.replica_specs
        ]

    def clean_up(self, job: GenericJob) -> tuple[str, frozenset[str]]:
        return job.spec.clean_up_policy, frozenset()

    def templates(self, job: GenericJob) -> Templates:
        return [(f"spec.replicaSpecs[{i}].template", r.template) for i, r in enumerate(job.spec.replica_specs)]

    def warnings(self, job: GenericJob) -> list[str]:
        """Besides every kind's: a restart ``limit`` with policy ``Never``, and a policy that
        restarts written without a limit (the default 0 restarts nothing)."""
        out = super().warnings(job)
        for i, r in enumerate(job.spec.replica_specs):
            policy = r.restart_policy
            where = f"spec.replicaSpecs[{i}].restartPolicy"
            if policy.policy == "Never" and policy.limit > 0:
                out.append(f"{where}.limit: no effect with policy Never (the replica is never restarted)")
            elif policy.policy != "Never" and "policy" in policy.model_fields_set and "limit" not in policy.model_fields_set:
                out.append(
                    f"{where}: policy {policy.policy} restarts nothing while limit is 0 (the default); limit is the "
                    "number of restarts each replica may have"
                )
        return out

    def decorate(
        self, job: GenericJob, group: ReplicaGroup, index: int, pod: dict[str, Any], ctx: BuildContext
    ) -> None:
        spec = pod["spec"]
        for key in ("initContainers", "containers"):
            for c in spec.get(key) or []:
                for field in ("command", "args"):
                    if c.get(field):
                        c[field] = [substitute(str(v), job, group.type, index, ctx) for v in c[field]]
                for env in c.get("env") or []:
                    if isinstance(env.get("value"), str):
                        env["value"] = substitute(env["value"], job, group.type, index, ctx)

    def outcome(
        self, job: GenericJob, groups: list[ReplicaGroup], finals: dict[tuple[str, int], Final]
    ) -> Outcome | None:
        """Rules of reference §2.3: failure rules first, then success rules.

        A failure rule is met when all its replicas failed for good; a success rule when all
        its replicas succeeded for good. Without rules (absent, or an empty list, as T9k's Go
        reads ``len(rules) == 0``): success when every replica succeeded, failure as soon as one
        failed for good; each list on its own. When rules exist but every replica
        is final and none matched, the job fails with reason ``NoRuleMatched``.
        """
        wanted = [(g.type, i) for g in groups for i in range(g.replicas)]
        # An empty list of rules is no rules (as a Go ``len(rules) == 0`` reads it): the defaults.
        failure_rules = job.spec.failure_rules or None
        success_rules = job.spec.success_rules or None
        given_failure_rules = failure_rules is not None
        if failure_rules is None:
            failure_rules = [{t: [i]} for t, i in wanted]
        if success_rules is None:
            success_rules = [_rule_of(wanted)]
        for rule in failure_rules:
            members = _members(rule)
            if members and all(m in finals and not finals[m].succeeded for m in members):
                culprit = finals[members[0]]
                text = _rule_text(rule) if given_failure_rules else culprit.describe()
                msg = (
                    f"The job is failed with rule: {text}"
                    if given_failure_rules
                    else f"GenericJob {job.name} has failed: {text}"
                )
                return Outcome(False, msg)
        for rule in success_rules:
            members = _members(rule)
            if members and all(m in finals and finals[m].succeeded for m in members):
                return Outcome(True, "The job has finished successfully.")
        if wanted and all(m in finals for m in wanted):
            return Outcome(
                False,
                f"GenericJob {job.name} has failed: every replica has finished but no success rule matched",
                reason="NoRuleMatched",
            )
        return None


def _rule_of(members: list[tuple[str, int]]) -> dict[str, list[int | str]]:
    rule: dict[str, list[int | str]] = {}
    for t, i in members:
        rule.setdefault(t, []).append(i)
    return rule


def _members(rule: dict[str, list[int | str]]) -> list[tuple[str, int]]:
    return [(t, int(r)) for t, ranks in rule.items() for r in ranks]


def _rule_text(rule: dict[str, list[int | str]]) -> str:
    inner = ", ".join(f'"{t}": [{", ".join(str(int(r)) for r in ranks)}]' for t, ranks in rule.items())
    return "{ " + inner + " }"
