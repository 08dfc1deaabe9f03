"""Record encoding throughput of pyodps's writer on the rows of
shared/tunnel-codec/examples/encode_bench.rs, for bench/tunnel_encode.sh.

Usage: python tunnel_encode_pyodps.py [ROWS] [OUT]
Needs pyodps with its C extensions (and pandas). Builds ROWS rows with the same splitmix64 recipe as
the Rust example, times odps.tunnel.io.writer.BaseRecordWriter (the C writer) writing them into
BytesIO (best of 3), prints `records_per_sec=...`, and writes the block to OUT.
"""
import datetime as dt
import io
import sys
import time
from decimal import Decimal

import pandas as pd
from odps import options
from odps.models import Record, TableSchema
from odps.tunnel.io import writer as W

options.local_timezone = False  # DATETIME / TIMESTAMP as UTC, like the Rust side
# Record validation would otherwise try to utf-8 decode the random BINARY payloads; with this,
# STRING values are held as utf-8 bytes, which the writer copies as they are (same wire bytes).
options.tunnel.string_as_binary = True

SCHEMA = [
    ("id", "bigint"),
    ("user_id", "bigint"),
    ("score", "double"),
    ("flag", "boolean"),
    ("name", "string"),
    ("created", "datetime"),
    ("ts", "timestamp"),
    ("amount", "decimal(18,4)"),
    ("payload", "binary"),
    ("tags", "array<bigint>"),
]

M64 = (1 << 64) - 1
EPOCH = dt.datetime(1970, 1, 1)


class SplitMix:
    def __init__(self, seed):
        self.s = seed

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)


def row(i, g):
    # Same draws, same order as row() in encode_bench.rs.
    user_id = g.next() % 1_000_000_000
    score = (g.next() % 1_000_000) / 1000.0
    flag = g.next() & 1 == 1
    n = g.next() % 100_000
    name = f"user_{n}_" + "x" * (n % 16)
    created = 1_736_929_845_123 + g.next() % 86_400_000 - 43_200_000
    ts_secs = 1_736_929_845 + g.next() % 1_000_000
    ts_nanos = g.next() % 1_000_000_000
    unscaled = g.next() % 1_000_000_000_000 - 500_000_000_000
    payload = g.next().to_bytes(8, "little") + g.next().to_bytes(8, "little")
    tags = [g.next() % 1000 for _ in range(g.next() % 4)]
    return [
        i,
        user_id,
        None if i % 7 == 3 else score,
        flag,
        None if i % 10 == 0 else name,
        EPOCH + dt.timedelta(milliseconds=created),
        pd.Timestamp(ts_secs * 1_000_000_000 + ts_nanos, unit="ns"),
        Decimal(unscaled).scaleb(-4),
        payload,
        tags,
    ]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    out = sys.argv[2] if len(sys.argv) > 2 else None
    assert W.BaseRecordWriter.__module__.endswith("writer_c"), "pyodps C writer not loaded"
    schema = TableSchema.from_lists([c for c, _ in SCHEMA], [t for _, t in SCHEMA])
    g = SplitMix(0x0F10E)
    records = [Record(schema=schema, values=row(i, g)) for i in range(n)]

    best, block = float("inf"), None
    for _ in range(3):
        buf = io.BytesIO()
        start = time.perf_counter()
        w = W.BaseRecordWriter(schema, buf)
        for r in records:
            w.write(r)
        w.close()
        best = min(best, time.perf_counter() - start)
        block = buf.getvalue()
    print(f"pyodps: {n} records, {len(block)} bytes, best of 3 {best * 1e3:.1f} ms")
    print(f"records_per_sec={n / best:.0f}")
    if out:
        with open(out, "wb") as f:
            f.write(block)


if __name__ == "__main__":
    main()
