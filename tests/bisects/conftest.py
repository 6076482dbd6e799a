"""A throwaway git repository (runner.sources.demo: 25 commits, a build broken for two
commits, a slowdown at commit 17) and a Source for it, in command mode."""

from __future__ import annotations

import pytest

from runner.sources import demo


@pytest.fixture(scope="session")
def demo_repo(tmp_path_factory):
    """(path, shas oldest first)"""
    path = tmp_path_factory.mktemp("demo") / "repo"
    return path, demo.make(path)


@pytest.fixture
def source(db, demo_repo, tmp_path, settings):
    from benchsite.access.models import AllowedCodeModule
    from benchsite.bisects.models import Source

    settings.BENCH_SOURCE_CACHE = str(tmp_path / "sources")
    AllowedCodeModule.objects.create(module="demopkg")
    return Source.objects.create(name="demo", location=str(demo_repo[0]), repo="demo/pkg",
                                 web_url="https://git.example/demo", mode="command",
                                 build_command=demo.BUILD_COMMAND)
