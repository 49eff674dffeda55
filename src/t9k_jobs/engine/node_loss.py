"""A replica whose node is lost (issue 25): failed with reason ``NodeLost``, its pod deleted, then
force-deleted once its grace period has passed with the node still unreachable.

On Kubernetes a node whose kubelet stops posting status is marked ``Ready=Unknown`` by
kube-controller-manager's node lifecycle controller after ``--node-monitor-grace-period`` (50 s
by default in 1.37), and tainted ``node.kubernetes.io/unreachable:NoExecute``. Its pods keep the
phase the kubelet last reported (``Running``); the taint evicts them only after the
``tolerationSeconds`` the DefaultTolerationSeconds admission plugin adds (300 s), and a pod being
deleted on a node no kubelet answers for stays ``Terminating`` for ever: nobody confirms that its
containers stopped. A job whose replica pods have fixed names (``<job>-<type>-<index>``) can then
never create that replica's new pod: the job hangs (kubeflow/trainer#720 reports it for TFJob).

What the engine does, from :attr:`Observed.unreachable_nodes` (node -> since when it has not been
Ready) and :attr:`~.runtime.Runtime.node_lost_after` (``after`` here; the operator's
``--node-lost-after``, 60 s by default):

- a pod that has not ended, on a node unreachable for ``node_lost_after`` seconds or more, is
  read as **ended Failed with reason** ``NodeLost`` (its running containers as terminated with no
  exit code): the replica's restart policy judges it like any failure (``OnFailure``/``Always``/
  ``ExitCode``: restarted, counted; ``Never`` or the limits reached: final, and the framework's
  failure rules decide the job, the reason ``NodeLost`` in its message) (:func:`project`);
- on an active job the pod is deleted (reason ``NodeLost``) with one Warning event ``NodeLost``
  naming the node and since when (:func:`losses`);
- a pod being deleted on a lost node whose grace period (its ``deletionTimestamp``) has passed is
  deleted again with a zero grace period (``force``), whoever deleted it first (a restart, a
  pause, the clean-up policy), with one Warning event ``ForceDeleted``: the name is free for the
  replacement (:func:`force_deletes`). When the node comes back its kubelet finds the pod gone and
  stops the stale container; the new pod has another UID, so the two are never confused;
- the engine asks to look again when a node's limit or a pod's grace period will pass (:func:`wake`).

A node that turns Ready again before the limit changes nothing. Why the operator decides this
rather than waiting for the taint manager, and how the Job controller, JobSet and Kubeflow
compare: docs/decisions.md, "A lost node".
"""

from __future__ import annotations

from dataclasses import replace

from .context import rfc3339
from .decisions import ForceDeletes, NodeLosses
from .types import ContainerState, Delete, Event, Observed, ObservedPod

#: The replica reason and event reason for a replica whose node was lost.
NODE_LOST = "NodeLost"
#: The event reason when a pod on a lost node is deleted with a zero grace period.
FORCE_DELETED = "ForceDeleted"


def lost_node(observed: Observed, pod: ObservedPod, now: float, after: float) -> str | None:
    """The node of ``pod`` when it has been unreachable for ``after`` seconds or more at ``now``
    (seconds since the epoch); ``None`` otherwise."""
    since = observed.unreachable_nodes.get(pod.node or "")
    if since is None or now - since < after:
        return None
    return pod.node


def lost_message(observed: Observed, node: str, after: float) -> str:
    """``node unreachable since <time>, over the <limit> s limit``."""
    since = rfc3339(observed.unreachable_nodes[node])
    return f"node {node} unreachable since {since}, over the {after:g} s limit"


def project(observed: Observed, now: float, after: float) -> Observed:
    """``observed`` with every pod that has not ended on a lost node read as ended: phase
    ``Failed``, reason ``NodeLost`` and a message naming the node and since when, its running (or
    unknown) containers terminated without an exit code. Other pods, and pods on nodes that are
    Ready or unreachable for less than the limit, are unchanged."""
    if not observed.unreachable_nodes:
        return observed
    pods = dict(observed.pods)
    for name, pod in observed.pods.items():
        node = lost_node(observed, pod, now, after)
        if node is None or pod.terminal:
            continue
        message = lost_message(observed, node, after)
        containers = tuple(
            ContainerState(c.name, "Terminated", None, NODE_LOST, message) if c.state in ("Running", "Unknown") else c
            for c in pod.containers
        )
        pods[name] = replace(pod, phase="Failed", reason=NODE_LOST, message=message, containers=containers)
    return replace(observed, pods=pods)


def losses(observed: Observed, now: float, after: float) -> NodeLosses:
    """Pods lost on this pass that are not being deleted yet, each with its Warning ``NodeLost``
    event (said once: later passes see the pod being deleted)."""
    out = []
    for pod in observed.pods.values():
        node = lost_node(observed, pod, now, after)
        if node is None or pod.deleting or pod.reason != NODE_LOST:
            continue
        message = f"{lost_message(observed, node, after)}: replica pod {pod.name} counts as failed and is deleted"
        out.append((pod, Event("Warning", NODE_LOST, message)))
    return NodeLosses(tuple(out))


def force_deletes(observed: Observed, now: float, after: float) -> ForceDeletes:
    """Pods being deleted on a lost node whose grace period has passed: a forced delete (UID
    precondition, zero grace period) and a Warning ``ForceDeleted`` event for each; and when the
    next node-loss decision about the job's pods comes (:func:`wake`)."""
    out = []
    for pod in observed.pods.values():
        node = lost_node(observed, pod, now, after)
        if node is None or not pod.deleting:
            continue
        if pod.deletion_deadline is not None and now < pod.deletion_deadline:
            continue
        message = (
            f"pod {pod.name} on node {node} (unreachable since {rfc3339(observed.unreachable_nodes[node])}) "
            "force-deleted after its grace period: no kubelet confirms it stopped; the node's kubelet "
            "stops its containers when it comes back"
        )
        out.append((Delete("Pod", pod.name, pod.uid, NODE_LOST, force=True), Event("Warning", FORCE_DELETED, message)))
    return ForceDeletes(tuple(out), wake(observed, now, after))


def wake(observed: Observed, now: float, after: float) -> float | None:
    """Seconds until the next node-loss decision about the job's pods: a pod's node reaching the
    limit, or a pod's grace period on a lost node passing; ``None`` when none is coming."""
    times = []
    for pod in observed.pods.values():
        since = observed.unreachable_nodes.get(pod.node or "")
        if since is None:
            continue
        lost_at = since + after
        if now < lost_at and (pod.deleting or not pod.terminal):
            times.append(lost_at - now)
        elif now >= lost_at and pod.deleting and pod.deletion_deadline is not None and now < pod.deletion_deadline:
            times.append(pod.deletion_deadline - now)
    return min(times) if times else None
