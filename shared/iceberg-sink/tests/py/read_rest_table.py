"""Read an Iceberg table through a REST catalog with pyiceberg and print what it holds.

Usage: read_rest_table.py URI TOKEN PREFIX NAMESPACE.TABLE
Prints one JSON line: {"rows", "snapshots", "event_ids"}.
"""

import json
import sys

from pyiceberg.catalog.rest import RestCatalog


def main() -> None:
    uri, token, prefix, name = sys.argv[1:5]
    catalog = RestCatalog("check", uri=uri, token=token, prefix=prefix)
    table = catalog.load_table(name)
    data = table.scan().to_arrow()
    print(
        json.dumps(
            {
                "rows": data.num_rows,
                "snapshots": len(table.metadata.snapshots),
                "event_ids": data.column("event_id").to_pylist(),
            }
        )
    )


if __name__ == "__main__":
    main()
