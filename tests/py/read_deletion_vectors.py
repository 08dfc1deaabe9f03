#!/usr/bin/env python3
"""Decode the deletion vectors of a Puffin file with pyiceberg (the independent reader).

Usage: read_deletion_vectors.py PUFFIN_FILE

Prints one JSON document: the footer's blobs (type, fields, snapshot id and sequence number,
offset, length, compression, properties) and, per referenced data file, the deleted positions
pyiceberg decodes from them.
"""
import json
import sys

from pyiceberg.table.deletion_vector import deletion_vectors_from_puffin_file
from pyiceberg.table.puffin import PuffinFile


def main():
    path = sys.argv[1].removeprefix("file://")
    with open(path, "rb") as f:
        puffin = PuffinFile(f.read())
    blobs = [
        {
            "type": b.type,
            "fields": b.fields,
            "snapshot_id": b.snapshot_id,
            "sequence_number": b.sequence_number,
            "offset": b.offset,
            "length": b.length,
            "compression": b.compression_codec,
            "properties": b.properties,
        }
        for b in puffin.footer.blobs
    ]
    vectors = {
        dv.referenced_data_file: [int(p) for p in dv.to_vector().to_pylist()]
        for dv in deletion_vectors_from_puffin_file(puffin)
    }
    json.dump({"blobs": blobs, "vectors": vectors}, sys.stdout)


if __name__ == "__main__":
    main()
