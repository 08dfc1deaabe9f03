"""Full-table scan time with pyiceberg: the median of --runs scans of a table of a SQL catalog.

Prints one JSON object: {"rows": N, "median_s": S, "runs": [..]}.
"""
import argparse
import json
import statistics
import time

from pyiceberg.catalog.sql import SqlCatalog


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--uri", required=True, help="sqlite:///path/catalog.db")
    ap.add_argument("--warehouse", required=True, help="file:///path/warehouse")
    ap.add_argument("--table", required=True)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    catalog = SqlCatalog("floe", uri=args.uri, warehouse=args.warehouse)
    times = []
    rows = 0
    for _ in range(args.runs):
        started = time.perf_counter()
        table = catalog.load_table(args.table)
        rows = table.scan().to_arrow().num_rows
        times.append(time.perf_counter() - started)
    print(json.dumps({"rows": rows, "median_s": statistics.median(times), "runs": times}))


if __name__ == "__main__":
    main()
