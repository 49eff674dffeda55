"""tools/node itself: its refusals, and that taking the node down leaves the machine as it was."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from . import hoststate
from .conftest import PRIVATE_PATHS, REPO, Node, NodeError, archives


def test_up_refuses_without_root_in_one_line(tmp_path) -> None:
    out = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", str(REPO / "tools/node/up.sh"),
         str(tmp_path / "n")],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 2, out
    assert out.stderr.strip().count("\n") == 0 and "needs root" in out.stderr, out.stderr


def test_the_snapshot_compares_rules_not_the_tables_iptables_made_on_first_use() -> None:
    """Issue 35: on a machine where nothing had used iptables before, the node's first rule made
    an empty ``*filter`` table that stayed after down; the snapshot counted it as left behind."""
    fresh = "# Generated\n*nat\n:PREROUTING ACCEPT [0:0]\n-A POSTROUTING -s 10.0.0.0/8 -j MASQUERADE\nCOMMIT\n"
    after = fresh + "*filter\n:INPUT ACCEPT [3:120]\n:FORWARD ACCEPT [0:0]\nCOMMIT\n"
    assert hoststate.iptables_rules(fresh) == ["nat -A POSTROUTING -s 10.0.0.0/8 -j MASQUERADE"]
    assert not hoststate.differences({"iptables": hoststate.iptables_rules(fresh)},
                                     {"iptables": hoststate.iptables_rules(after)})
    left = after.replace(":FORWARD ACCEPT [0:0]\n", ":FORWARD ACCEPT [0:0]\n-A FORWARD -i t9kb-1 -j ACCEPT\n")
    assert hoststate.differences({"iptables": hoststate.iptables_rules(fresh)},
                                 {"iptables": hoststate.iptables_rules(left)}) == [
        "iptables: new filter -A FORWARD -i t9kb-1 -j ACCEPT"]


def test_a_second_node_is_refused_while_one_runs(node, tmp_path) -> None:
    other = Node(tmp_path / "other")
    with pytest.raises(NodeError, match=f"a node already runs from {node.dir}"):
        other.up()
    assert not (tmp_path / "other").exists()


def test_down_leaves_the_machine_as_it_was(node) -> None:
    """Runs last (conftest orders it): no process, mount, cgroup, link, network namespace, iptables
    rule, fixed path or kernel setting of the node is left after down; with a second node joined
    and lost (frozen) at the time, so that down also finds, thaws and stops node 2, its veth,
    routes and cgroups, and removes the host bridge."""
    if 2 not in node.members():
        node.add_node(2, archives("pause"))
    node.lose("t9k-node-2")
    node.down()
    after = hoststate.snapshot(node.dir, node.cgroup, node.veth, PRIVATE_PATHS)
    diff = hoststate.differences(node.host_before, after)
    assert not diff, "\n".join(diff)
    # down is idempotent: a second call finds nothing to do.
    node.down()


def test_a_killed_nodes_bridge_goes_and_a_bridge_in_use_is_refused(tmp_path) -> None:
    """A node whose runner was killed before ``down`` (and whose registration is gone) left its host
    bridge holding 198.18.0.1: the next node's kubelet could not reach the API server through its
    own bridge ('kubelet not serving after 90 s'). ``up`` deletes such bridges; one with ports is
    refused in one line."""
    stale, busy, port = "t9kb-zz0001", "t9kb-zz0002", "t9kz-port0"
    try:
        for name in (stale, busy):
            subprocess.run(["ip", "link", "add", name, "type", "bridge"], check=True)
        subprocess.run(["ip", "addr", "add", "198.18.0.1/24", "dev", stale], check=True)
        subprocess.run(["ip", "link", "add", port, "type", "veth", "peer", "name", "t9kz-peer0"], check=True)
        subprocess.run(["ip", "link", "set", port, "master", busy], check=True)
        fresh = Node(tmp_path / "n")
        with pytest.raises(NodeError, match=f"the host bridge {busy} \\(ports: {port}\\)"):
            fresh._remove_stale_bridges()
        assert not (Path("/sys/class/net") / stale).exists()
        subprocess.run(["ip", "link", "del", port], check=True)
        fresh._remove_stale_bridges()
        assert not (Path("/sys/class/net") / busy).exists()
    finally:
        for name in (port, stale, busy):
            subprocess.run(["ip", "link", "del", name], capture_output=True)
