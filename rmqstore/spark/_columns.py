"""Spark and Arrow column types of the sources, derived from the layout tables.

Every source declares its schema once, as a Spark DDL string built from the field tables
of :mod:`rmqstore.format.layout` (``"name type, ..."``); the Arrow schema its reader yields
batches in is derived from that same string, so the two can never disagree.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["SPARK_TYPES", "layout_columns", "arrow_schema"]

#: Spark type of each layout field kind (integers signed, as Java's; hosts as "ip:port")
SPARK_TYPES = {"i8": "int", "i16": "int", "i32": "int", "i64": "bigint", "host": "string",
               "blob32": "binary", "str8": "string", "str16": "string"}


def layout_columns(fields) -> list[str]:
    """``"name type"`` Spark DDL columns for layout fields (a layout's ``.fields``, or a selection)."""
    return [f"{f.name} {SPARK_TYPES[f.kind]}" for f in fields]


@lru_cache(maxsize=None)
def arrow_schema(ddl: str):
    """The Arrow schema of a flat Spark DDL string (``"a int, b string, ..."``)."""
    import pyarrow as pa

    types = {"int": pa.int32(), "bigint": pa.int64(), "string": pa.string(), "binary": pa.binary(),
             "boolean": pa.bool_(), "array<string>": pa.list_(pa.string()),
             "map<string,string>": pa.map_(pa.string(), pa.string())}
    fields = []
    for part in ddl.split(", "):
        name, typ = part.split(" ", 1)
        fields.append(pa.field(name, types[typ]))
    return pa.schema(fields)
