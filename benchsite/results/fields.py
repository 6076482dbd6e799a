"""Columns of the results table: a list of floats (`double precision[]` on PostgreSQL, JSON
text elsewhere), and a JSON column read by orjson.

JSON columns cannot hold the NaN and Infinity that real benchmark values contain, and
PostgreSQL arrays keep every repetition compact and usable from SQL.
"""

import json

import orjson
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


class OrjsonField(models.JSONField):
    """A JSONField read by orjson: a result's extra_info can carry every timing block of its
    measurement, and the json module took 0.2 ms a result to read one (33 ms of a 170 ms run
    page at 10M results). Text orjson does not read (NaN, which SQLite may hold) falls back
    to the json module, as does a field with a decoder of its own; an integer past 64 bits
    reads as a float (the stored text and the upload's raw payload keep its digits)."""

    def from_db_value(self, value, expression, connection):
        if isinstance(value, str) and self.decoder is None:
            try:
                return orjson.loads(value)
            except orjson.JSONDecodeError:
                pass
        return super().from_db_value(value, expression, connection)
