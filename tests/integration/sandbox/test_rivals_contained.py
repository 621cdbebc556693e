"""A side-by-side run's workers through the real judge: contained, alike, and apart.

The candidate, the incumbent and the reference each run in a worker the runner starts; these
tests attempt, through the real sandbox and judge, what issue 31 found: a helper made after
`unshare()` that runs while the rivals are timed, reading one's role from what a worker can
observe, and passing a bit from one worker to another.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kz_runner.backends import SandboxBackend
from kz_runner.execute import TaskOutcome
from kz_testing.cheats import HONEST, JUDGE
from kz_testing.containment import COVERT, ESCAPE, OBSERVER, survivors

pytestmark = pytest.mark.integration

JudgePackage = Callable[..., TaskOutcome]  # the `judge_package` fixture of conftest.py
ROLES = ("candidate", "incumbent", "reference")
CHANNELS = ("tmp", "dev_shm", "home", "abstract_socket", "sysv_shm", "sysv_msg", "posix_mq")


@pytest.fixture(autouse=True)
def _no_group_left(sandbox: SandboxBackend) -> Iterator[None]:
    """After each test every cgroup the task's steps had is empty and gone (a group is
    removed only once nothing is left in it)."""
    yield
    assert sandbox.hierarchy is None or sandbox.hierarchy.live == set()


def _workers(outcome: TaskOutcome) -> dict[str, str]:
    """Each worker's output in the task's log, by implementation name."""
    parts = re.split(r"^== worker (\w+) ==$", outcome.log.decode(errors="replace"), flags=re.M)
    return {parts[i]: parts[i + 1].split("\n== ", 1)[0] for i in range(1, len(parts) - 1, 2)}


def _flags(outcome: TaskOutcome) -> set[str]:
    assert outcome.result is not None, outcome.log.decode()[-4000:]
    return {flag["code"] for flag in outcome.result.get("flags", [])}


def test_an_unshare_helper_is_refused_and_its_fork_is_seen(judge_package: JudgePackage) -> None:
    """`unshare(CLONE_NEWUSER|CLONE_NEWPID)` fails (EPERM) and the helper forked anyway is in
    the worker's cgroup: counted (extra_processes) and its CPU seen; the honest control run in
    the same test is accepted with no flag."""
    honest = judge_package(JUDGE, {"kernel.py": HONEST})
    assert honest.reason == "accepted" and _flags(honest) == set(), honest.log.decode()[-3000:]
    outcome = judge_package(JUDGE, {"kernel.py": HONEST + ESCAPE})
    assert "TRIED escape_unshare -1 1" in _workers(outcome)["candidate"], outcome.log.decode()
    assert "extra_processes" in _flags(outcome)


def _normalised(observed: dict[str, Any], uid: int) -> dict[str, str]:
    """What a worker saw, less what only its start order decides: its uid (drawn at random),
    mount ids and anonymous device numbers, its folder's random token, counters that move."""
    moving = ("Vm", "Rss", "Hugetlb", "voluntary_ctxt", "nonvoluntary_ctxt", "SigQ")
    seen = dict(observed)
    seen["mountinfo"] = [
        " ".join(["ID", "ID", *line.split()[2:]]) for line in seen["mountinfo"].splitlines()
    ]
    seen["status"] = [ln for ln in seen["status"].splitlines() if not ln.startswith(moving)]
    normalised = {}
    for key, value in seen.items():
        text = json.dumps(value, sort_keys=True).replace(str(uid), "UID")
        text = re.sub(r"\b0:\d+\b", "0:N", text)
        normalised[key] = re.sub(r"/[0-9a-f]{16}/", "/TOKEN/", text)
    return normalised


def test_every_role_observes_the_same(judge_package: JudgePackage, worker_id: str) -> None:
    """The same source as candidate, incumbent and reference: uid, groups, cwd, its src/ with
    every stat field a worker could tell a role by, environment, hostname, /proc/self/status,
    cgroup, mountinfo and limits come out the same in each, uids aside, which are distinct
    and drawn from the backend's range."""
    source = {"kernel.py": HONEST + OBSERVER}
    outcome = judge_package(JUDGE, source, incumbent=source, reference=source)
    workers = _workers(outcome)
    seen = {}
    for role in ROLES:
        line = next((ln for ln in workers[role].splitlines() if ln.startswith("OBSERVED ")), "")
        assert line, outcome.log.decode()[-4000:]
        seen[role] = json.loads(line.removeprefix("OBSERVED "))
    uids = {role: seen[role]["uid"][0] for role in ROLES}
    lane = int(worker_id.removeprefix("gw")) if worker_id.startswith("gw") else 0
    assert len(set(uids.values())) == 3
    assert all(63000 - 100 * lane <= uid < 63000 - 100 * lane + 32 for uid in uids.values())
    assert "3" in seen["candidate"]["fds"]  # the channel
    assert "KZ_CHANNEL_FD=3" in seen["candidate"]["environ"]
    assert seen["candidate"]["cgroup"].strip().splitlines()[-1] == "0::/"
    assert survivors(uids.values()) == []
    normalised = {role: _normalised(seen[role], uids[role]) for role in ROLES}
    for key, value in normalised["candidate"].items():
        assert value == normalised["incumbent"][key] == normalised["reference"][key], key


def test_no_bit_passes_between_two_workers(judge_package: JudgePackage) -> None:
    """The candidate leaves a mark in every place two processes could share (files in /tmp,
    /dev/shm and HOME, an abstract socket, SysV memory and queues, a POSIX queue) and reads
    each back itself; the incumbent looks for each at import and in every call: it finds
    none, each worker having its own tmpfs, HOME, network and IPC namespaces."""
    outcome = judge_package(
        JUDGE,
        {"kernel.py": HONEST + "ROLE = 'send'\n" + COVERT},
        incumbent={"kernel.py": HONEST + "ROLE = 'receive'\n" + COVERT},
    )
    workers = _workers(outcome)
    sender, receiver = workers["candidate"], workers["incumbent"]
    for channel in CHANNELS:
        assert f"TRIED covert_{channel} send" in sender, outcome.log.decode()[-4000:]
        assert f"TRIED covert_{channel} receive" in receiver, outcome.log.decode()[-4000:]
        assert f"RECEIVED covert_{channel}" not in receiver
    # Each channel the sender could use works within one worker, so the check is real.
    usable = {c for c in CHANNELS if f"SELF covert_{c}" in sender}
    assert usable >= {"tmp", "home", "abstract_socket", "sysv_shm", "sysv_msg", "posix_mq"}
