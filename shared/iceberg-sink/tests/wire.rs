//! What floe's catalog clients put on the wire, checked against a recording HTTP server:
//!
//! - SigV4: every case of `tests/vectors/sigv4_s3tables.json` (botocore, pinned time), sent by
//!   the REST catalog (config, load, commit) and the S3 Tables client (get and update metadata
//!   location): same path, query and body, and exactly the vector's `x-amz-date` and
//!   `authorization` (so the same signed headers);
//! - a commit answered 5xx is commit-state-unknown and not retryable; a 409 is a retryable
//!   conflict;
//! - OAuth2 client credentials: one token fetch, a new one before expiry and after a 401;
//! - `oss://` FileIO: requests go to the S3-compatible endpoint, with no flexible checksums.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use floe_iceberg::rest::{
    RestCatalog, RestCatalogBuilder, RestCatalogConfig, is_commit_state_unknown, table_file_io,
};
use floe_iceberg::s3tables::{S3TablesClient, S3TablesConfig};
use floe_testbed::recorder::{RecordedHttpRequest, RecordingServer, Reply};
use iceberg::spec::{TableMetadata, TableMetadataBuilder};
use iceberg::{Catalog, ErrorKind, TableCreation, TableIdent, TableRequirement};
use serde_json::{Value, json};

mod common;

const ARN: &str = "arn:aws:s3tables:us-east-1:111122223333:bucket/my-table-bucket";
const ARN_ENCODED: &str =
    "arn%3Aaws%3As3tables%3Aus-east-1%3A111122223333%3Abucket%2Fmy-table-bucket";
const HOST: &str = "s3tables.us-east-1.amazonaws.com";

fn vectors() -> Value {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/sigv4_s3tables.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn props(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn table_metadata(location: &str) -> TableMetadata {
    let creation = TableCreation::builder()
        .name("orders".into())
        .location(location.into())
        .schema(common::seed_schema())
        .build();
    TableMetadataBuilder::from_table_creation(creation)
        .unwrap()
        .build()
        .unwrap()
        .metadata
}

/// Answers the calls of the vector cases (S3 Tables' REST endpoint and control plane).
fn s3tables_responder(req: &RecordedHttpRequest) -> Reply {
    let metadata = serde_json::to_value(table_metadata("s3://bucket-xyz--table-s3")).unwrap();
    let table_path = format!("/iceberg/v1/{ARN_ENCODED}/namespaces/sales/tables/orders");
    let location_path = format!("/tables/{ARN_ENCODED}/sales/orders/metadata-location");
    match (req.method.as_str(), req.path()) {
        ("GET", "/iceberg/v1/config") => Reply::json(
            200,
            &json!({"defaults": {}, "overrides": {"prefix": ARN_ENCODED}}),
        ),
        ("GET", p) if p == table_path => Reply::json(
            200,
            &json!({"metadata-location": "s3://bucket-xyz--table-s3/metadata/00000-6b0a9c35-4f2e-4a44-9e45-8a3f1f5b0e11.metadata.json",
                    "metadata": metadata, "config": {}}),
        ),
        ("POST", p) if p == table_path => Reply::json(
            200,
            &json!({"metadata-location": "s3://bucket-xyz--table-s3/metadata/00001-3e4d2b67-9a0c-4d1f-8f61-2b7a4c9d0e22.metadata.json",
                    "metadata": metadata}),
        ),
        ("GET", p) if p == location_path => Reply::json(
            200,
            &json!({"versionToken": "abc123", "metadataLocation": "s3://bucket-xyz--table-s3/metadata/00000-uuid.metadata.json",
                    "warehouseLocation": "s3://bucket-xyz--table-s3"}),
        ),
        ("PUT", p) if p == location_path => Reply::json(
            200,
            &json!({"name": "orders", "tableARN": format!("{ARN}/table/orders"), "namespace": ["sales"],
                    "versionToken": "def456", "metadataLocation": "s3://bucket-xyz--table-s3/metadata/00001-uuid.metadata.json"}),
        ),
        _ => Reply::json(
            404,
            &json!({"error": {"message": "no route", "type": "NotFound", "code": 404}}),
        ),
    }
}

#[tokio::test]
async fn sigv4_requests_match_the_botocore_vectors() {
    let v = vectors();
    let pinned = UNIX_EPOCH + Duration::from_secs(1_736_929_845);
    assert_eq!(v["fixed_time"], "2025-01-15T08:30:45+00:00");
    let server = RecordingServer::start(s3tables_responder).await.unwrap();
    // The vectors sign host `s3tables.us-east-1.amazonaws.com`: resolve it to the recorder and
    // use http (the scheme is not part of the signature).
    let http = reqwest::Client::builder()
        .resolve(HOST, server.addr())
        .build()
        .unwrap();
    let (ak, sk) = (
        v["access_key_id"].as_str().unwrap(),
        v["secret_access_key"].as_str().unwrap(),
    );

    let config = RestCatalogConfig::from_props_with_env(
        &props(&[
            ("uri", &format!("http://{HOST}/iceberg")),
            ("warehouse", ARN),
            ("rest.sigv4-enabled", "true"),
            ("rest.signing-region", "us-east-1"),
            ("rest.signing-name", "s3tables"),
            ("rest.access-key-id", ak),
            ("rest.secret-access-key", sk),
        ]),
        |_| None,
    )
    .unwrap();
    let catalog = RestCatalogBuilder::new(config)
        .http_client(http.clone())
        .signing_clock(Arc::new(move || pinned))
        .connect("s3tables")
        .await
        .unwrap();
    assert_eq!(catalog.prefix(), Some(ARN_ENCODED));
    let ident = TableIdent::from_strs(["sales", "orders"]).unwrap();
    catalog.load_table(&ident).await.unwrap();
    catalog
        .commit_table(
            &ident,
            &[TableRequirement::CurrentSchemaIdMatch {
                current_schema_id: 0,
            }],
            &[],
        )
        .await
        .unwrap();

    let control = S3TablesConfig::from_props_with_env(
        &props(&[
            ("uri", &format!("http://{HOST}")),
            ("warehouse", ARN),
            ("s3tables.access-key-id", ak),
            ("s3tables.secret-access-key", sk),
        ]),
        |_| None,
    )
    .unwrap();
    let client = S3TablesClient::with_http_client(&control, http, Arc::new(move || pinned));
    client
        .get_table_metadata_location(ARN, "sales", "orders")
        .await
        .unwrap();
    let answer = client
        .update_table_metadata_location(
            ARN,
            "sales",
            "orders",
            "abc123",
            "s3://bucket-xyz--table-s3/metadata/00001-uuid.metadata.json",
        )
        .await
        .unwrap();
    assert_eq!(answer["versionToken"], "def456");

    let sent = server.requests();
    let cases = v["cases"].as_array().unwrap();
    assert_eq!(sent.len(), cases.len(), "{sent:#?}");
    let mut failures = Vec::new();
    for (req, case) in sent.iter().zip(cases) {
        let name = case["name"].as_str().unwrap();
        let url = case["url"].as_str().unwrap();
        let want_target = &url[url.find(HOST).unwrap() + HOST.len()..];
        let want_body = case["body"].as_str().unwrap_or("").as_bytes();
        let mut check = |what: &str, got: Option<&str>, want: Option<&str>| {
            if got != want {
                failures.push(format!("{name}: {what}: got {got:?}, want {want:?}"));
            }
        };
        check("method", Some(&req.method), case["method"].as_str());
        check(
            "path and query",
            Some(&req.path_and_query),
            Some(want_target),
        );
        check(
            "body",
            std::str::from_utf8(&req.body).ok(),
            std::str::from_utf8(want_body).ok(),
        );
        check("host", req.header("host"), Some(HOST));
        check(
            "x-amz-date",
            req.header("x-amz-date"),
            case["x-amz-date"].as_str(),
        );
        check(
            "authorization",
            req.header("authorization"),
            case["authorization"].as_str(),
        );
        check(
            "content-type",
            req.header("content-type"),
            case["headers_in"]["Content-Type"].as_str(),
        );
        check(
            "x-amz-content-sha256",
            req.header("x-amz-content-sha256"),
            None,
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn commit_5xx_is_state_unknown_and_409_a_retryable_conflict() {
    let status = Arc::new(AtomicU16::new(503));
    let answer = status.clone();
    let metadata = serde_json::to_value(table_metadata("file:///tmp/floe-wire/t")).unwrap();
    let server = RecordingServer::start(move |req| match (req.method.as_str(), req.path()) {
        ("GET", "/v1/config") => Reply::json(200, &json!({"overrides": {"prefix": "p"}})),
        ("GET", "/v1/p/namespaces/ns/tables/t") => Reply::json(
            200,
            &json!({"metadata-location": "file:///tmp/floe-wire/t/metadata/00000-6b0a9c35-4f2e-4a44-9e45-8a3f1f5b0e11.metadata.json",
                    "metadata": metadata}),
        ),
        ("POST", "/v1/p/namespaces/ns/tables/t") => {
            let s = answer.load(Ordering::SeqCst);
            Reply::json(s, &json!({"error": {"message": "upstream trouble", "type": "ServiceFailure", "code": s}}))
        }
        _ => Reply::empty(404),
    })
    .await
    .unwrap();
    let catalog = RestCatalog::from_props("wire", &props(&[("uri", &server.endpoint())]))
        .await
        .unwrap();
    let ident = TableIdent::from_strs(["ns", "t"]).unwrap();
    let table = catalog.load_table(&ident).await.unwrap();
    for s in [500, 502, 503, 504] {
        status.store(s, Ordering::SeqCst);
        let tx = common::append_transaction(&table, &["x"]).await;
        let e = tx.commit(&catalog).await.unwrap_err();
        assert!(is_commit_state_unknown(&e), "{s}: {e}");
        assert!(
            !e.retryable(),
            "{s}: a commit with an unknown outcome must not be retried blindly"
        );
        let floe = floe_iceberg::rest::into_floe_error(e);
        assert_eq!(floe.kind(), floe_core::ErrorKind::StateUnknown, "{s}");
    }
    status.store(409, Ordering::SeqCst);
    let e = catalog
        .commit_table(
            &ident,
            &[TableRequirement::CurrentSchemaIdMatch {
                current_schema_id: 0,
            }],
            &[],
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CatalogCommitConflicts, "{e}");
    assert!(e.retryable());
    assert!(!is_commit_state_unknown(&e));
    // Each 5xx commit was sent once: iceberg's transaction did not retry it.
    let commits = server
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .count();
    assert_eq!(commits, 5);
}

#[tokio::test]
async fn oauth2_token_is_cached_refreshed_before_expiry_and_after_a_401() {
    let issued = Arc::new(AtomicUsize::new(0));
    let min_valid = Arc::new(AtomicUsize::new(1));
    let (iss, min) = (issued.clone(), min_valid.clone());
    let server = RecordingServer::start(move |req| {
        if req.path() == "/v1/oauth/tokens" {
            let n = iss.fetch_add(1, Ordering::SeqCst) + 1;
            let expires = if n == 1 { 1 } else { 3600 };
            return Reply::json(
                200,
                &json!({"access_token": format!("tok-{n}"), "token_type": "bearer", "expires_in": expires}),
            );
        }
        let token_no = req
            .header("authorization")
            .and_then(|h| h.strip_prefix("Bearer tok-"))
            .and_then(|n| n.parse::<usize>().ok());
        match token_no {
            Some(n) if n >= min.load(Ordering::SeqCst) => match req.path() {
                "/v1/config" => Reply::json(200, &json!({"defaults": {}, "overrides": {}})),
                _ => Reply::json(200, &json!({"namespaces": [["a"]]})),
            },
            _ => Reply::json(401, &json!({"error": {"message": "bad token", "type": "NotAuthorized", "code": 401}})),
        }
    })
    .await
    .unwrap();
    let catalog = RestCatalog::from_props(
        "oauth",
        &props(&[
            ("uri", &server.endpoint()),
            ("credential", "floe:s3cr3t"),
            ("scope", "catalog"),
        ]),
    )
    .await
    .unwrap();
    catalog.list_namespaces(None).await.unwrap();
    assert_eq!(
        issued.load(Ordering::SeqCst),
        1,
        "the token is reused while valid"
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    catalog.list_namespaces(None).await.unwrap();
    assert_eq!(
        issued.load(Ordering::SeqCst),
        2,
        "a new token before the old one expires"
    );
    min_valid.store(3, Ordering::SeqCst);
    catalog.list_namespaces(None).await.unwrap();
    assert_eq!(issued.load(Ordering::SeqCst), 3, "a new token after a 401");

    let sent = server.requests();
    let token_request = sent
        .iter()
        .find(|r| r.path() == "/v1/oauth/tokens")
        .unwrap();
    let form = String::from_utf8(token_request.body.clone()).unwrap();
    for part in [
        "grant_type=client_credentials",
        "client_id=floe",
        "client_secret=s3cr3t",
        "scope=catalog",
    ] {
        assert!(form.split('&').any(|p| p == part), "{form}");
    }
    assert_eq!(sent.iter().filter(|r| r.path() == "/v1/config").count(), 1);
    assert!(!format!("{catalog:?}").contains("s3cr3t"));
}

#[tokio::test]
async fn oss_file_io_goes_to_the_s3_endpoint_without_flexible_checksums() {
    let objects: Arc<Mutex<HashMap<String, Vec<u8>>>> = Arc::default();
    let store = objects.clone();
    let server = RecordingServer::start(move |req| {
        let mut objects = store.lock().unwrap();
        match req.method.as_str() {
            "PUT" => {
                objects.insert(req.path().to_owned(), req.body.clone());
                let mut r = Reply::empty(200);
                r.headers.push(("etag".into(), "\"e\"".into()));
                r
            }
            "GET" | "HEAD" => match objects.get(req.path()) {
                Some(body) => {
                    let mut r = Reply::bytes(
                        200,
                        if req.method == "GET" {
                            body.clone()
                        } else {
                            Vec::new()
                        },
                    );
                    r.headers
                        .push(("content-length".into(), body.len().to_string()));
                    r.headers.push(("etag".into(), "\"e\"".into()));
                    r.headers.push((
                        "last-modified".into(),
                        "Wed, 15 Jan 2025 08:30:45 GMT".into(),
                    ));
                    r
                }
                None => Reply::empty(404),
            },
            _ => Reply::empty(405),
        }
    })
    .await
    .unwrap();
    let io = table_file_io(
        "oss://lake/warehouse/t",
        &props(&[
            ("s3.endpoint", &server.endpoint()),
            ("s3.access-key-id", "LTAI-test"),
            ("s3.secret-access-key", "oss-secret"),
            ("s3.path-style-access", "true"),
            ("client.region", "cn-hangzhou"),
        ]),
    )
    .unwrap();
    let path = "oss://lake/warehouse/t/metadata/00000-x.metadata.json";
    io.new_output(path)
        .unwrap()
        .write(b"{\"hello\":1}".to_vec().into())
        .await
        .unwrap();
    let back = io.new_input(path).unwrap().read().await.unwrap();
    assert_eq!(&back[..], b"{\"hello\":1}");

    let sent = server.requests();
    let put = sent.iter().find(|r| r.method == "PUT").expect("a PUT");
    assert_eq!(
        put.path(),
        "/lake/warehouse/t/metadata/00000-x.metadata.json"
    );
    let auth = put.header("authorization").unwrap_or_default();
    assert!(
        auth.starts_with("AWS4-HMAC-SHA256 Credential=LTAI-test/"),
        "{auth}"
    );
    assert!(auth.contains("/cn-hangzhou/s3/aws4_request"), "{auth}");
    for r in &sent {
        for (name, value) in &r.headers {
            assert!(
                !name.starts_with("x-amz-checksum")
                    && name != "x-amz-sdk-checksum-algorithm"
                    && name != "x-amz-trailer",
                "{} {}: flexible checksum header {name}: {value}",
                r.method,
                r.path()
            );
        }
        assert_ne!(
            r.header("content-encoding"),
            Some("aws-chunked"),
            "{} {}",
            r.method,
            r.path()
        );
    }
}
