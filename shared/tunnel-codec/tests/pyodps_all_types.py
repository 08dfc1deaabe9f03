"""Print the hex of a block pyodps's C writer makes of two rows covering the types the vector file
does not (for `all_other_types_match_pyodps` in tests/pyodps_cross_check.rs).

Run: /root/.cache/floe/venv/bin/python pyodps_all_types.py   (venv with pyodps 0.13.2 and pandas).
"""
import datetime as dt
import io
from decimal import Decimal

import pandas as pd
from odps import options
from odps.models import Record, TableSchema
from odps.tunnel.io import writer as W

options.local_timezone = False
COLUMNS = [
    ("t", "tinyint"),
    ("s", "smallint"),
    ("i", "int"),
    ("f", "float"),
    ("d", "date"),
    ("v", "varchar(10)"),
    ("c", "char(4)"),
    ("ntz", "timestamp_ntz"),
    ("iv", "interval_day_time"),
    ("j", "json"),
    ("big", "decimal(38,10)"),
    ("arr", "array<string>"),
    ("m", "map<string,bigint>"),
    ("st", "struct<a:int,b:array<double>>"),
]
ROWS = [
    [
        5, -300, 70000, 1.5, dt.date(2025, 1, 15), "h\u00e9llo", "ab",
        pd.Timestamp("1969-12-31 23:59:59.25"), pd.Timedelta(seconds=-1.5), {"a": [1, 2]},
        Decimal("-12345678901234567890.0123456789"), ["x", None, "yz"], {"k1": 1, "k2": None},
        (7, [0.5, None]),
    ],
    [
        -128, None, None, -0.25, dt.date(1960, 3, 1), None, None, None,
        pd.Timedelta(days=3, seconds=5, nanoseconds=7), None, None, [], {}, (None, None),
    ],
]
assert W.BaseRecordWriter.__module__.endswith("writer_c")
schema = TableSchema.from_lists([c for c, _ in COLUMNS], [t for _, t in COLUMNS])
buf = io.BytesIO()
w = W.BaseRecordWriter(schema, buf)
for r in ROWS:
    w.write(Record(schema=schema, values=r))
w.close()
print(buf.getvalue().hex())
