#!/usr/bin/env python3
"""Read an Iceberg table with DuckDB's iceberg extension (the second independent reader).

Usage: duckdb_read.py --metadata METADATA_JSON_LOCATION [--order-by COLUMN]
   or: duckdb_read.py --catalog-db SQLITE_FILE --table NS.TABLE [--catalog NAME] [--order-by COLUMN]
       (the table's current metadata file looked up in a SQL catalog, pyiceberg's layout)

The extensions are loaded from the files of the `duckdb-extension-iceberg` and
`duckdb-extension-avro` packages: nothing is downloaded. Prints one JSON document: the row count
and the rows (values as JSON: timestamps in ISO 8601, bytes in hex).
"""
import argparse
import glob
import json
import os
import sys

import duckdb

from iceberg_read import jsonable


def extension(package, name):
    module = __import__(package)
    base = os.path.dirname(module.__file__)
    wanted = os.path.join(base, "extensions", "v" + duckdb.__version__, name + ".duckdb_extension")
    if os.path.exists(wanted):
        return wanted
    found = glob.glob(os.path.join(base, "extensions", "*", name + ".duckdb_extension"))
    if not found:
        sys.exit(f"{package} has no {name} extension for duckdb {duckdb.__version__}")
    return found[0]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--metadata")
    p.add_argument("--catalog-db")
    p.add_argument("--catalog", default="floe")
    p.add_argument("--table")
    p.add_argument("--order-by")
    a = p.parse_args()
    if a.catalog_db:
        import sqlite3
        namespace, _, name = a.table.rpartition(".")
        row = sqlite3.connect(a.catalog_db).execute(
            "SELECT metadata_location FROM iceberg_tables"
            " WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?",
            (a.catalog, namespace, name),
        ).fetchone()
        if row is None:
            sys.exit(f"no table {a.table} in {a.catalog_db}")
        a.metadata = row[0]
    con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
    con.execute(f"LOAD '{extension('duckdb_extension_avro', 'avro')}'")
    con.execute(f"LOAD '{extension('duckdb_extension_iceberg', 'iceberg')}'")
    if not a.metadata:
        sys.exit("--metadata or --catalog-db with --table is required")
    location = a.metadata.removeprefix("file://")
    query = f"SELECT * FROM iceberg_scan('{location}')"
    if a.order_by:
        query += f" ORDER BY {a.order_by}"
    # Through Arrow: DuckDB's own Python conversion of timestamps with a zone needs pytz.
    rows = [jsonable(r) for r in con.execute(query).fetch_arrow_table().to_pylist()]
    json.dump({"count": len(rows), "rows": rows}, sys.stdout)


if __name__ == "__main__":
    main()
