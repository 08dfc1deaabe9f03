#!/usr/bin/env python3
"""The reader's side of the load benchmark: when did each object's rows become visible?

Polls an Iceberg REST table with pyiceberg (one `load_table` every --interval seconds) and notes
the wall-clock time each new snapshot was first seen, until the table holds --rows rows or
--timeout passes. Then it reads, snapshot by snapshot, the `id` column of the data files each
snapshot added, and maps every id to its object (id // --rows-per-object).

Usage: load_watch.py --rest URI --token T --prefix P --table NS.NAME --rows N --rows-per-object R
Prints one JSON document: {"first_seen": {object: unix_seconds}, "snapshots": n, "polls": n}.
"""
import argparse
import json
import sys
import time

import pyarrow.parquet as pq
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NoSuchTableError

p = argparse.ArgumentParser()
p.add_argument("--rest", required=True)
p.add_argument("--token", required=True)
p.add_argument("--prefix", required=True)
p.add_argument("--table", required=True)
p.add_argument("--rows", type=int, required=True)
p.add_argument("--rows-per-object", type=int, required=True)
p.add_argument("--interval", type=float, default=0.1)
p.add_argument("--timeout", type=float, default=600.0)
a = p.parse_args()

catalog = RestCatalog("watch", uri=a.rest, token=a.token, prefix=a.prefix)
seen = []  # (snapshot id, first seen)
polls = 0
deadline = time.time() + a.timeout
while time.time() < deadline:
    polls += 1
    try:
        table = catalog.load_table(a.table)
    except NoSuchTableError:
        time.sleep(a.interval)
        continue
    snap = table.current_snapshot()
    if snap is not None and (not seen or seen[-1][0] != snap.snapshot_id):
        seen.append((snap.snapshot_id, time.time()))
        if int(snap.summary["total-records"]) >= a.rows:
            break
    time.sleep(a.interval)
else:
    print(f"the table did not reach {a.rows} rows within {a.timeout} s", file=sys.stderr)
    sys.exit(1)

first_seen = {}
known = set()
for snapshot_id, at in seen:
    files = {t.file.file_path for t in table.scan(snapshot_id=snapshot_id).plan_files()}
    for path in sorted(files - known):
        with table.io.new_input(path).open() as f:
            ids = pq.read_table(f, columns=["id"]).column("id").to_pylist()
        for obj in {i // a.rows_per_object for i in ids}:
            first_seen.setdefault(obj, at)
    known |= files
json.dump({"first_seen": first_seen, "snapshots": len(seen), "polls": polls}, sys.stdout)
