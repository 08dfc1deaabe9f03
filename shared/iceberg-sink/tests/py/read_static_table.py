"""Read an Iceberg table from its metadata file on an S3 endpoint with pyiceberg.

Usage: read_static_table.py METADATA_LOCATION S3_ENDPOINT ACCESS_KEY SECRET_KEY REGION
Prints one JSON line: {"rows", "snapshots", "event_ids"}.
"""

import json
import sys

from pyiceberg.table import StaticTable


def main() -> None:
    location, endpoint, key, secret, region = sys.argv[1:6]
    table = StaticTable.from_metadata(
        location,
        properties={
            "s3.endpoint": endpoint,
            "s3.access-key-id": key,
            "s3.secret-access-key": secret,
            "s3.region": region,
            "s3.force-virtual-addressing": "false",
        },
    )
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
