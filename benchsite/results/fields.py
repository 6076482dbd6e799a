"""A list-of-floats column: `double precision[]` on PostgreSQL, JSON text elsewhere.

JSON columns cannot hold the NaN and Infinity that real benchmark values contain, and
PostgreSQL arrays keep every repetition compact and usable from SQL.
"""

import json

from django.db import models


class FloatListField(models.Field):
    description = "A list of floats (NaN and infinities allowed)"

    # The one column whose type differs by database (PostgreSQL has arrays, SQLite does not),
    # so its adaptation does too; ingestion's other differences live in ingest.store.
    def db_type(self, connection):
        return "double precision[]" if connection.vendor == "postgresql" else "text"

    def from_db_value(self, value, expression, connection):
        if value is None or isinstance(value, list):
            return value
        return json.loads(value)

    def to_python(self, value):
        if value is None or isinstance(value, list):
            return value
        return json.loads(value)

    def get_db_prep_value(self, value, connection, prepared=False):
        if value is None:
            return None
        floats = [float(item) for item in value]
        return floats if connection.vendor == "postgresql" else json.dumps(floats)

    def value_to_string(self, obj):
        return json.dumps(self.value_from_object(obj))
