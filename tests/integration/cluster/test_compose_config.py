"""The deployment files agree with each other and with the tools that read them: the compose
file passes `docker-compose config`, the NATS node configuration passes `nats-server -t`, the
proxy sends to the API replicas, and the images run as a non-root user."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kz_events.cluster import password_env_var, role_users
from kz_events.config import exposure_problems, load_settings
from kz_events.server import find_server_binary

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
ENV_EXAMPLE = DEPLOY / ".env.example"
COMPOSE_BIN = shutil.which("docker-compose")
needs_compose = pytest.mark.skipif(
    COMPOSE_BIN is None, reason="docker-compose is not installed (Debian package docker-compose)"
)


def env_example() -> dict[str, str]:
    pairs = (line.split("=", 1) for line in ENV_EXAMPLE.read_text().splitlines())
    return {
        k.strip(): v.strip() for k, *v in pairs if k.strip() and not k.startswith("#") for v in v
    }


def compose_config(
    env_file: Path, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    assert COMPOSE_BIN is not None
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}
    env.update(extra_env or {})
    return subprocess.run(
        [COMPOSE_BIN, "-f", str(COMPOSE), "--env-file", str(env_file), "config"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


@pytest.fixture(scope="module")
def resolved() -> dict[str, Any]:
    """The compose file as `docker-compose config` resolves it with the example settings."""
    if COMPOSE_BIN is None:
        pytest.skip("docker-compose is not installed (Debian package docker-compose)")
    done = compose_config(ENV_EXAMPLE)
    assert done.returncode == 0, done.stderr
    config: dict[str, Any] = yaml.safe_load(done.stdout)
    return config


@needs_compose
def test_compose_file_is_accepted_and_has_the_cluster(resolved: dict[str, Any]) -> None:
    """`docker-compose config` accepts the file: three NATS nodes, two APIs, proxy, projector,
    and runners that reserve NVIDIA GPUs."""
    services = resolved["services"]
    assert {"nats-1", "nats-2", "nats-3", "api-1", "api-2", "proxy", "projector"} <= set(services)
    runners = {name: svc for name, svc in services.items() if name.startswith("runner-")}
    assert runners
    for svc in runners.values():
        [device] = svc["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
        workdir = svc["environment"]["KZ_RUNNER_WORKDIR"]
        assert any(mount.split(":")[0] == workdir for mount in svc["tmpfs"])  # scratch in RAM
    for i in (1, 2, 3):
        node = services[f"nats-{i}"]
        assert re.fullmatch(r"nats:2\.(1[1-9]|[2-9]\d)(\.\d+)?(-alpine)?", node["image"])
        assert node["environment"]["KZ_NATS_NODE_NAME"] == f"nats-{i}"


@needs_compose
def test_compose_refuses_to_start_without_passwords(tmp_path: Path) -> None:
    """Without the NATS passwords `docker-compose config` fails and names what is missing."""
    empty = tmp_path / "empty.env"
    empty.write_text("")
    done = compose_config(empty)
    assert done.returncode != 0
    assert "set it in deploy/.env" in done.stderr


@needs_compose
def test_services_connect_as_their_roles(resolved: dict[str, Any]) -> None:
    """Each service's NATS URLs carry a user of the permission model that fits its role, over
    all three nodes; runners have no NATS URL and reach the API with their own key and id."""
    users = set(role_users())
    for name, svc in resolved["services"].items():
        env = svc.get("environment", {})
        if name.startswith("runner-"):
            assert "KZ_NATS_URL" not in env and svc["command"] == ["runner", "--http"]
            assert env["KZ_RUNNER_KEY"] and env["KZ_SERVER_URL"].startswith("http://proxy:")
            continue
        url = env.get("KZ_NATS_URL")
        if url is None:
            continue
        found = re.findall(r"nats://([^:]+):[^@]+@(nats-\d):4222", url)
        assert {host for _, host in found} == {"nats-1", "nats-2", "nats-3"}, name
        [user] = {user for user, _ in found}
        assert user in users
        assert user == ("projector" if name == "projector" else "api")
    runner_ids = [
        svc["environment"]["KZ_RUNNER_ID"]
        for name, svc in resolved["services"].items()
        if name.startswith("runner-")
    ]
    assert len(set(runner_ids)) == len(runner_ids)  # an id is bound to the key that used it first


@needs_compose
def test_apis_start_off_loopback_with_what_compose_sets(resolved: dict[str, Any]) -> None:
    """The API replicas listen on 0.0.0.0 with runner keys that cover the runners' keys,
    submitter tokens and one shared lease secret: their start-up check passes."""
    apis = [svc for svc in resolved["services"].values() if svc.get("command") == ["api"]]
    secrets = set()
    for svc in apis:
        settings = load_settings({k: str(v) for k, v in svc["environment"].items()})
        assert settings.host == "0.0.0.0" and exposure_problems(settings) == []
        secrets.add(settings.lease_secret)
        for name, runner in resolved["services"].items():
            if name.startswith("runner-"):
                key, arch = (
                    runner["environment"]["KZ_RUNNER_KEY"],
                    runner["environment"]["KZ_RUNNER_ARCH"],
                )
                assert arch in settings.runner_keys[key]
    assert len(secrets) == 1


@needs_compose
@pytest.mark.parametrize(
    "missing", ["KZ_RUNNER_KEYS_JSON", "KZ_LEASE_SECRET", "KZ_RUNNER_KEY_SM90"]
)
def test_compose_refuses_to_start_without_runner_keys_or_lease_secret(
    tmp_path: Path, missing: str
) -> None:
    """Without runner keys, a runner's key or the lease secret `docker-compose config` fails
    and names the setting."""
    env = tmp_path / "partial.env"
    env.write_text("".join(f"{k}={v}\n" for k, v in env_example().items() if k != missing))
    done = compose_config(env)
    assert done.returncode != 0
    assert missing in done.stderr and "set it in deploy/.env" in done.stderr


@needs_compose
def test_proxy_sends_to_every_api_replica(resolved: dict[str, Any]) -> None:
    """The nginx upstream lists exactly the API services, on the port they listen on."""
    apis = {
        f"{name}:{svc['environment']['KZ_PORT']}"
        for name, svc in resolved["services"].items()
        if svc.get("command") == ["api"]
    }
    upstream = re.findall(
        r"^\s*server\s+([\w.-]+:\d+)", (DEPLOY / "nginx" / "kz.conf").read_text(), re.M
    )
    assert set(upstream) == apis and len(apis) == 2


def test_env_example_names_every_nats_password() -> None:
    """The example settings hold one password variable per user the permission file uses."""
    wanted = {password_env_var(user) for user in role_users()}
    assert wanted <= set(env_example())


def test_nats_node_config_is_valid_and_durable(tmp_path: Path) -> None:
    """`nats-server -t` accepts the node configuration with its included permissions, and the
    node flushes every write (`sync_interval: always`)."""
    env = {"PATH": os.environ.get("PATH", ""), "KZ_NATS_NODE_NAME": "nats-1", **env_example()}
    conf = DEPLOY / "nats" / "nats-node.conf"
    done = subprocess.run(
        [str(find_server_binary()), "-t", "-c", str(conf)],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^\s*sync_interval:\s*always\s*$", conf.read_text(), re.M)
    missing = {k: v for k, v in env.items() if k != "KZ_NATS_SYS_PASSWORD"}
    done = subprocess.run(
        [str(find_server_binary()), "-t", "-c", str(conf)],
        capture_output=True,
        text=True,
        env=missing,
        timeout=30,
        check=False,
    )
    assert done.returncode != 0 and "KZ_NATS_SYS_PASSWORD" in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("dockerfile", "base"),
    [("Dockerfile.api", "python:3.11-slim"), ("Dockerfile.runner", "nvidia/cuda:")],
)
def test_images_build_from_the_repo_and_run_unprivileged(dockerfile: str, base: str) -> None:
    """Each image starts from its base, copies only paths that exist in the repository, and
    its last `USER` is not root."""
    text = (DEPLOY / dockerfile).read_text()
    args = dict(re.findall(r"^ARG (\w+)=(\S+)", text, re.M))
    [image] = re.findall(r"^FROM (\S+)", text, re.M)
    image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image)
    assert image.startswith(base)
    for sources in re.findall(r"^COPY (.+) \S+$", text, re.M):
        for source in sources.split():
            assert (ROOT / source).exists(), source
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and users[-1] not in {"root", "0"}
    assert (DEPLOY / f"{dockerfile}.dockerignore").is_file()
