#!/usr/bin/env python3
"""The baseline floe's benchmark compares with: pyarrow reads NDJSON, pyiceberg appends it to a
table of a SqlCatalog (one append per run, like one floe commit).

Usage: pyiceberg_baseline.py --warehouse DIR --table NS.NAME FILE [FILE ...]
Prints `rows=N wall_s=S peak_rss_kb=K` (peak RSS of this process, from getrusage).
"""
import argparse
import os
import resource
import time

t0 = time.monotonic()

import pyarrow as pa  # noqa: E402
import pyarrow.json as pj  # noqa: E402
from pyiceberg.catalog.sql import SqlCatalog  # noqa: E402
from bench_schema import ARROW_SCHEMA as arrow_schema, SCHEMA as schema  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--warehouse", required=True)
p.add_argument("--table", required=True)
p.add_argument("files", nargs="+")
a = p.parse_args()

os.makedirs(a.warehouse, exist_ok=True)
catalog = SqlCatalog(
    "bench",
    uri=f"sqlite:///{os.path.abspath(a.warehouse)}/catalog.db",
    warehouse=f"file://{os.path.abspath(a.warehouse)}",
)
ns, name = a.table.split(".", 1)
try:
    catalog.create_namespace(ns)
except Exception:
    pass
try:
    table = catalog.load_table(a.table)
except Exception:
    table = catalog.create_table(a.table, schema=schema)

parse = pj.ParseOptions(explicit_schema=arrow_schema)
tables = [pj.read_json(f, parse_options=parse) for f in a.files]
data = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
# pyarrow reads every JSON column as nullable; the table says id is required.
data = data.cast(arrow_schema)
table.append(data)
rows = data.num_rows
wall = time.monotonic() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"rows={rows} wall_s={wall:.3f} peak_rss_kb={peak}")
