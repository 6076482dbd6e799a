"""The Django validator of repo names (`runner.contract.repos`), for API serializers and
query filters. The problem goes in as a parameter: the value it quotes may hold a '%',
which DRF would read as a format."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from runner.contract.repos import repo_problem


def validate_repo(value: str) -> None:
    if problem := repo_problem(value):
        raise ValidationError("%(problem)s", code="repo", params={"problem": problem})

