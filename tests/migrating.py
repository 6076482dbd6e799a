"""Moving the test database between migrations, for tests of data migrations."""

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(targets):
    """The database migrated to `targets`; the models' historical apps at that state."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def migrate_to_latest() -> None:
    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
