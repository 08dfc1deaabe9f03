#!/usr/bin/env python3
"""Golden OSS Tables (product `osstables`, OSS4-HMAC-SHA256) vectors for floe issue 15.

Run with the venv that has `alibabacloud-oss-v2` installed:

    /work/notes/venv/bin/python make_tables_vectors.py [OUTDIR]

Writes OUTDIR/oss_tables_signatures.json (OUTDIR defaults to this file's directory).
No network access: only the SDK's signer and (for the cross-check section) the SDK's
tables client with a fake in-memory HTTP transport are used.

Sections of the output:

* `ossutil_cases`: the six seed steps (plus GetTable / Get*MaintenanceConfiguration,
  which floe also calls, and STS variants), with each request built the way
  ossutil 2.3.0 builds it.  ossutil 2.3.0 is closed source here; its release notes say it
  uses alibabacloud-oss-go-sdk-v2 v1.5.1, whose `oss/tables` package builds the requests:
  - host: `<endpoint>` for CreateTableBucket, `<bucket-name>-<account-id>.<endpoint>`
    (virtual-hosted, from the ARN) for bucket-scoped calls  [Go oss/tables/endpoints.go];
  - path: `/` + key, key = `buckets` | `namespaces/<QueryEscape(arn)>` |
    `tables/<QueryEscape(arn)>/<QueryEscape(ns)>[/<QueryEscape(name)>/...]`,
    maintenance `<type>` unescaped  [Go oss/tables/api_op_*.go];
  - query: Go `url.Values.Encode()` (sorted, QueryEscape);
  - headers: `Content-Type: application/json` on every call, `Content-MD5` =
    base64(md5(body)), or of the empty string when there is no body
    [Go oss/tables/api_op_*.go, `MarshalUpdateContentMd5`/`updateContentMd5`];
  - body: Go `json.Marshal` of the request map (compact; map keys sorted; structs in
    declaration order)  [Go oss/tables/client.go `marshalInputJson`];
  - signing: `SignerTablesV4`, product `osstables`, region = the configured region,
    signing bucket = the table-bucket ARN (none for CreateTableBucket),
    signing key = the key above.
  The signature itself comes from the Python SDK's `TablesSignerV4` (same canonical form as
  the Go signer for these inputs; the script asserts the two Go-only rules, `+`->`%20` in the
  canonical query and header-value trimming, change nothing here).
* `python_sdk_client_cases`: the same operations sent through the Python SDK's own
  `alibabacloud_oss_v2.tables.Client` (fake transport, pinned clock), to show how a
  second official client puts them on the wire (different JSON spacing, hence Content-MD5;
  `/` left raw in query values; CreateTable also sends `?namespace=`).
Every case is re-signed by `floe_model_sign`, a line-by-line Python port of floe's
`OssV4Signer::sign` for `OssResource::Tables` (shared/signing/src/oss.rs), and
`floe_model_matches` records whether it reproduces the SDK's Authorization.
"""
import base64
import datetime as _dt
import hashlib
import hmac
import json
import os
import sys
import types
from importlib.metadata import version as pkg_version
from urllib.parse import quote, quote_plus, unquote, urlsplit

import alibabacloud_oss_v2 as oss
from alibabacloud_oss_v2.credentials import Credentials
from alibabacloud_oss_v2.types import HttpRequest, SigningContext
import alibabacloud_oss_v2.signer.tables_v4 as tables_v4_mod
from alibabacloud_oss_v2.signer.tables_v4 import TablesSignerV4

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
os.makedirs(OUT, exist_ok=True)

# ------------------------------------------------------------------ fixed inputs
AK = "LTAI5tFakeAccessKeyId"
SK = "FakeSecretKeyForVectorsOnly0123456789"
STS = "CAIS+FakeSecurityTokenForVectors/0123456789=="
FIXED = _dt.datetime(2026, 12, 1, 8, 0, 0, tzinfo=_dt.timezone.utc)

REGION = "cn-hangzhou"
ACCOUNT = "1234567890123456"
BUCKET = "demo-table-bucket"
ARN = f"acs:osstables:{REGION}:{ACCOUNT}:bucket/{BUCKET}"
NAMESPACE = "kafka_ns"
TABLE = "events"
ENDPOINT = f"{REGION}.oss-tables.aliyuncs.com"
SCHEME = "http"  # the seed passes --endpoint http://{endpoint}; the scheme is not signed
EMPTY_MD5 = "1B2M2Y8AsgTpgAmY7PhCfg=="

SCHEMA_DOC = {  # the seed's schema.json, as ossutil reads it with --metadata file://schema.json
    "iceberg": {"schema": {"fields": [
        {"name": "event_id", "type": "string", "required": True},
        {"name": "event_time", "type": "string"},
        {"name": "event_type", "type": "string"},
    ]}}
}


# ------------------------------------------------------------------ Go encoders
def go_query_escape(s: str) -> str:
    """Go url.QueryEscape: keeps A-Za-z0-9 and -_.~, space -> '+', the rest %XX."""
    return quote_plus(s, safe="")


def go_values_encode(params: dict) -> str:
    """Go url.Values.Encode(): keys sorted, key and value QueryEscape'd."""
    return "&".join(f"{go_query_escape(k)}={go_query_escape(v)}" for k, v in sorted(params.items()))


def go_json(obj) -> bytes:
    """Go json.Marshal: compact, UTF-8, <>& escaped. Dict order must already be Go's
    (maps: sorted keys; structs: declaration order)."""
    s = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    s = s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return s.encode("utf-8")


def sort_maps(obj):
    """Go encodes map[string]any with sorted keys."""
    if isinstance(obj, dict):
        return {k: sort_maps(obj[k]) for k in sorted(obj)}
    if isinstance(obj, list):
        return [sort_maps(v) for v in obj]
    return obj


def b64md5(body: bytes) -> str:
    return base64.b64encode(hashlib.md5(body).digest()).decode() if body else EMPTY_MD5


# ------------------------------------------------------------------ capture-enabled signer
class CapturingTablesSignerV4(TablesSignerV4):
    """The SDK signer, recording the canonical request it builds (no behaviour change)."""

    last_canonical_request = None

    def _calc_canonical_request(self, signing_ctx, additional_headers=None):
        creq = super()._calc_canonical_request(signing_ctx=signing_ctx,
                                               additional_headers=additional_headers)
        CapturingTablesSignerV4.last_canonical_request = creq
        return creq


def aliyun_v4_key(sk, day, region, product):
    k = ("aliyun_v4" + sk).encode()
    for part in (day, region, product, "aliyun_v4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


def go_canonical_request(method, canonical_uri, raw_query, headers, hash_payload):
    """The Go SignerV4/SignerTablesV4 canonical request (for the equality assertion):
    raw query with '+' -> '%20', keys sorted (last value wins), header values trimmed."""
    q = raw_query.replace("+", "%20")
    vals, keys = {}, []
    for part in q.split("&") if q else []:
        if not part:
            continue
        k, _, v = part.partition("=")
        vals[k] = v
        keys.append(k)
    cq = "&".join(k + ("=" + vals[k] if vals[k] else "") for k in sorted(keys))
    hs = sorted((k.lower(), v.strip()) for k, v in headers.items()
                if k.lower().startswith("x-oss-") or k.lower() in ("content-type", "content-md5"))
    ch = "".join(f"{k}:{v}\n" for k, v in hs)
    return f"{method}\n{canonical_uri}\n{cq}\n{ch}\n\n{hash_payload}"


# ------------------------------------------------------------------ floe model (port of oss.rs)
_UNRESERVED = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _floe_encode_path(s: str) -> str:
    out = []
    for b in s.encode("utf-8"):
        out.append(chr(b) if b in _UNRESERVED or b == ord("/") else "%%%02X" % b)
    return "".join(out)


def floe_model_sign(method, bucket_arn, path, query, headers, ak, sk, token, region, when):
    """Port of floe `OssV4Signer::tables(region).sign(creds, OssRequest{Tables{bucket_arn,
    path}, query, headers, additional_headers: []}, when)` (shared/signing/src/oss.rs)."""
    stamp = when.strftime("%Y%m%dT%H%M%SZ")
    day = stamp[:8]
    added = [("x-oss-date", stamp), ("Date", when.strftime("%a, %d %b %Y %H:%M:%S GMT"))]
    if not any(k.lower() == "x-oss-content-sha256" for k, _ in headers):
        added.append(("x-oss-content-sha256", "UNSIGNED-PAYLOAD"))
    if token:
        added.append(("x-oss-security-token", token))
    merged = [(k, v) for k, v in headers if not any(a.lower() == k.lower() for a, _ in added)] + added
    scope = f"{day}/{region}/osstables/aliyun_v4_request"
    arn = bucket_arn if bucket_arn else f"acs:osstables:{region}::bucket/"
    uri = _floe_encode_path(f"/{arn}/{unquote(path)}")
    pairs = sorted(tuple(p.split("=", 1)) if "=" in p else (p, "") for p in query.split("&")) if query else []
    cq = "&".join(k if not v else f"{k}={v}" for k, v in pairs)
    canon = sorted(((k.lower(), v) for k, v in merged
                    if k.lower().startswith("x-oss-") or k.lower() in ("content-type", "content-md5")),
                   key=lambda kv: kv[0])
    payload = next((v for k, v in merged if k.lower() == "x-oss-content-sha256"), "UNSIGNED-PAYLOAD")
    creq = f"{method}\n{uri}\n{cq}\n" + "".join(f"{k}:{v}\n" for k, v in canon) + "\n\n" + payload
    sts = f"OSS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(creq.encode()).hexdigest()}"
    sig = hmac.new(aliyun_v4_key(sk, day, region, "osstables"), sts.encode(), hashlib.sha256).hexdigest()
    return {"canonical_request": creq, "string_to_sign": sts,
            "authorization": f"OSS4-HMAC-SHA256 Credential={ak}/{scope},Signature={sig}"}


# ------------------------------------------------------------------ ossutil-style cases
def ossutil_request(name, seed_step, command, op, method, key, bucket_arn=None, query=None,
                    body_obj=None, body_note=None, token=None):
    body = go_json(body_obj) if body_obj is not None else b""
    headers_in = {"Content-Type": "application/json", "Content-MD5": b64md5(body)}
    if bucket_arn:
        host = f"{BUCKET}-{ACCOUNT}.{ENDPOINT}"  # virtual-hosted: <name>-<account>.<endpoint>
    else:
        host = ENDPOINT
    raw_query = go_values_encode(query) if query else ""
    url = f"{SCHEME}://{host}/{key}" + (f"?{raw_query}" if raw_query else "")

    req = HttpRequest(method, url, headers=dict(headers_in), body=body)
    cred = Credentials(AK, SK, token)
    ctx = SigningContext(product="osstables", region=REGION, bucket=bucket_arn, key=key,
                         request=req, credentials=cred, signing_time=FIXED)
    CapturingTablesSignerV4.last_canonical_request = None
    CapturingTablesSignerV4().sign(ctx)
    creq = CapturingTablesSignerV4.last_canonical_request
    auth = req.headers["Authorization"]
    signature = auth.rsplit("Signature=", 1)[1]

    # independent recomputation from the captured canonical request
    stamp = req.headers["x-oss-date"]
    scope = f"{stamp[:8]}/{REGION}/osstables/aliyun_v4_request"
    sts = f"OSS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(creq.encode()).hexdigest()}"
    assert sts == ctx.string_to_sign, name
    assert hmac.new(aliyun_v4_key(SK, stamp[:8], REGION, "osstables"), sts.encode(),
                    hashlib.sha256).hexdigest() == signature, name
    # the Go signer's canonical request is the same for these inputs
    canonical_uri = creq.split("\n")[1]
    go_creq = go_canonical_request(method, canonical_uri, urlsplit(url).query,
                                   dict(req.headers), "UNSIGNED-PAYLOAD")
    assert go_creq == creq, (name, go_creq, creq)

    floe = floe_model_sign(method, bucket_arn, key, raw_query, list(headers_in.items()),
                           AK, SK, token, REGION, FIXED)
    case = {
        "name": name,
        "seed_step": seed_step,
        "ossutil_command": command,
        "go_sdk_operation": op,
        "inputs": {
            "method": method,
            "url": url,
            "host": host,
            "path": "/" + key,
            "query": raw_query,
            "headers_before_signing": headers_in,
            "headers_note": "ossutil/Go SDK also send User-Agent, Content-Length (and Host); none is signed",
            "body": body.decode("utf-8"),
            "body_md5_base64": b64md5(body),
            "body_sha256_hex": hashlib.sha256(body).hexdigest(),
            "region": REGION,
            "product": "osstables",
            "signing_bucket": bucket_arn,
            "signing_key": key,
            "time": FIXED.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "credentials": {"access_key_id": AK, "access_key_secret": SK, "security_token": token},
        },
        "outputs": {
            "headers_after_signing": dict(req.headers),
            "authorization": auth,
            "x-oss-date": req.headers["x-oss-date"],
            "date": req.headers["Date"],
            "x-oss-content-sha256": req.headers["x-oss-content-sha256"],
            "canonical_request": creq,
            "string_to_sign": ctx.string_to_sign,
            "signature": signature,
        },
        "floe_oss_request": {
            "signer": f"OssV4Signer::tables(\"{REGION}\")",
            "resource": {"Tables": {"bucket_arn": bucket_arn, "path": key}},
            "query": raw_query,
            "headers": [[k, v] for k, v in headers_in.items()],
            "additional_headers": [],
        },
        "floe_model_matches": floe["authorization"] == auth and floe["canonical_request"] == creq,
    }
    if body_note:
        case["inputs"]["body_note"] = body_note
    return case


def ossutil_cases():
    qa, qn, qt = go_query_escape(ARN), go_query_escape(NAMESPACE), go_query_escape(TABLE)
    tpath = f"tables/{qa}/{qn}/{qt}"
    cases = [
        ossutil_request(
            "create_table_bucket", "3",
            f"ossutil tables-api create-table-bucket --name {BUCKET} --endpoint http://{ENDPOINT} --region {REGION}",
            "CreateTableBucket", "PUT", "buckets", body_obj={"name": BUCKET}),
        ossutil_request(
            "create_namespace", "4",
            f"ossutil tables-api create-namespace --table-bucket-arn {ARN} --namespace {NAMESPACE} --endpoint http://{ENDPOINT}",
            "CreateNamespace", "PUT", f"namespaces/{qa}", bucket_arn=ARN,
            body_obj={"namespace": [NAMESPACE]}),
        ossutil_request(
            "create_table", "5",
            f"ossutil tables-api create-table --table-bucket-arn {ARN} --namespace {NAMESPACE} --name {TABLE} --format ICEBERG --metadata file://schema.json --endpoint http://{ENDPOINT}",
            "CreateTable", "PUT", f"tables/{qa}/{qn}", bucket_arn=ARN,
            body_obj=sort_maps({"name": TABLE, "format": "ICEBERG", "metadata": SCHEMA_DOC}),
            body_note="Go marshals the body map with sorted keys; metadata.iceberg.schema is a "
                      "map[string]any, so field objects are key-sorted too. Exact ossutil parsing of "
                      "--metadata is not visible (closed source); the signature only sees the body "
                      "through Content-MD5."),
        ossutil_request(
            "get_table_maintenance_job_status", "6",
            f"ossutil tables-api get-table-maintenance-job-status --table-bucket-arn {ARN} --namespace {NAMESPACE} --name {TABLE}",
            "GetTableMaintenanceJobStatus", "GET", f"{tpath}/maintenance-job-status", bucket_arn=ARN),
        ossutil_request(
            "put_table_bucket_maintenance_configuration", "6",
            f"ossutil tables-api put-table-bucket-maintenance-configuration --table-bucket-arn {ARN} --type icebergUnreferencedFileRemoval --value '{{\"status\":\"enabled\",\"settings\":{{\"icebergUnreferencedFileRemoval\":{{\"unreferencedDays\":4,\"nonCurrentDays\":10}}}}}}'",
            "PutTableBucketMaintenanceConfiguration", "PUT",
            f"buckets/{qa}/maintenance/icebergUnreferencedFileRemoval", bucket_arn=ARN,
            body_obj={"value": {"settings": {"icebergUnreferencedFileRemoval":
                                             {"nonCurrentDays": 10, "unreferencedDays": 4}},
                                "status": "enabled"}},
            body_note="Go struct order MaintenanceValue{settings,status}, SettingsDetail{nonCurrentDays,unreferencedDays}."),
        ossutil_request(
            "put_table_maintenance_configuration", "6",
            f"ossutil tables-api put-table-maintenance-configuration --table-bucket-arn {ARN} --type icebergCompaction --namespace {NAMESPACE} --name {TABLE} --value '{{\"status\":\"enabled\",\"settings\":{{\"icebergCompaction\":{{\"targetFileSizeMB\":256}}}}}}'",
            "PutTableMaintenanceConfiguration", "PUT", f"{tpath}/maintenance/icebergCompaction",
            bucket_arn=ARN,
            body_obj={"value": {"settings": {"icebergCompaction": {"strategy": None, "targetFileSizeMB": 256}},
                                "status": "enabled"}},
            body_note="Go struct TableMaintenanceValue{settings,status}; IcebergCompactionSettingsDetail "
                      "has `strategy` without omitempty, so an unset strategy marshals as null (SDK commit 07bc8f7)."),
        # ---- not in the seed, but floe calls them
        ossutil_request(
            "get_table", "extra (floe create-table follow-up / get-table)",
            f"ossutil tables-api get-table --table-bucket-arn {ARN} --namespace {NAMESPACE} --name {TABLE}",
            "GetTable", "GET", "get-table", bucket_arn=ARN,
            query={"tableBucketARN": ARN, "namespace": NAMESPACE, "name": TABLE}),
        ossutil_request(
            "get_table_maintenance_configuration", "extra",
            f"ossutil tables-api get-table-maintenance-configuration --table-bucket-arn {ARN} --namespace {NAMESPACE} --name {TABLE}",
            "GetTableMaintenanceConfiguration", "GET", f"{tpath}/maintenance", bucket_arn=ARN),
        ossutil_request(
            "get_table_bucket_maintenance_configuration", "extra",
            f"ossutil tables-api get-table-bucket-maintenance-configuration --table-bucket-arn {ARN}",
            "GetTableBucketMaintenanceConfiguration", "GET", f"buckets/{qa}/maintenance", bucket_arn=ARN),
        # ---- STS variants
        ossutil_request(
            "create_table_bucket_sts", "3 (STS credentials)",
            f"ossutil tables-api create-table-bucket --name {BUCKET} --sts-token ... --region {REGION}",
            "CreateTableBucket", "PUT", "buckets", body_obj={"name": BUCKET}, token=STS),
        ossutil_request(
            "create_namespace_sts", "4 (STS credentials)",
            f"ossutil tables-api create-namespace --table-bucket-arn {ARN} --namespace {NAMESPACE} --sts-token ...",
            "CreateNamespace", "PUT", f"namespaces/{qa}", bucket_arn=ARN,
            body_obj={"namespace": [NAMESPACE]}, token=STS),
        ossutil_request(
            "get_table_sts", "extra (STS credentials)",
            f"ossutil tables-api get-table --table-bucket-arn {ARN} --namespace {NAMESPACE} --name {TABLE} --sts-token ...",
            "GetTable", "GET", "get-table", bucket_arn=ARN,
            query={"tableBucketARN": ARN, "namespace": NAMESPACE, "name": TABLE}, token=STS),
    ]
    return cases


# ------------------------------------------------------------------ python SDK client cross-check
class _Resp(oss.types.HttpResponse):
    def __init__(self, request):
        self._request = request
        self._content = b"{}"

    request = property(lambda self: self._request)
    status_code = property(lambda self: 200)
    reason = property(lambda self: "OK")
    headers = property(lambda self: oss.types.CaseInsensitiveDict(
        {"Content-Type": "application/json", "x-oss-request-id": "FAKE"}))
    is_closed = property(lambda self: True)
    is_stream_consumed = property(lambda self: True)
    content = property(lambda self: self._content)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        pass

    def read(self):
        return self._content

    def close(self):
        pass

    def iter_bytes(self, **kw):
        yield self._content


class _Capture(oss.types.HttpClient):
    def __init__(self):
        self.sent = []

    def send(self, request, **kwargs):
        self.sent.append(request)
        return _Resp(request)

    def open(self):
        pass

    def close(self):
        pass


def python_sdk_client_cases():
    from alibabacloud_oss_v2 import tables
    from alibabacloud_oss_v2.tables import models as tm

    class _FixedDT(_dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return FIXED

    shim = types.SimpleNamespace(datetime=_FixedDT, timezone=_dt.timezone, timedelta=_dt.timedelta)
    saved = tables_v4_mod.datetime
    tables_v4_mod.datetime = shim
    out = []
    try:
        for token in (None, STS):
            cap = _Capture()
            cfg = oss.config.load_default()
            cfg.region = REGION
            cfg.endpoint = f"{SCHEME}://{ENDPOINT}"
            cfg.credentials_provider = oss.credentials.StaticCredentialsProvider(AK, SK, token)
            cfg.http_client = cap
            client = tables.Client(cfg)
            calls = [
                ("create_table_bucket", lambda: client.create_table_bucket(tm.CreateTableBucketRequest(name=BUCKET))),
                ("create_namespace", lambda: client.create_namespace(
                    tm.CreateNamespaceRequest(table_bucket_arn=ARN, namespace=[NAMESPACE]))),
                ("create_table", lambda: client.create_table(tm.CreateTableRequest(
                    table_bucket_arn=ARN, namespace=NAMESPACE, name=TABLE, format="ICEBERG",
                    metadata=SCHEMA_DOC))),
                ("get_table_maintenance_job_status", lambda: client.get_table_maintenance_job_status(
                    tm.GetTableMaintenanceJobStatusRequest(table_bucket_arn=ARN, namespace=NAMESPACE, name=TABLE))),
                ("put_table_bucket_maintenance_configuration", lambda: client.put_table_bucket_maintenance_configuration(
                    tm.PutTableBucketMaintenanceConfigurationRequest(
                        table_bucket_arn=ARN, type="icebergUnreferencedFileRemoval",
                        value={"status": "enabled", "settings": {"icebergUnreferencedFileRemoval":
                                                                 {"unreferencedDays": 4, "nonCurrentDays": 10}}}))),
                ("put_table_maintenance_configuration", lambda: client.put_table_maintenance_configuration(
                    tm.PutTableMaintenanceConfigurationRequest(
                        table_bucket_arn=ARN, namespace=NAMESPACE, name=TABLE, type="icebergCompaction",
                        value={"status": "enabled", "settings": {"icebergCompaction": {"targetFileSizeMB": 256}}}))),
                ("get_table", lambda: client.get_table(tm.GetTableRequest(
                    table_bucket_arn=ARN, namespace=NAMESPACE, name=TABLE))),
            ]
            for name, call in calls:
                if token and name not in ("create_table_bucket", "create_namespace", "get_table"):
                    continue
                err = None
                try:
                    call()
                except Exception as e:  # record, keep going
                    err = f"{type(e).__name__}: {e}"
                if not cap.sent:
                    out.append({"name": name, "error": err})
                    continue
                r = cap.sent.pop()
                parts = urlsplit(r.url)
                body = r.body if isinstance(r.body, bytes) else (r.body or b"")
                if isinstance(body, str):
                    body = body.encode()
                headers = dict(r.headers)
                signed_in = [[k, v] for k, v in headers.items()
                             if k.lower() in ("content-type", "content-md5")]
                key = parts.path[1:]
                bucket_arn = None if name == "create_table_bucket" else ARN
                floe = floe_model_sign(r.method, bucket_arn, key, parts.query, signed_in,
                                       AK, SK, token, REGION, FIXED)
                out.append({
                    "name": name + ("_sts" if token else ""),
                    "sdk_call_error": err,
                    "method": r.method,
                    "url": r.url,
                    "path": parts.path,
                    "query": parts.query,
                    "body": body.decode("utf-8"),
                    "headers_sent": {k: v for k, v in headers.items() if k.lower() != "user-agent"},
                    "authorization": headers.get("Authorization"),
                    "floe_oss_request": {"resource": {"Tables": {"bucket_arn": bucket_arn, "path": key}},
                                         "query": parts.query, "headers": signed_in},
                    "floe_model_matches": floe["authorization"] == headers.get("Authorization"),
                })
    finally:
        tables_v4_mod.datetime = saved
    return out


def main():
    cases = ossutil_cases()
    out = {
        "description": "OSS Tables (S3 Tables-compatible API) requests signed with OSS4-HMAC-SHA256, "
                       "product osstables, as ossutil 2.3.0 `tables-api` sends them (the seed's six steps), "
                       "plus a cross-check through the Python SDK's tables client.",
        "generator": "make_tables_vectors.py",
        "sdk_versions": {"alibabacloud-oss-v2": pkg_version("alibabacloud-oss-v2")},
        "signer": "alibabacloud_oss_v2.signer.tables_v4.TablesSignerV4 (canonical request captured by a subclass hook)",
        "ossutil_model": "ossutil 2.3.0 -> alibabacloud-oss-go-sdk-v2 v1.5.1 oss/tables (request shape), see module docstring",
        "fixed_time": FIXED.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": REGION,
        "endpoint": ENDPOINT,
        "table_bucket_arn": ARN,
        "namespace": NAMESPACE,
        "table": TABLE,
        "credentials": {"access_key_id": AK, "access_key_secret": SK, "security_token_variant": STS},
        "rules": {
            "scope": "<YYYYMMDD>/<region>/osstables/aliyun_v4_request",
            "canonical_uri": "quote('/' + (bucket ARN or 'acs:osstables:<region>::bucket/') + '/' + unquote(path-after-host), safe='/')",
            "canonical_query": "raw query as sent, split on & and first =, sorted, 'k' when the value is empty",
            "signed_headers": "every x-oss-* header, content-type, content-md5 (+ AdditionalHeaders, none here)",
            "payload_hash": "x-oss-content-sha256: UNSIGNED-PAYLOAD (always set by the signer)",
            "content_md5": "ossutil/Go SDK: base64(md5(body)); no body -> 1B2M2Y8AsgTpgAmY7PhCfg==",
        },
        "ossutil_cases": cases,
        "python_sdk_client_cases": python_sdk_client_cases(),
    }
    path = os.path.join(OUT, "oss_tables_signatures.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=2, ensure_ascii=False)
        f.write("\n")
    bad = [c["name"] for c in cases if not c["floe_model_matches"]]
    bad += [c["name"] for c in out["python_sdk_client_cases"] if not c.get("floe_model_matches")]
    print("wrote", path, "-", len(cases), "ossutil cases,",
          len(out["python_sdk_client_cases"]), "python-client cases; floe model mismatches:", bad or "none")


if __name__ == "__main__":
    main()
