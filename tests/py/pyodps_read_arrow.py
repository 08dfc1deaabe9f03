"""Decode a MaxCompute tunnel upload block in the Arrow format with pyodps's own reader.

Usage: pyodps_read_arrow.py BODY_FILE 'name:type;name:type;...'
Prints one JSON object per row: the values as pyodps's `ArrowStreamReader` hands them to
pyarrow, datetimes and dates in ISO form, decimals as text.
"""
import datetime as dt
import decimal
import io
import json
import sys

import pyarrow as pa
from odps.models import TableSchema, Column
from odps.tunnel.io.reader import ArrowStreamReader
from odps.tunnel.io.types import odps_schema_to_arrow_schema


class Body(io.BytesIO):
    def __len__(self):
        return len(self.getbuffer())


def plain(v):
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.timezone.utc)
        return v.astimezone(dt.timezone.utc).isoformat()
    if isinstance(v, (dt.date, decimal.Decimal)):
        return str(v)
    if isinstance(v, bytes):
        return v.hex()
    return v


def main():
    body = open(sys.argv[1], "rb").read()
    columns = [Column(name=n, type=t) for n, t in (c.split(":", 1) for c in sys.argv[2].split(";"))]
    schema = odps_schema_to_arrow_schema(TableSchema(columns=columns))
    table = pa.ipc.open_stream(ArrowStreamReader(Body(body), schema)).read_all()
    for row in table.to_pylist():
        print(json.dumps({k: plain(v) for k, v in row.items()}, ensure_ascii=False))


main()
