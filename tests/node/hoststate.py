"""What a node could leave behind on the host, as comparable data: mounts, network links (its
veth, the host bridge) and namespaces, the host's routes (one to each node's pod network) and
iptables rules, cgroups, kernel and network settings, the fixed paths the kubelet and containerd
use, and the node's processes. Node K >= 2 of the same cluster is covered by the same snapshot
(its cgroup, veth and directory are named after node 1's, with ``-K``).

``snapshot()`` before ``tools/node`` starts a node and after it is taken down must be equal
(:func:`differences` lists what is not).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

CGROUP_FS = Path("/sys/fs/cgroup")
FIXED_PATHS = (
    "/run/containerd",
    "/var/lib/containerd",
    "/var/lib/kubelet",
    "/var/lib/cni",
    "/var/log/pods",
    "/var/log/containers",
    "/opt/cni",
    "/opt/containerd",
    "/run/netns",
    "/etc/kubernetes",
    "/usr/libexec/kubernetes",
)
SYSCTL_TREES = ("vm", "kernel", "net/ipv4/ip_forward", "net/ipv4/conf/all", "net/bridge")
# Settings that move by themselves (counters, randomness, time).
VOLATILE = ("random", "ns_last_pid", "stat_refresh", "drop_caches", "compact_memory", "pty/nr", "tainted",
            "dentry-state", "inode-nr", "inode-state", "file-nr", "hung_task", "perf_event_max", "nr_",
            "overflow", "warn", "keys/maxkeys", "sched_domain", "numa_balancing")


def _sysctls() -> dict[str, str]:
    out: dict[str, str] = {}
    for tree in SYSCTL_TREES:
        base = Path("/proc/sys", tree)
        files = [base] if base.is_file() else [f for f in base.rglob("*") if f.is_file()]
        for f in files:
            key = str(f.relative_to("/proc/sys"))
            if any(v in key for v in VOLATILE):
                continue
            try:
                out[key] = f.read_text()
            except OSError:
                pass
    return out


def routes() -> list[str]:
    """Every IPv4 and IPv6 route of the host, all tables (an address's remaining lifetime left out)."""
    out = []
    for family in ("-4", "-6"):
        listing = subprocess.run(["ip", family, "route", "show", "table", "all"], capture_output=True, text=True,
                                 check=False).stdout
        out += [re.sub(r" expires \S+", "", line.strip()) for line in listing.splitlines() if line.strip()]
    return sorted(out)


def _cgroups() -> list[str]:
    out = []
    for h in sorted(CGROUP_FS.iterdir()):
        if h.is_dir() and not h.is_symlink():
            out += [f"{h.name}/{d.name}" for d in h.iterdir() if d.is_dir()]
    return sorted(out)


def bridge_of(veth: str) -> str:
    """The host bridge of the cluster whose node 1 has the host link ``veth`` (tools/node/node.py)."""
    return "t9kb-" + veth.removeprefix("t9kn-")


def _processes(node_dir: str, cgroup: str) -> list[str]:
    """Processes of the node: in its cgroup, or with its directory on their command line."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cgroups = Path(f"/proc/{pid}/cgroup").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if f"/{cgroup}" in cgroups or node_dir in cmdline:
            out.append(f"{pid} {cmdline[:120]}")
    return sorted(out)


def snapshot(node_dir: str | os.PathLike, cgroup: str, veth: str, private: tuple[str, ...] = ()) -> dict[str, Any]:
    """The host's state that the node of ``node_dir`` (cgroup ``cgroup``, host link ``veth``)
    touches: its own mounts, links (``veth``, ``veth-K``, the host bridge), cgroups (``cgroup``,
    ``cgroup-K``) and processes (another cluster started meanwhile does not count), and the
    machine-wide iptables rules, network namespaces, kernel settings and fixed paths. ``private``:
    the paths the node covers with a tmpfs of its own. Root needed (iptables)."""
    run = lambda *c: subprocess.run(c, capture_output=True, text=True, check=False).stdout  # noqa: E731
    ours = (str(node_dir), *private)
    return {
        "mounts": sorted(
            m for m in (line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines())
            if m.startswith(ours) or "containerd" in m or "kubelet" in m
        ),
        "links": sorted(
            name for name in (line.split(":")[1].strip().split("@")[0] for line in run("ip", "-o", "link").splitlines())
            if name.startswith(veth) or name in ("cni0", bridge_of(veth))
        ),
        "netns": sorted(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else None,
        "routes": routes(),
        "iptables": iptables_rules(run("iptables-save")),
        "cgroups": [c for c in _cgroups()
                    if c.endswith("/" + cgroup) or f"/{cgroup}-" in c or "kubepods" in c],
        "sysctls": _sysctls(),
        "paths": {p: os.path.lexists(p) for p in FIXED_PATHS},
        "processes": _processes(str(node_dir), cgroup),
    }


def iptables_rules(saved: str) -> list[str]:
    """The rules of ``iptables-save``'s output, each as ``TABLE RULE``: what a node adds or leaves.
    Table headers (``*filter``), chain counters and ``COMMIT`` are left out: a table appears in the
    output once anything used it, so on a machine where nothing had touched iptables before, the
    node's first rule makes an empty ``*filter`` table that stays after the rule is gone (issue 35:
    only a fresh machine showed it)."""
    rules, table = [], "?"
    for line in saved.splitlines():
        if line.startswith("*"):
            table = line[1:].strip()
        elif line.startswith("-"):
            rules.append(f"{table} {line}")
    return rules


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """One line per difference between two snapshots."""
    out = []
    for key in before:
        a, b = before[key], after[key]
        if isinstance(a, dict):
            for k in sorted(set(a) | set(b)):
                if a.get(k) != b.get(k):
                    out.append(f"{key} {k}: {a.get(k)!r} -> {b.get(k)!r}")
        elif isinstance(a, list):
            gone = [x for x in a if x not in b]
            new = [x for x in b if x not in a]
            out += [f"{key}: new {x}" for x in new] + [f"{key}: gone {x}" for x in gone]
        elif a != b:
            out.append(f"{key}: {a!r} -> {b!r}")
    return out
