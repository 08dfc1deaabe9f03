#!/usr/bin/env python3
"""Golden vectors for the MaxCompute tunnel ARROW upload, produced by pyodps's own code.

Runs the real pyodps path  ODPS -> TableTunnel.create_upload_session -> open_arrow_writer
-> write(batch) x2 -> close -> session.commit, with requests.Session.send replaced by an
in-memory fake server (no network).  Every HTTP request is captured (method, path, query,
headers, body).  Then each captured body is (a) decoded with pyodps's own ArrowStreamReader
(the download-side reader, same framing) and (b) unframed by hand and decoded with plain
pyarrow.ipc.open_stream, and both must equal the input rows.

Run:  venv/bin/python make_arrow_vectors.py   -> tunnel_arrow_upload.json
"""
import base64
import datetime as dt
import decimal
import io
import json
import struct
import sys
from urllib.parse import parse_qsl, urlsplit

import pyarrow as pa
import requests

import odps
from odps import ODPS, options
from odps.crc import Crc32c
from odps.tunnel import TableTunnel
from odps.tunnel.io.reader import ArrowStreamReader
from odps.tunnel.io.stream import CompressOption
from odps.tunnel.io.types import odps_schema_to_arrow_schema

HERE = __file__.rsplit("/", 1)[0] if "/" in __file__ else "."
ENDPOINT = "http://service.example.test/api"
TUNNEL = "http://dt.example.test"
PROJECT, TABLE, UPLOAD_ID = "proj", "t_arrow", "20250115000000000000000000000001"

# MaxCompute table schema as the tunnel returns it in the session JSON ("Schema").
SCHEMA_JSON = {
    "columns": [
        {"name": "id", "type": "bigint", "comment": "", "nullable": True},
        {"name": "name", "type": "string", "comment": "", "nullable": True},
        {"name": "score", "type": "double", "comment": "", "nullable": True},
        {"name": "flag", "type": "boolean", "comment": "", "nullable": True},
        {"name": "dt", "type": "datetime", "comment": "", "nullable": True},
        {"name": "ts", "type": "timestamp", "comment": "", "nullable": True},
        {"name": "amount", "type": "decimal(18,3)", "comment": "", "nullable": True},
        {"name": "day", "type": "date", "comment": "", "nullable": True},
    ],
    "partitionKeys": [{"name": "ds", "type": "string", "comment": ""}],
}
PARTITION = "ds=20250115"

UTC = dt.timezone.utc
BATCH1 = [  # rows as python values; datetimes are UTC instants
    dict(id=1, name="alpha", score=1.5, flag=True, dt=dt.datetime(2025, 1, 15, 8, 30, 0, 123000, UTC),
         ts=dt.datetime(2025, 1, 15, 8, 30, 0, 123456, UTC), amount=decimal.Decimal("12.345"),
         day=dt.date(2025, 1, 15)),
    dict(id=None, name="\u00e9t\u00e9 \u2603", score=None, flag=False, dt=None, ts=None, amount=None, day=None),
    dict(id=-9223372036854775808, name=None, score=-0.0, flag=None,
         dt=dt.datetime(1969, 12, 31, 23, 59, 59, 999000, UTC),
         ts=dt.datetime(1969, 12, 31, 23, 59, 59, 999999, UTC), amount=decimal.Decimal("-0.001"),
         day=dt.date(1969, 12, 31)),
]
BATCH2 = [
    dict(id=9223372036854775807, name="", score=1e300, flag=True,
         dt=dt.datetime(2000, 2, 29, 0, 0, 0, 0, UTC), ts=dt.datetime(2000, 2, 29, 12, 0, 0, 1, UTC),
         amount=decimal.Decimal("999999999999999.999"), day=dt.date(2000, 2, 29)),
    dict(id=42, name="x" * 40, score=2.25, flag=None, dt=None,
         ts=dt.datetime(2025, 6, 1, 0, 0, 0, 0, UTC), amount=decimal.Decimal("0.000"), day=None),
]

# ---------------------------------------------------------------- fake HTTP layer
CAPTURED = []
BLOCKS = set()


def _session_json(status="NORMAL"):
    return {
        "UploadID": UPLOAD_ID, "Status": status,
        "UploadedBlockList": [{"BlockID": b} for b in sorted(BLOCKS)],
        "Schema": SCHEMA_JSON, "MaxFieldSize": 8388608, "QuotaName": "",
    }


def _resp(req, status, body, headers=None):
    r = requests.Response()
    r.status_code = status
    r._content = body if isinstance(body, bytes) else json.dumps(body).encode()
    r.headers.update({"Content-Type": "application/json", "x-odps-request-id": "REQ"})
    r.headers.update(headers or {})
    r.url, r.request, r.encoding = req.url, req, "utf-8"
    return r


def fake_send(self, req, **kw):
    body = req.body
    if body is None:
        raw = b""
    elif isinstance(body, (bytes, bytearray)):
        raw = bytes(body)
    elif isinstance(body, str):
        raw = body.encode()
    else:  # generator -> requests would send it with Transfer-Encoding: chunked
        pieces = [bytes(p) for p in body]
        raw = b"".join(pieces)
    u = urlsplit(req.url)
    CAPTURED.append(dict(method=req.method, url=req.url, path=u.path,
                         query=parse_qsl(u.query, keep_blank_values=True),
                         headers=dict(req.headers), body=raw))
    q = dict(parse_qsl(u.query, keep_blank_values=True))
    if req.method == "POST" and "uploads" in q:
        return _resp(req, 201, _session_json())
    if req.method == "PUT" and "blockid" in q:
        BLOCKS.add(int(q["blockid"]))
        return _resp(req, 200, b"")
    if req.method == "GET" and "uploadid" in q:
        return _resp(req, 200, _session_json())
    if req.method == "POST" and "uploadid" in q:
        return _resp(req, 200, _session_json("CLOSED"))
    return _resp(req, 404, {"Code": "NoSuchObject", "Message": "fake: " + req.url})


requests.Session.send = fake_send

# ---------------------------------------------------------------- helpers


def rows_to_batch(rows, arrow_schema):
    if not rows:
        return arrow_schema.empty_table().to_batches()[0] if arrow_schema.empty_table().to_batches() else \
            pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in arrow_schema], names=arrow_schema.names)
    cols = []
    for f in arrow_schema:
        vals = [r[f.name] for r in rows]
        t = f.type
        if pa.types.is_timestamp(t):  # hand pyodps tz-aware UTC input so local_timezone is moot
            cols.append(pa.array(vals, type=pa.timestamp(t.unit, "UTC")))
        else:
            cols.append(pa.array(vals, type=t))
    return pa.RecordBatch.from_arrays(cols, names=arrow_schema.names)


def unframe(body):
    """Strip the tunnel Arrow framing; verify every chunk CRC and the trailing CRC."""
    if len(body) == 4:  # nothing written: only the trailing CRC of an empty payload
        assert body == b"\0\0\0\0"
        return b"", None, []
    (chunk,) = struct.unpack(">I", body[:4])
    pos, payload, crcs = 4, bytearray(), []
    while True:
        rest = len(body) - pos
        if rest >= chunk + 4 + 4:  # a full chunk + its CRC, and the trailer still follows
            data = body[pos:pos + chunk]
            c = Crc32c(); c.update(bytearray(data))
            (got,) = struct.unpack(">I", body[pos + chunk:pos + chunk + 4])
            assert got == c.getvalue(), "chunk crc"
            crcs.append(got); payload += data; pos += chunk + 4
        else:  # last (partial or empty) piece then trailer
            payload += body[pos:len(body) - 4]
            (got,) = struct.unpack(">I", body[-4:])
            c = Crc32c(); c.update(bytearray(payload))
            assert got == c.getvalue(), "trailing crc"
            return bytes(payload), chunk, crcs


def decode_plain(payload, arrow_schema):
    stream = arrow_schema.serialize().to_pybytes() + payload  # prepend schema message; no EOS needed
    return pa.ipc.open_stream(stream).read_all()


def decode_pyodps(body, arrow_schema):
    class Raw(io.BytesIO):
        def __len__(self):
            return len(self.getbuffer())
    rd = ArrowStreamReader(Raw(body), arrow_schema)
    return pa.ipc.open_stream(rd).read_all()


def jsonable(v):
    if isinstance(v, dt.datetime):
        return v.isoformat()
    if isinstance(v, (dt.date, decimal.Decimal)):
        return str(v)
    if isinstance(v, float) and v == 0 and str(v).startswith("-"):
        return "-0.0"
    return v


def hdrs(h):
    # Date/Authorization change with time/credentials; keep them but flag as volatile
    return {k: v for k, v in h.items()}


# ---------------------------------------------------------------- run pyodps
def main():
    options.local_timezone = "UTC"  # only matters for naive datetimes; inputs are tz-aware anyway
    o = ODPS("FAKE_AK_ID", "FAKE_AK_SECRET", PROJECT, endpoint=ENDPOINT)
    tunnel = TableTunnel(o, endpoint=TUNNEL)

    cases = []  # (name, block_id, compress_option or None, chunk_size, batches)
    cases.append(("default_chunk_raw", 0, None, None, [BATCH1, BATCH2]))
    cases.append(("chunk_256_raw", 1, None, 256, [BATCH1, BATCH2]))
    cases.append(("deflate", 2, CompressOption(CompressOption.CompressAlgorithm.ODPS_ZLIB), None, [BATCH1, BATCH2]))
    cases.append(("lz4_arrow", 3, CompressOption(CompressOption.CompressAlgorithm.ODPS_LZ4), None, [BATCH1]))
    cases.append(("no_rows_written", 4, None, None, []))
    cases.append(("chunk_8_exact_multiple", 5, None, 8, [BATCH1, BATCH2]))
    cases.append(("zero_row_batch", 6, None, None, [[]]))
    cases.append(("buffered_writer", None, None, None, [BATCH1, BATCH2]))  # open_arrow_writer() without block id

    session = tunnel.create_upload_session(TABLE, partition_spec=PARTITION)
    arrow_schema = odps_schema_to_arrow_schema(session.schema)
    out = dict(
        generator="make_arrow_vectors.py",
        pyodps_version=odps.__version__, pyarrow_version=pa.__version__,
        note=("Bodies are exactly what pyodps's ArrowWriter hands to requests (before any HTTP chunked "
              "transfer coding). Authorization/Date headers use fake keys and wall-clock time: "
              "do not compare them. Timestamps are UTC instants."),
        table=dict(project=PROJECT, table=TABLE, partition=PARTITION, schema=SCHEMA_JSON),
        arrow_schema=[dict(name=f.name, type=str(f.type), nullable=f.nullable) for f in arrow_schema],
        arrow_schema_ipc_b64=base64.b64encode(arrow_schema.serialize().to_pybytes()).decode(),
        batches=[[{k: jsonable(v) for k, v in r.items()} for r in b] for b in (BATCH1, BATCH2)],
        blocks=[],
    )

    for name, block_id, copt, chunk, batches in cases:
        session._compress_option = copt
        old = options.chunk_size
        if chunk:
            options.chunk_size = chunk
        n0 = len(CAPTURED)
        try:
            if block_id is None:
                w = session.open_arrow_writer(compress=copt is not None, initial_block_id=10)
            else:
                w = session.open_arrow_writer(block_id, compress=copt is not None)
            for b in batches:
                w.write(rows_to_batch(b, arrow_schema))
            w.close()
            if block_id is None:
                block_id = w.get_blocks_written()[0]
                cases[cases.index((name, None, copt, chunk, batches))] = (name, block_id, copt, chunk, batches)
        finally:
            options.chunk_size = old
        reqs = CAPTURED[n0:]
        assert len(reqs) == 1, reqs
        r = reqs[0]
        body = r["body"]
        enc = r["headers"].get("Content-Encoding")
        if enc == "deflate":
            import zlib
            framed = zlib.decompress(body)
        elif enc == "x-odps-lz4-frame":
            import lz4.frame
            framed = lz4.frame.decompress(body)
        else:
            framed = body
        payload, chunk_hdr, crcs = unframe(framed)
        expect = [row for b in batches for row in b]
        if payload:
            t_plain = decode_plain(payload, arrow_schema)
            t_pyodps = decode_pyodps(framed, arrow_schema)
            assert t_plain.equals(t_pyodps)
            got = t_plain.to_pylist()
            for g, e in zip(got, expect):
                for k in e:
                    gv, ev = g[k], e[k]
                    if isinstance(gv, dt.datetime):
                        gv = gv.replace(tzinfo=UTC)
                    if hasattr(gv, "nanosecond"):  # pandas Timestamp
                        gv = gv.to_pydatetime().replace(tzinfo=UTC)
                    assert gv == ev or (gv != gv and ev != ev), (name, k, gv, ev)
            assert len(got) == len(expect)
            # message boundaries: each batch is one encapsulated IPC message (0xFFFFFFFF, len, fb, body)
            msgs, p = [], 0
            while p < len(payload):
                cont, mlen = struct.unpack("<Ii", payload[p:p + 8])
                assert cont == 0xFFFFFFFF
                m = pa.ipc.read_message(pa.BufferReader(payload[p:]))
                msgs.append(dict(offset=p, metadata_len_field=mlen, body_length=m.body.size,
                                 type=m.type, total_len=8 + mlen + m.body.size))
                p += 8 + mlen + m.body.size
            assert p == len(payload)
        else:
            msgs = []
        out["blocks"].append(dict(
            case=name, block_id=block_id, chunk_size=chunk_hdr, rows=len(expect),
            n_batches=len(batches),
            request=dict(method=r["method"], path=r["path"], query=r["query"], url=r["url"],
                         headers=hdrs(r["headers"])),
            body_len=len(body), body_hex=body.hex(),
            unframed=dict(framed_len=len(framed), payload_len=len(payload), chunk_crcs=[f"{c:08x}" for c in crcs],
                          trailing_crc=framed[-4:].hex(), ipc_messages=msgs),
        ))

    # client-side column matching: reversed order + upper-case names + an extra column -> same bytes as block 0
    b1 = rows_to_batch(BATCH1, arrow_schema)
    b2 = rows_to_batch(BATCH2, arrow_schema)
    def shuffle(b):
        names = [n.upper() for n in reversed(b.schema.names)] + ["EXTRA"]
        cols = list(reversed(b.columns)) + [pa.array([7] * b.num_rows)]
        return pa.RecordBatch.from_arrays(cols, names=names)
    n0 = len(CAPTURED)
    w = session.open_arrow_writer(7)
    w.write(shuffle(b1)); w.write(shuffle(b2)); w.close()
    checks = dict(reordered_upper_extra_same_bytes_as_block0=CAPTURED[n0]["body"].hex() == out["blocks"][0]["body_hex"])
    # naive (tz-less) timestamps are interpreted in options.local_timezone (UTC here) -> same bytes again
    def naive(b):
        cols = [c.cast(pa.timestamp(c.type.unit)) if pa.types.is_timestamp(c.type) else c for c in b.columns]
        return pa.RecordBatch.from_arrays(cols, names=b.schema.names)
    n0 = len(CAPTURED)
    w = session.open_arrow_writer(8)
    w.write(naive(b1)); w.write(naive(b2)); w.close()
    checks["naive_timestamps_with_local_timezone_UTC_same_bytes"] = CAPTURED[n0]["body"].hex() == out["blocks"][0]["body_hex"]
    try:
        w = session.open_arrow_writer(9)
        w.write(b1.drop_columns(["score"]))
        checks["missing_column"] = "no error"
    except ValueError as e:
        checks["missing_column"] = "ValueError: " + str(e)
    out["client_side_checks"] = checks
    print(checks)
    BLOCKS.discard(7); BLOCKS.discard(8); BLOCKS.discard(9)
    n0 = len(CAPTURED)
    session.commit([c[1] for c in cases])
    create = [r for r in CAPTURED[:n0] if r["method"] == "POST" and ("uploads", "1") in r["query"]]
    out["other_requests"] = [
        dict(step=s, method=r["method"], path=r["path"], query=r["query"], headers=hdrs(r["headers"]),
             body_len=len(r["body"]))
        for s, r in zip(["create_session"], create)
    ] + [
        dict(step=s, method=r["method"], path=r["path"], query=r["query"], headers=hdrs(r["headers"]),
             body_len=len(r["body"]))
        for s, r in zip(["commit_reload_blocklist", "commit"], CAPTURED[n0:])
    ]
    with open(f"{HERE}/tunnel_arrow_upload.json", "w") as f:
        json.dump(out, f, indent=1, default=str)
    for b in out["blocks"]:
        print(b["case"], b["request"]["method"], b["request"]["query"], "body", b["body_len"],
              "payload", b["unframed"]["payload_len"], "crcs", len(b["unframed"]["chunk_crcs"]),
              "enc", b["request"]["headers"].get("Content-Encoding"))
    for r in CAPTURED:
        print("  captured:", r["method"], r["path"], r["query"], len(r["body"]))
    for r in out["other_requests"]:
        print(r["step"], r["method"], r["path"], r["query"])
    print("OK: all bodies decoded by pyodps ArrowStreamReader and plain pyarrow")


if __name__ == "__main__":
    sys.exit(main())
