"""Soak: continuous job churn against t9k-jobs' operator, with its memory sampled.

On the simulated cluster of ``cluster_scale.py`` (plus kube-controller-manager, whose garbage
collector removes a deleted job's pods), keep ``--in-flight`` PyTorchTrainingJobs (1 master +
3 workers) going for ``--minutes``: create a job, let kwok run its pods, make its master
succeed, delete the job once it Succeeded, and create the next. Every 5 s the operator's RSS is
sampled. At the end: every job created was seen Succeeded, nothing is left behind (no job, no
pod once the garbage collector caught up), and the RSS of the last quarter is compared with the
second quarter (the steady state after warm-up); more than ``--max-growth`` percent (10) fails.

    python benchmarks/soak.py --minutes 20 --in-flight 50
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from cluster_scale import (
    NS,
    OUTCOME,
    PODS,
    T9K_JOBS,
    Cluster,
    Informer,
    KubeClient,
    build,
    ours,
    t9k_job,
    until,
)

ROOT = Path(__file__).resolve().parents[1]


async def soak(minutes: float, in_flight: int, out: Path, max_growth: float = 10.0) -> int:
    bin_dir, peers = build("build.sh"), build("build-peers.sh")
    work = Path(tempfile.mkdtemp(prefix="soak-"))
    cluster = Cluster(work, bin_dir, peers, [ROOT / "deploy" / "crds"])
    cluster.cp.controller_manager = True
    # The garbage collector deletes 8 children per job: its client must keep up with the churn.
    cluster.cp.controller_manager_args = ["--kube-api-qps=500", "--kube-api-burst=1000"]
    cluster.start()
    client = await KubeClient.from_config(cluster.cp.kubeconfig, qps=0, burst=1)
    op = ours(cluster, None, None, None)
    samples: list[tuple[float, float]] = []
    created = succeeded = 0
    passed = False
    try:
        await cluster.add_nodes(client)
        phases: dict[str, str] = {}
        jobs_inf = Informer(
            client, T9K_JOBS, namespace=NS, transform=lambda o: (o.get("status") or {}).get("phase") or ""
        )
        jobs_inf.add_handler(lambda ev, key, new, old: phases.__setitem__(key[1], new or "Deleted"))
        pods_inf = Informer(
            client, PODS, namespace=NS, transform=lambda o: (o.get("status") or {}).get("phase") or ""
        )
        tasks = [asyncio.create_task(jobs_inf.run()), asyncio.create_task(pods_inf.run())]
        op.start()
        await op.wait_ready(op.ready_url)
        start = time.monotonic()
        end = start + minutes * 60
        next_sample = start
        live: set[str] = set()
        annotated: set[str] = set()
        while time.monotonic() < end:
            while len(live) < in_flight:
                name = f"soak-{created}"
                job = t9k_job(created)
                job["metadata"]["name"] = name
                await client.create(T9K_JOBS, NS, job)
                live.add(name)
                created += 1
            for name in list(live):
                phase = phases.get(name, "")
                master = f"{name}-master-0"
                if phase == "Running" and name not in annotated and pods_inf.get(NS, master) == "Running":
                    await client.patch(PODS, NS, master, {"metadata": {"annotations": {OUTCOME: "succeed"}}})
                    annotated.add(name)
                elif phase == "Succeeded":
                    await client.delete(T9K_JOBS, NS, name)
                    live.discard(name)
                    annotated.discard(name)
                    succeeded += 1
            now = time.monotonic()
            if now >= next_sample:
                samples.append((now - start, op.rss() / 2**20))
                next_sample = now + 5
            await asyncio.sleep(0.2)
        out.write_text(
            json.dumps({"samples": samples, "jobs_created": created, "note": "churn done, draining"})
        )
        # Drain: finish the jobs in flight, then everything must go away.
        await until(
            lambda: all(phases.get(n) in ("Running", "Succeeded") for n in live),
            300,
            "in-flight jobs Running",
        )
        for name in live - annotated:
            master = f"{name}-master-0"
            await until(lambda m=master: pods_inf.get(NS, m) == "Running", 120, f"{master} Running")
            await client.patch(PODS, NS, master, {"metadata": {"annotations": {OUTCOME: "succeed"}}})
        await until(lambda: all(phases.get(n) == "Succeeded" for n in live), 300, "in-flight jobs Succeeded")
        for name in live:
            await client.delete(T9K_JOBS, NS, name)
        succeeded += len(live)
        await until(lambda: not jobs_inf.store, 120, "no job left")
        await until(lambda: not pods_inf.store, 600, "no pod left (garbage collector)")
        for t in tasks:
            t.cancel()
        quarter = max(1, len(samples) // 4)
        steady = statistics.median(r for _, r in samples[quarter : 2 * quarter])
        last = statistics.median(r for _, r in samples[-quarter:])
        result = {
            "minutes": minutes,
            "in_flight": in_flight,
            "jobs_created": created,
            "jobs_succeeded_and_deleted": succeeded,
            "rss_mib_steady_median": round(steady, 1),
            "rss_mib_last_quarter_median": round(last, 1),
            "rss_mib_max": round(max(r for _, r in samples), 1),
            "growth_percent": round(100 * (last - steady) / steady, 1),
            "samples": [(round(t), round(r, 1)) for t, r in samples],
        }
        out.write_text(json.dumps(result, indent=1))
        print(json.dumps({k: v for k, v in result.items() if k != "samples"}))
        passed = succeeded == created and result["growth_percent"] < max_growth
        return 0 if passed else 1
    finally:
        op.stop()
        await client.close()
        cluster.stop()
        # The control plane's data and logs (about 70 MB): kept only to read a failed soak.
        if passed:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"soak: its control plane's files and logs are kept in {work}", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=20)
    ap.add_argument("--in-flight", type=int, default=50)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "soak.json")
    ap.add_argument(
        "--max-growth",
        type=float,
        default=10.0,
        help="percent the last quarter's RSS may exceed the steady state's before the run fails",
    )
    args = ap.parse_args()
    return asyncio.run(soak(args.minutes, args.in_flight, args.out, args.max_growth))


if __name__ == "__main__":
    sys.exit(main())
