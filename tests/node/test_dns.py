"""Peers' Service names on a real node: how soon after a container starts they resolve.

The job's Services publish not-ready addresses, so a replica's record exists once its pod has an IP;
the endpoints still reach CoreDNS a moment after a peer's container may have started. Programs that
look a peer up once can race that moment; torchrun, DeepSpeed and ColossalAI retry (docs/decisions.md,
"Peer names resolve shortly after start"). This test measures the window and holds it bounded.
"""

from __future__ import annotations

import re

from tests import helpers
from tests.helpers import replica, template

from ..cluster.kube import Kube
from .conftest import TRAINING_IMAGE, wait_phase
from .test_lifecycle import create

PROBE = """
import socket, sys, time
start, failures = time.monotonic(), 0
for peer in sys.argv[1:]:
    while True:
        try:
            socket.getaddrinfo(peer, 4000)
            break
        except socket.gaierror:
            failures += 1
            time.sleep(0.05)
    print(f"resolved {peer} after {time.monotonic() - start:.2f} s, {failures} failed lookups", flush=True)
"""


def test_peer_names_resolve_within_seconds_of_start(node, kube: Kube, kubectl, namespace: str) -> None:
    peers = ["$(service.worker[0].host)", "$(service.worker[1].host)", "$(service.worker[2].host)"]
    pod = template(["python", "-c", PROBE, *peers], name="probe", image=TRAINING_IMAGE)
    job = helpers.job("GenericJob", "dns", {
        "successRules": [{"worker": [0, 1, 2]}], "service": {"ports": [{"name": "p", "port": 4000}]},
        "replicaSpecs": [replica("worker", 3, pod, restartPolicy={"policy": "Never"})]})
    done = wait_phase(kube, create(kube, namespace, job), ("Succeeded", "Failed"), timeout=180)
    logs = "".join(kubectl("logs", "-n", namespace, f"dns-worker-{i}").stdout for i in range(3))
    assert done["status"]["phase"] == "Succeeded", (done["status"], logs)
    delays = [float(s) for s in re.findall(r"after ([\d.]+) s", logs)]
    assert len(delays) == 9, logs
    print(f"peer names resolved {min(delays):.2f}-{max(delays):.2f} s after the containers started")
    assert max(delays) < 30, logs
