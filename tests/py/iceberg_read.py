#!/usr/bin/env python3
"""Read an Iceberg table with pyiceberg (the independent reader) and print what floe's tests check.

Usage: iceberg_read.py --catalog NAME --uri SQLITE_URI --warehouse URL --table NS.TABLE [--max-rows N]
   or: iceberg_read.py --rest URI --token TOKEN [--rest-warehouse W] [--prefix P] --table NS.TABLE

Prints one JSON document: row count, rows (values as JSON: timestamps in ISO 8601, bytes in hex),
snapshots with their summaries (and row lineage), the partition spec, the data files with their
partitions and the delete files applied to them, the format version, and the refs (each branch or
tag other than main read at its snapshot).
"""
import argparse
import datetime
import decimal
import json
import sys


def jsonable(v):
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return v.isoformat()
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    return v


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--catalog", default="floe")
    p.add_argument("--uri")
    p.add_argument("--warehouse")
    p.add_argument("--rest")
    p.add_argument("--token")
    p.add_argument("--rest-warehouse")
    p.add_argument("--prefix")
    p.add_argument("--table", required=True, action="append", help="repeat to read several tables")
    p.add_argument("--max-rows", type=int, default=10000)
    a = p.parse_args()
    if a.rest:
        from pyiceberg.catalog.rest import RestCatalog
        props = {"uri": a.rest}
        if a.token:
            props["token"] = a.token
        if a.rest_warehouse:
            props["warehouse"] = a.rest_warehouse
        if a.prefix:
            props["prefix"] = a.prefix
        catalog = RestCatalog(a.catalog, **props)
    else:
        from pyiceberg.catalog.sql import SqlCatalog
        catalog = SqlCatalog(a.catalog, uri=a.uri, warehouse=a.warehouse)
    if len(a.table) == 1:
        json.dump(read(catalog, a.table[0], a.max_rows), sys.stdout)
    else:
        json.dump({t: read(catalog, t, a.max_rows) for t in a.table}, sys.stdout)


def read(catalog, name, max_rows):
    table = catalog.load_table(name)
    arrow = table.scan().to_arrow()
    rows = arrow.slice(0, max_rows).to_pylist()
    snapshots = [
        {
            "id": s.snapshot_id,
            "parent": s.parent_snapshot_id,
            "operation": s.summary.operation.value if s.summary else None,
            "first_row_id": getattr(s, "first_row_id", None),
            "added_rows": getattr(s, "added_rows", None),
            "summary": dict(s.summary.additional_properties) if s.summary else {},
        }
        for s in table.metadata.snapshots
    ]
    files = []
    deletes = []
    for task in table.scan().plan_files():
        df = task.file
        for d in task.delete_files:
            deletes.append({
                "path": d.file_path,
                "format": str(d.file_format.value).lower(),
                "data_file": df.file_path,
                "referenced_data_file": getattr(d, "referenced_data_file", None),
                "content_offset": getattr(d, "content_offset", None),
                "content_size_in_bytes": getattr(d, "content_size_in_bytes", None),
                "record_count": d.record_count,
            })
        files.append({
            "path": df.file_path,
            "record_count": df.record_count,
            "partition": jsonable(df.partition.__dict__.get("_data", list(df.partition))) if df.partition is not None else None,
            "lower_bounds": sorted(df.lower_bounds.keys()) if df.lower_bounds else [],
        })
    # Every branch and tag besides main, read at its snapshot.
    refs = {name: r.snapshot_id for name, r in table.metadata.refs.items()}
    branches = {}
    for name, snapshot_id in refs.items():
        if name != "main":
            at = table.scan(snapshot_id=snapshot_id).to_arrow()
            branches[name] = {"count": at.num_rows, "rows": jsonable(at.slice(0, max_rows).to_pylist())}
    return {
        "count": arrow.num_rows,
        "refs": refs,
        "branches": branches,
        "rows": jsonable(rows),
        "columns": arrow.column_names,
        "schema": str(table.schema()),
        "types": {f.name: str(f.field_type) for f in table.schema().fields},
        "spec": str(table.spec()),
        "snapshots": snapshots,
        "files": files,
        "deletes": deletes,
        "format_version": table.metadata.format_version,
        "next_row_id": getattr(table.metadata, "next_row_id", None),
        "location": table.location(),
    }


if __name__ == "__main__":
    main()
