#!/usr/bin/env python3
"""The baseline of the load benchmark: pyiceberg run the way floe's ingest function runs, as one
warm instance handling one batch of object events per invocation.

Each line on stdin is an invocation, {"keys": [...]}: the objects are read from the S3 endpoint
with pyarrow, parsed as NDJSON with pyarrow and appended to the table with pyiceberg (one append,
so one commit, per invocation: pyiceberg has no separate commit step). One line of JSON answers
each invocation, {"rows": n}; at end of input the last line is {"peak_rss_kb": k}.

Usage: load_pyiceberg.py --rest URI --token T --prefix P --table NS.NAME
                         --s3-endpoint URL --access-key K --secret-key S --bucket B
"""
import argparse
import json
import resource
import sys

import pyarrow as pa
import pyarrow.json as pj
from pyarrow import fs
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError

from bench_schema import ARROW_SCHEMA as arrow_schema, SCHEMA as schema

p = argparse.ArgumentParser()
p.add_argument("--rest", required=True)
p.add_argument("--token", required=True)
p.add_argument("--prefix", required=True)
p.add_argument("--table", required=True)
p.add_argument("--s3-endpoint", required=True)
p.add_argument("--access-key", required=True)
p.add_argument("--secret-key", required=True)
p.add_argument("--bucket", required=True)
a = p.parse_args()

scheme, host = a.s3_endpoint.split("://", 1)
s3 = fs.S3FileSystem(
    access_key=a.access_key,
    secret_key=a.secret_key,
    endpoint_override=host,
    scheme=scheme,
    region="us-east-1",
    force_virtual_addressing=False,
)
catalog = RestCatalog("baseline", uri=a.rest, token=a.token, prefix=a.prefix)
ns = a.table.split(".", 1)[0]
try:
    catalog.create_namespace(ns)
except NamespaceAlreadyExistsError:
    pass
try:
    table = catalog.load_table(a.table)
except NoSuchTableError:
    table = catalog.create_table(a.table, schema=schema)
parse = pj.ParseOptions(explicit_schema=arrow_schema)
print(json.dumps({"ready": True}), flush=True)

for line in sys.stdin:
    keys = json.loads(line)["keys"]
    parts = []
    for key in keys:
        with s3.open_input_stream(f"{a.bucket}/{key}") as f:
            parts.append(pj.read_json(f, parse_options=parse))
    data = pa.concat_tables(parts).cast(arrow_schema)
    table.append(data)
    print(json.dumps({"rows": data.num_rows}), flush=True)

print(json.dumps({"peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}), flush=True)
