"""Print per-type hash values from pyodps's odps.tunnel.hasher, for the table in src/hasher.rs tests.

Run: /root/.cache/floe/venv/bin/python pyodps_hash_cases.py   (venv with pyodps 0.13.2 and pandas).
hash_value() does not wrap decimal(p>18) sums to int32; RecordHasher does, so the Rust table holds
the wrapped values.
"""
import datetime as dt, decimal, pandas as pd
from odps import options
options.local_timezone = False
from odps.tunnel import hasher as H
cases = [
 ("bigint", 0), ("bigint", 1), ("bigint", -1), ("bigint", 9223372036854775807), ("bigint", -9223372036854775808), ("bigint", 1736929845123),
 ("tinyint", -5), ("int", 123456),
 ("double", 1.5), ("double", -0.0), ("double", 3.141592653589793),
 ("float", 1.5), ("float", -2.25),
 ("boolean", True), ("boolean", False),
 ("string", ""), ("string", "hello"), ("string", "\u4e2d\u6587 \u00e9"),
 ("varchar(10)", "abc"),
 ("binary", b"\x00\x01\xff"),
 ("date", dt.date(2025,1,15)), ("date", dt.date(1960,3,1)),
 ("datetime", dt.datetime(2025,1,15,8,30,45,123000)), ("datetime", dt.datetime(1969,12,31,23,59,59,500000)),
 ("timestamp", pd.Timestamp("2025-01-15 08:30:45.123456789")), ("timestamp", pd.Timestamp("2000-02-29 23:59:59")),
 ("interval_day_time", pd.Timedelta(days=3, seconds=5, nanoseconds=7)),
 ("decimal(18,4)", decimal.Decimal("12.3400")), ("decimal(18,4)", decimal.Decimal("-0.0001")),
 ("decimal(18,4)", decimal.Decimal("99999999999999.9999")), ("decimal(18,4)", decimal.Decimal("1.23456")),
 ("decimal(18,4)", decimal.Decimal("-1.23455")), ("decimal(18,4)", decimal.Decimal("0")),
 ("decimal(38,10)", decimal.Decimal("12345678901234567890.0123456789")), ("decimal(38,10)", decimal.Decimal("-1.5")),
 ("decimal(38,18)", decimal.Decimal("99999999999999999999.999999999999999999")),
 ("decimal(10,2)", decimal.Decimal("7")),
]
for t, v in cases:
    print(repr((t, str(v) if not isinstance(v,(bytes,bool,int,float)) else v, H.hash_value("default", t, v), H.hash_value("legacy", t, v))))
