#!/usr/bin/env python3
"""Run alibabacloud-credentials (Python, 1.0.12) providers against a local capture server.

Usage:  venv/bin/python make_credentials_vectors.py  -> runs all scenarios, writes alibaba_credentials_sdk.json
        (internally re-invokes itself as `make_credentials_vectors.py child <scenario>` with a per-scenario env,
         because the SDK reads ALIBABA_CLOUD_* env vars at *import* time (utils/auth_util.py).)

How traffic reaches the local server:
  * Tea (the SDK's HTTP layer, Tea/core.py do_action) honours HTTP_PROXY/HTTPS_PROXY env vars.
    The child sets HTTP_PROXY=http://127.0.0.1:<port>, so plain-http requests (ECS metadata at
    100.100.100.200, credentials URI) arrive at this server in absolute-form
    ("GET http://100.100.100.200/latest/... HTTP/1.1") with the *real* Host header. No patching.
  * STS calls are https:// to a hard-coded *.aliyuncs.com host; a proxy would only see CONNECT.
    Workaround: monkeypatch TeaCore.do_action in the child to flip request.protocol https->http
    (nothing else changed: host header, path, query, headers, body are untouched), so they also go
    through the HTTP proxy in clear text.
  * Fixed inputs: parameter_helper.get_iso_8061_date -> FIXED_TS, get_uuid -> FIXED_NONCE.
"""
import json, os, subprocess, sys, tempfile, threading, time, hmac, hashlib, base64
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit, parse_qsl, quote

HERE = os.path.dirname(os.path.abspath(__file__))
FIXED_TS = "2024-01-02T03:04:05Z"
FIXED_NONCE = "00000000-1111-2222-3333-444444444444"
EXPIRATION = "2099-01-01T00:00:00Z"
AK_ID, AK_SECRET = "LTAI-test-ak-id", "test-ak-secret"
ROLE_ARN = "acs:ram::1234567890123456:role/test-role"
OIDC_PROVIDER_ARN = "acs:ram::1234567890123456:oidc-provider/ack-rrsa-test"
OIDC_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ0ZXN0In0.c2ln"  # fake JWT, file content verbatim
ECS_ROLE = "EcsRoleForTest"
IMDS_TOKEN = "fake-imds-v2-token"

# ----------------------------------------------------------------- server side
LOG = []
MODE = {"imds_token": "ok", "sts": "ok"}


def sts_ok(action):
    return {
        "RequestId": "6894B13B-6D71-4EF5-88FA-F32781734A7F",
        "AssumedRoleUser": {"Arn": ROLE_ARN + "/sess", "AssumedRoleId": "34458433936495****:sess"},
        "Credentials": {"AccessKeyId": "STS.NUgYrLnoC37mZZCNnAbez****",
                        "AccessKeySecret": "sts-secret-from-" + action,
                        "SecurityToken": "CAIShwJ1q6Ft5B2yfSjIr5bSEsj4g7BihPWGWHz****",
                        "Expiration": EXPIRATION},
    }


STS_ERR = {"RequestId": "7B2D3E2C-0000-0000-0000-000000000000", "HostId": "sts.aliyuncs.com",
           "Code": "AuthenticationFail.OIDCToken.Expired", "Message": "The OIDCToken is expired.",
           "Recommend": "https://api.aliyun.com/troubleshoot?q=AuthenticationFail.OIDCToken.Expired"}


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        target = self.path
        u = urlsplit(target)
        host = u.netloc or self.headers.get("Host", "")
        entry = {"scenario": MODE.get("scenario"), "method": self.command, "request_target": target,
                 "host": host, "path": u.path or "/", "query": dict(parse_qsl(u.query, keep_blank_values=True)),
                 "raw_query": u.query, "headers": dict(self.headers.items()),
                 "body": body.decode("utf-8", "replace"),
                 "body_form": dict(parse_qsl(body.decode(), keep_blank_values=True)) if body else {}}
        LOG.append(entry)
        status, ctype, out = self.route(entry)
        data = out.encode() if isinstance(out, str) else out
        entry["response_status"] = status
        entry["response_body"] = data.decode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def route(self, e):
        p, q = e["path"], e["query"]
        if e["host"].startswith("100.100.100.200"):
            if p == "/latest/api/token" and e["method"] == "PUT":
                if MODE["imds_token"] == "ok":
                    return 200, "text/plain", IMDS_TOKEN
                return 403, "text/plain", "Forbidden"
            if p == "/latest/meta-data/ram/security-credentials/":
                return 200, "text/plain", ECS_ROLE
            if p == "/latest/meta-data/ram/security-credentials/" + ECS_ROLE:
                return 200, "text/plain", json.dumps({
                    "AccessKeyId": "STS.ecs-ak-id", "AccessKeySecret": "ecs-secret",
                    "Expiration": EXPIRATION, "SecurityToken": "ecs-security-token",
                    "LastUpdated": "2024-01-02T03:04:05Z", "Code": "Success"})
            return 404, "text/plain", "not found"
        if "aliyuncs.com" in e["host"]:
            action = q.get("Action") or e["body_form"].get("Action")
            if MODE["sts"] == "error":
                return 400, "application/json;charset=utf-8", json.dumps(STS_ERR)
            return 200, "application/json;charset=utf-8", json.dumps(sts_ok(action))
        if p == "/creds":
            return 200, "application/json", json.dumps({
                "Code": "Success", "AccessKeyId": "uri-ak", "AccessKeySecret": "uri-secret",
                "SecurityToken": "uri-token", "Expiration": EXPIRATION})
        return 404, "text/plain", "not found"

    do_GET = do_PUT = do_POST = handle_any


# ----------------------------------------------------------------- client side (child)
def child(scenario):
    from alibabacloud_credentials.utils import parameter_helper as ph
    ph.get_iso_8061_date = lambda: FIXED_TS
    ph.get_uuid = lambda: FIXED_NONCE
    from Tea.core import TeaCore
    orig = TeaCore.do_action

    def do_action(request, runtime_option=None):
        if request.protocol == "https":
            request.protocol = "http"  # only change: scheme, so the capture proxy sees clear text
        return orig(request, runtime_option)
    TeaCore.do_action = staticmethod(do_action)
    from alibabacloud_credentials.provider.default import DefaultCredentialsProvider
    res = {}
    try:
        c = DefaultCredentialsProvider().get_credentials()
        res = {"ok": True, "provider": c.get_provider_name(), "access_key_id": c.get_access_key_id(),
               "access_key_secret": c.get_access_key_secret(), "security_token": c.get_security_token()}
    except Exception as ex:  # noqa
        res = {"ok": False, "error": f"{type(ex).__name__}: {ex}"}
    print("RESULT " + json.dumps(res))
    sys.stdout.flush()
    os._exit(0)  # don't wait for the ECS provider's APScheduler thread


# ----------------------------------------------------------------- scenarios
def scenarios(tmp):
    tok = os.path.join(tmp, "oidc-token")
    open(tok, "w").write(OIDC_TOKEN)
    home_empty = os.path.join(tmp, "home-empty"); os.makedirs(home_empty, exist_ok=True)
    home_cli = os.path.join(tmp, "home-cli"); os.makedirs(os.path.join(home_cli, ".aliyun"), exist_ok=True)
    cfg = {"current": "ramrole", "profiles": [
        {"name": "default", "mode": "AK", "access_key_id": AK_ID, "access_key_secret": AK_SECRET, "region_id": "cn-hangzhou"},
        {"name": "ramrole", "mode": "RamRoleArn", "access_key_id": AK_ID, "access_key_secret": AK_SECRET,
         "ram_role_arn": ROLE_ARN, "ram_session_name": "floe-session", "expired_seconds": 900,
         "policy": '{"Statement": [{"Action": ["oss:*"], "Effect": "Allow", "Resource": ["*"]}], "Version": "1"}',
         "external_id": "ext-id-1", "sts_region": "cn-shanghai", "region_id": "cn-hangzhou"},
        {"name": "ramrole-plain", "mode": "RamRoleArn", "access_key_id": AK_ID, "access_key_secret": AK_SECRET,
         "ram_role_arn": ROLE_ARN, "ram_session_name": "floe-session", "policy": '{"Version":"1","Statement":[{"Action":["oss:*"],"Effect":"Allow","Resource":["*"]}]}',
         "region_id": "cn-hangzhou"}]}
    json.dump(cfg, open(os.path.join(home_cli, ".aliyun", "config.json"), "w"), indent=2)
    home_ini = os.path.join(tmp, "home-ini"); os.makedirs(os.path.join(home_ini, ".alibabacloud"), exist_ok=True)
    open(os.path.join(home_ini, ".alibabacloud", "credentials.ini"), "w").write(
        "[default]\ntype = access_key\naccess_key_id = ini-ak\naccess_key_secret = ini-secret\n")
    oidc_env = {"ALIBABA_CLOUD_ROLE_ARN": ROLE_ARN, "ALIBABA_CLOUD_OIDC_PROVIDER_ARN": OIDC_PROVIDER_ARN,
                "ALIBABA_CLOUD_OIDC_TOKEN_FILE": tok}
    no_imds = {"ALIBABA_CLOUD_ECS_METADATA_DISABLED": "true"}
    return [
        ("env_ak_sts", {"ALIBABA_CLOUD_ACCESS_KEY_ID": "env-ak", "ALIBABA_CLOUD_ACCESS_KEY_SECRET": "env-secret",
                        "ALIBABA_CLOUD_SECURITY_TOKEN": "env-token", "HOME": home_empty}, {}),
        ("env_id_only_then_nothing", {"ALIBABA_CLOUD_ACCESS_KEY_ID": "env-ak", "HOME": home_empty, **no_imds}, {}),
        ("oidc_global", {**oidc_env, "ALIBABA_CLOUD_ROLE_SESSION_NAME": "floe-oidc", "HOME": home_empty}, {}),
        ("oidc_regional_vpc", {**oidc_env, "ALIBABA_CLOUD_ROLE_SESSION_NAME": "floe-oidc",
                               "ALIBABA_CLOUD_STS_REGION": "cn-hangzhou", "ALIBABA_CLOUD_VPC_ENDPOINT_ENABLED": "true",
                               "HOME": home_empty}, {}),
        ("oidc_default_session_name", {**oidc_env, "HOME": home_empty}, {}),
        ("oidc_sts_error_falls_through_to_ecs", {**oidc_env, "HOME": home_empty}, {"sts": "error"}),
        ("oidc_sts_error_no_fallback", {**oidc_env, "HOME": home_empty, **no_imds}, {"sts": "error"}),
        ("oidc_partial_env_skipped", {"ALIBABA_CLOUD_ROLE_ARN": ROLE_ARN, "HOME": home_empty, **no_imds}, {}),
        ("cli_profile_ramrolearn", {"HOME": home_cli}, {}),
        ("cli_profile_ramrolearn_policy_without_spaces", {"HOME": home_cli, "ALIBABA_CLOUD_PROFILE": "ramrole-plain"}, {}),
        ("cli_profile_select_by_ALIBABA_CLOUD_PROFILE", {"HOME": home_cli, "ALIBABA_CLOUD_PROFILE": "default"}, {}),
        ("cli_profile_disabled_falls_to_ini", {"HOME": home_cli, "ALIBABA_CLOUD_CLI_PROFILE_DISABLED": "true",
                                               "ALIBABA_CLOUD_CREDENTIALS_FILE": os.path.join(home_ini, ".alibabacloud", "credentials.ini"),
                                               **no_imds}, {}),
        ("ini_profile_default_path", {"HOME": home_ini, **no_imds}, {}),
        ("ecs_imdsv2", {"HOME": home_empty}, {}),
        ("ecs_imdsv2_token_403_fallback_v1", {"HOME": home_empty}, {"imds_token": "fail"}),
        ("ecs_imdsv1_disabled_token_403", {"HOME": home_empty, "ALIBABA_CLOUD_IMDSV1_DISABLED": "true"}, {"imds_token": "fail"}),
        ("ecs_role_name_from_env", {"HOME": home_empty, "ALIBABA_CLOUD_ECS_METADATA": ECS_ROLE}, {}),
        ("credentials_uri", {"HOME": home_empty, **no_imds, "ALIBABA_CLOUD_CREDENTIALS_URI": "http://127.0.0.1:{port}/creds?x=1"}, {}),
    ]


# ----------------------------------------------------------------- signature cross-check
def pct(s):  # RFC3986 percent-encoding as in the Alibaba RPC spec (space -> %20, keep -_.~)
    return quote(s, safe="-_.~")


def sign_spec(method, params, secret):
    canon = "&".join(f"{pct(k)}={pct(v)}" for k, v in sorted(params.items()))
    sts = f"{method}&{pct('/')}&{pct(canon)}"
    return sts, base64.b64encode(hmac.new((secret + "&").encode(), sts.encode(), hashlib.sha1).digest()).decode()


def main():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    port = srv.server_address[1]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, env, mode in scenarios(tmp):
            MODE.update({"imds_token": "ok", "sts": "ok", **mode, "scenario": name})
            before = len(LOG)
            cenv = {k: v for k, v in os.environ.items() if not k.startswith("ALIBABA_CLOUD_")}
            cenv.update({k: v.replace("{port}", str(port)) for k, v in env.items()})
            cenv.update({"HTTP_PROXY": f"http://127.0.0.1:{port}", "NO_PROXY": "", "no_proxy": ""})
            cenv.pop("HTTPS_PROXY", None); cenv.pop("https_proxy", None)
            p = subprocess.run([sys.executable, __file__, "child", name], env=cenv, capture_output=True, text=True, timeout=60)
            line = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
            res = json.loads(line[-1][7:]) if line else {"ok": False, "error": "no result", "stderr": p.stderr[-2000:]}
            results.append({"scenario": name, "env": {k: v.replace("{port}", str(port)).replace(tmp, "$TMP") for k, v in env.items()},
                            "server_mode": mode, "result": res,
                            "requests": [dict(e, port_note="captured via HTTP proxy") for e in LOG[before:]]})
            print(f"{name:48s} {len(LOG)-before} req  -> {res.get('provider') or res.get('error','')[:150]}")
    # signature check for AssumeRole
    checks = []
    for s in results:
        for r in s["requests"]:
            if r["query"].get("Action") == "AssumeRole":
                q = dict(r["query"]); sig = q.pop("Signature")
                sts_py, sig_spec = sign_spec(r["method"], q, AK_SECRET)
                from urllib.parse import quote_plus
                canon = "&".join(f"{quote_plus(k)}={quote_plus(v)}" for k, v in sorted(q.items()))
                sts_qp = f"{r['method']}&%2F&{quote_plus(canon)}"
                sig_qp = base64.b64encode(hmac.new((AK_SECRET + "&").encode(), sts_qp.encode(), hashlib.sha1).digest()).decode()
                checks.append({"scenario": s["scenario"], "sdk_signature": sig,
                               "spec_rfc3986_signature_same_params": sig_spec,
                               "spec_string_to_sign": sts_py, "match": sig == sig_spec,
                               "python_quote_plus_string_to_sign": sts_qp, "python_quote_plus_signature": sig_qp,
                               "sdk_equals_quote_plus_recompute": sig == sig_qp})
    # Go-SDK style vector: POST, query = common params, body = business params, signature over union
    go_params = {"Version": "2015-04-01", "Action": "AssumeRole", "Format": "JSON", "Timestamp": FIXED_TS,
                 "SignatureMethod": "HMAC-SHA1", "SignatureVersion": "1.0", "SignatureNonce": FIXED_NONCE,
                 "AccessKeyId": AK_ID, "RoleArn": ROLE_ARN, "RoleSessionName": "floe-session",
                 "DurationSeconds": "3600"}
    sts_go, sig_go = sign_spec("POST", go_params, AK_SECRET)
    out = {"sdk": "alibabacloud-credentials (PyPI) 1.0.12 + alibabacloud-tea 0.4.3",
           "fixed_inputs": {"Timestamp": FIXED_TS, "SignatureNonce": FIXED_NONCE, "access_key_id": AK_ID,
                            "access_key_secret": AK_SECRET, "role_arn": ROLE_ARN, "oidc_provider_arn": OIDC_PROVIDER_ARN,
                            "oidc_token_file_content": OIDC_TOKEN, "ecs_role": ECS_ROLE, "imds_token": IMDS_TOKEN},
           "patches": ["parameter_helper.get_iso_8061_date -> FIXED_TS", "parameter_helper.get_uuid -> FIXED_NONCE",
                       "TeaCore.do_action: request.protocol https->http (STS only) so the HTTP proxy sees clear text",
                       "HTTP_PROXY env -> local capture server (honoured natively by Tea/core.py)"],
           "scenarios": results, "assumerole_signature_checks": checks,
           "go_style_assumerole_vector": {"method": "POST", "params_signed": go_params, "string_to_sign": sts_go,
                                          "signature": sig_go, "secret_key": AK_SECRET + "&"}}
    json.dump(out, open(os.path.join(HERE, "alibaba_credentials_sdk.json"), "w"), indent=2)
    print("signature checks:", [(c["scenario"], c["match"]) for c in checks])
    srv.shutdown()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "child":
        child(sys.argv[2])
    else:
        main()
