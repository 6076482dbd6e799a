"""The deployment files say what issue 18 asks of them (no Docker daemon needed): every
service restarts, PostgreSQL, Redis, web and each worker have healthchecks (a worker pings
its own node), services wait for healthy dependencies, Redis keeps an append-only file on a
volume, the worker image has g++ and valgrind, and the README runs the CPU smoke specs in it."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())  # merge keys (<<) resolved
SERVICES = COMPOSE["services"]
WORKERS = [name for name in SERVICES if name.startswith("worker-")]
DURATION = re.compile(r"^(\d+(ms|s|m|h))+$")


def test_the_expected_services_exist():
    assert {"postgres", "redis", "web", "beat", "worker-control", "worker-cpu",
            "worker-cuda0"} <= set(SERVICES)


@pytest.mark.parametrize("name", list(SERVICES))
def test_every_service_restarts(name):
    assert SERVICES[name].get("restart") in ("always", "unless-stopped")


@pytest.mark.parametrize("name", ["postgres", "redis", "web", *WORKERS])
def test_healthchecks(name):
    check = SERVICES[name]["healthcheck"]
    assert check["test"][0] in ("CMD", "CMD-SHELL") and len(check["test"]) > 1
    for key in ("interval", "timeout"):
        assert DURATION.match(check[key]), (key, check[key])
    assert int(check["retries"]) >= 1
    probe = " ".join(check["test"][1:])
    expected = {"postgres": "pg_isready", "redis": "redis-cli ping", "web": "urlopen"}
    assert expected.get(name, "inspect ping") in probe


@pytest.mark.parametrize("name", WORKERS)
def test_a_worker_pings_its_own_node(name):
    command = shlex.split(SERVICES[name]["command"])
    node = command[command.index("-n") + 1]
    assert node.endswith("@%h")
    probe = SERVICES[name]["healthcheck"]["test"][1]
    # $$ is compose's escape of $: the shell in the container expands $HOSTNAME, which %h is
    assert f"-d {node.removesuffix('%h')}$$HOSTNAME" in probe
    assert SERVICES[name]["build"]["target"] == "worker"


def test_services_wait_for_healthy_dependencies():
    def waits_for(name):
        return {dependency: condition["condition"]
                for dependency, condition in SERVICES[name].get("depends_on", {}).items()}

    assert waits_for("web") == {"postgres": "service_healthy", "redis": "service_healthy"}
    for name in ["beat", *WORKERS]:
        assert waits_for(name) == {"web": "service_healthy"}  # migrations done


def test_redis_keeps_an_append_only_file_on_a_volume():
    redis = SERVICES["redis"]
    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert "--appendfsync" in command
    volume, _, target = redis["volumes"][0].partition(":")
    assert target == "/data" and volume in COMPOSE["volumes"]
    volume, _, target = SERVICES["postgres"]["volumes"][0].partition(":")
    assert target == "/var/lib/postgresql/data" and volume in COMPOSE["volumes"]


def test_services_share_one_environment():
    """Time limits travel with each message: web, beat and workers must agree."""
    environment = SERVICES["web"]["environment"]
    for name in ["beat", *WORKERS]:
        assert SERVICES[name]["environment"].items() >= environment.items()
    assert SERVICES["worker-cuda0"]["environment"]["CUDA_VISIBLE_DEVICES"] == "0"


def test_the_worker_image_has_a_compiler_and_valgrind():
    stages = re.split(r"^FROM ", (ROOT / "Dockerfile").read_text(), flags=re.M)
    worker = next(stage for stage in stages if stage.startswith("base AS worker"))
    installs = re.search(r"apt-get install[^\n]*", worker).group(0).split()
    assert "g++" in installs and "valgrind" in installs
    assert '".[web,runner]"' in worker
    assert all("ENV PYTHONPATH=/app" in stage for stage in stages
               if stage.startswith(("base AS web", "base AS worker")))


def test_the_readme_runs_every_cpu_smoke_spec_in_the_worker_image():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"docker build --target worker.*?```", readme, flags=re.S).group(0)
    loop = re.search(r"for spec in ([\w ]+); do", block).group(1).split()
    on_cpu = {path.stem for path in (ROOT / "fixtures/specs").glob("*.yml")
              if path.stem.endswith("_cpu") or path.stem == "cpu_small"}
    assert set(loop) == on_cpu
    assert "docker run --rm" in block and "benchsite-worker" in block
    assert "python -m runner run fixtures/specs/$spec.yml" in block
