"""Read an Iceberg table from its metadata file on an S3 endpoint with pyiceberg: the independent
reader for tables of catalogs pyiceberg cannot open here (S3 Tables on moto).

Usage: read_static_table.py METADATA_LOCATION S3_ENDPOINT ACCESS_KEY SECRET_KEY REGION COLUMN
Prints one JSON line: {"rows", "snapshots", "values": [COLUMN of every row], "commit_ids"}.
"""

import json
import sys

from pyiceberg.table import StaticTable


def main() -> None:
    location, endpoint, key, secret, region, column = sys.argv[1:7]
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
    commit_ids = [
        s.summary.additional_properties.get("floe.commit-id")
        for s in table.metadata.snapshots
        if s.summary is not None
    ]
    print(
        json.dumps(
            {
                "rows": data.num_rows,
                "snapshots": len(table.metadata.snapshots),
                "values": data.column(column).to_pylist(),
                "commit_ids": commit_ids,
            },
            default=str,
        )
    )


if __name__ == "__main__":
    main()
