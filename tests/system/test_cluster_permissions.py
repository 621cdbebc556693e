"""Issue 21's attacks on the event log, as each NATS role, against a three-node JetStream
cluster running the deployment's permission model with R3 streams (the cluster config of
`deploy/`): the same suite as tests/integration/security/test_nats_permissions.py on one node."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kz_events.cluster import LocalCluster, render_permissions, role_users
from tests.integration.security.nats_attacks import (
    ROLES,
    Session,
    connect,
    delete_and_purge_directly,
    delete_by_reflection,
    forge_by_reflection,
    legitimate_api,
    legitimate_projector,
    overwrite_judge_bundle,
    provision,
    publish_foreign_events,
    runner_logins_are_gone,
)

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]

PASSWORDS = {user: f"pw-{user}" for user in role_users()}


@pytest.fixture
async def deployed_cluster(tmp_path: Path) -> AsyncIterator[LocalCluster]:
    with LocalCluster(
        tmp_path / "cluster", size=3, extra_config=render_permissions(PASSWORDS)
    ) as c:
        yield c


async def test_every_attack_is_refused_on_the_cluster(deployed_cluster: LocalCluster) -> None:
    """On R3 streams, as the api and the projector, through each node: no forged event, no
    stream deleted or purged, no judge bundle touched by the API, no foreign event type, no
    runner login; and each role's own work goes through."""
    urls = deployed_cluster.urls
    async with provision(",".join(urls), PASSWORDS, replicas=3) as api_log:
        sessions: list[Session] = []
        try:
            for i, role in enumerate(ROLES):
                url = urls[i % len(urls)]
                admin = await connect(urls[-1], "admin", PASSWORDS["admin"])
                sessions.append(admin)
                for attack in (
                    forge_by_reflection,
                    delete_by_reflection,
                    delete_and_purge_directly,
                    publish_foreign_events,
                ):
                    attacker = await connect(url, role, PASSWORDS[role])
                    sessions.append(attacker)
                    await attack(attacker, admin)
            api = await connect(urls[0], "api", PASSWORDS["api"])
            sessions.append(api)
            await overwrite_judge_bundle(api, sessions[0], api_log)
            await runner_logins_are_gone(urls[1], PASSWORDS)
            await legitimate_api(urls[2], PASSWORDS, sessions[0])
            await legitimate_projector(urls[0], PASSWORDS, api_log)
        finally:
            for session in sessions:
                await session.nc.close()
