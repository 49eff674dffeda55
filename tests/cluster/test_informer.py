"""The informer against the real API server: paged list, label selector, watch, re-watch.

(A real 410 Gone cannot be provoked on demand here: the API server's watch cache keeps about
75 s of history and answers old resourceVersions from it.)
"""

from __future__ import annotations

import asyncio

from t9k_jobs.cluster.client import CONFIGMAPS, KubeClient
from t9k_jobs.cluster.informer import Informer
from tests.helpers import await_until


def cm(ns: str, name: str, team: str, value: str = "1") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {"team": team}},
        "data": {"v": value},
    }


def test_list_watch_selector_pages_and_rewatch(control_plane, namespace) -> None:
    ns = namespace

    async def go() -> None:
        client = await KubeClient.from_config(control_plane.kubeconfig)
        try:
            for i in range(7):
                await client.create(CONFIGMAPS, ns, cm(ns, f"a{i}", "a"))
            await client.create(CONFIGMAPS, ns, cm(ns, "b0", "b"))
            events: list[tuple[str, str]] = []
            inf = Informer(
                client,
                CONFIGMAPS,
                namespace=ns,
                label_selector="team=a",
                transform=lambda o: o["data"]["v"],
                page_size=3,  # 7 objects: three pages
                watch_timeout=(1, 1),  # the server ends every watch after a second
            )
            inf.add_handler(lambda ev, key, new, old: events.append((ev, key[1])))
            task = asyncio.create_task(inf.run())
            await asyncio.wait_for(inf.synced.wait(), 10)
            assert sorted(inf.store) == [(ns, f"a{i}") for i in range(7)], "paged list, label-selected"
            assert inf.relists == 1

            await client.create(CONFIGMAPS, ns, cm(ns, "a7", "a"))
            await client.create(CONFIGMAPS, ns, cm(ns, "b1", "b"))
            await client.patch(CONFIGMAPS, ns, "a0", {"data": {"v": "2"}})
            await client.delete(CONFIGMAPS, ns, "a1")
            await await_until(
                lambda: inf.get(ns, "a0") == "2" and inf.get(ns, "a1") is None and inf.get(ns, "a7"),
                "the patch, the delete and the create to arrive",
                10,
            )
            assert inf.get(ns, "b1") is None
            assert ("ADDED", "a7") in events and ("MODIFIED", "a0") in events and ("DELETED", "a1") in events

            # Re-watching after the server's timeout continues from the last resourceVersion: nothing is lost.
            await asyncio.sleep(1.5)
            await client.create(CONFIGMAPS, ns, cm(ns, "a8", "a"))
            await await_until(lambda: inf.get(ns, "a8") is not None, "a8 to arrive after the re-watch", 10)
            assert inf.relists == 1

            assert len(inf.store) == 8
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        finally:
            await client.close()

    asyncio.run(go())
