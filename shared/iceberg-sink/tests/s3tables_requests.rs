//! The S3 Tables requests floe builds, compared with the ones botocore builds for the same
//! inputs (`tests/fixtures/s3tables/requests.json`, made by `make_requests.py` beside it):
//! method, path, query, content type and JSON body. This covers the maintenance calls moto does
//! not implement, and the CLI-form `--metadata` document of create-table.

use std::collections::HashMap;
use std::path::PathBuf;

use floe_iceberg::rest::system_clock;
use floe_iceberg::s3tables::{S3TablesAdmin, S3TablesClient, S3TablesConfig};
use floe_testbed::recorder::{RecordingServer, Reply};
use serde_json::{Value, json};

fn fixture() -> Value {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/s3tables/requests.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("`{key}` missing in {v}"))
}

fn opt<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v[key].as_str()
}

#[tokio::test]
async fn requests_match_botocore() {
    let fixture = fixture();
    let server = RecordingServer::start(|req| {
        if req.path() == "/get-table" {
            // A table the server created metadata for: create_table has nothing more to do.
            return Reply::json(
                200,
                &json!({"versionToken": "v1", "metadataLocation": "s3://w/metadata/00000-x.metadata.json",
                        "warehouseLocation": "s3://w", "tableARN": "t"}),
            );
        }
        Reply::json(200, &json!({}))
    })
    .await
    .unwrap();
    let props: HashMap<String, String> = [
        ("uri", server.endpoint()),
        ("client.region", "us-east-1".into()),
        ("s3tables.access-key-id", "AKIDEXAMPLE".into()),
        ("s3tables.secret-access-key", "secret".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let config = S3TablesConfig::from_props_with_env(&props, |_| None).unwrap();
    let client = S3TablesClient::with_http_client(&config, reqwest::Client::new(), system_clock());
    let admin = S3TablesAdmin::with_client(&config, client.clone());

    let mut failures = Vec::new();
    for case in fixture["cases"].as_array().unwrap() {
        let op = s(case, "operation");
        let p = &case["params"];
        server.clear();
        let arn = opt(p, "tableBucketARN").unwrap_or_default();
        let (ns, name) = (
            opt(p, "namespace").unwrap_or_default(),
            opt(p, "name").unwrap_or_default(),
        );
        let result = match op {
            "create_table_bucket" => admin.create_table_bucket(name).await,
            "get_table_bucket" => client.get_table_bucket(arn).await,
            "create_namespace" => {
                admin
                    .create_namespace(arn, p["namespace"][0].as_str().unwrap())
                    .await
            }
            "get_namespace" => client.get_namespace(arn, ns).await,
            "list_namespaces" => {
                client
                    .list_namespaces(arn, opt(p, "continuationToken"))
                    .await
            }
            "delete_namespace" => client.delete_namespace(arn, ns).await,
            "create_table" => match p.get("metadata") {
                Some(m) => admin.create_table(arn, ns, name, Some(m)).await,
                None => client.create_table(arn, ns, name, None).await,
            },
            "get_table" => admin.get_table(arn, ns, name).await,
            "list_tables" => {
                client
                    .list_tables(arn, Some(ns), opt(p, "continuationToken"))
                    .await
            }
            "delete_table" => {
                client
                    .delete_table(arn, ns, name, opt(p, "versionToken"))
                    .await
            }
            "rename_table" => {
                client
                    .rename_table(
                        arn,
                        ns,
                        name,
                        opt(p, "newNamespaceName"),
                        opt(p, "newName"),
                        opt(p, "versionToken"),
                    )
                    .await
            }
            "get_table_metadata_location" => {
                client.get_table_metadata_location(arn, ns, name).await
            }
            "update_table_metadata_location" => {
                client
                    .update_table_metadata_location(
                        arn,
                        ns,
                        name,
                        s(p, "versionToken"),
                        s(p, "metadataLocation"),
                    )
                    .await
            }
            "get_table_maintenance_job_status" => {
                admin.get_table_maintenance_job_status(arn, ns, name).await
            }
            "get_table_maintenance_configuration" => {
                admin
                    .get_table_maintenance_configuration(arn, ns, name)
                    .await
            }
            "put_table_maintenance_configuration" => {
                admin
                    .put_table_maintenance_configuration(arn, ns, name, s(p, "type"), &p["value"])
                    .await
            }
            "get_table_bucket_maintenance_configuration" => {
                admin.get_table_bucket_maintenance_configuration(arn).await
            }
            "put_table_bucket_maintenance_configuration" => {
                admin
                    .put_table_bucket_maintenance_configuration(arn, s(p, "type"), &p["value"])
                    .await
            }
            other => panic!("the fixture has an operation this test does not know: {other}"),
        };
        if let Err(e) = result {
            failures.push(format!("{op}: {e}"));
            continue;
        }
        let sent = server.requests();
        let Some(got) = sent.first() else {
            failures.push(format!("{op}: nothing sent"));
            continue;
        };
        let want = &case["request"];
        let mut check = |what: &str, got: Value, want: Value| {
            if got != want {
                failures.push(format!("{op}: {what}: got {got}, want {want}"));
            }
        };
        check("method", json!(got.method), want["method"].clone());
        check("path", json!(got.path()), want["path"].clone());
        check("query", json!(got.query()), want["query"].clone());
        check(
            "content type",
            json!(got.header("content-type")),
            want["content_type"].clone(),
        );
        let body = if got.body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&got.body)
                .unwrap_or_else(|_| json!(String::from_utf8_lossy(&got.body)))
        };
        check("body", body, want["body"].clone());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn admin_outputs_are_shaped_like_the_aws_cli() {
    let server = RecordingServer::start(|req| match (req.method.as_str(), req.path()) {
        ("PUT", "/buckets") => Reply::json(200, &json!({"arn": "arn:aws:s3tables:us-east-1:1:bucket/b"})),
        // moto spells this member `tableBucketArn`; the CLI prints `tableBucketARN`.
        ("PUT", p) if p.starts_with("/namespaces/") => {
            Reply::json(200, &json!({"tableBucketArn": "arn:aws:s3tables:us-east-1:1:bucket/b", "namespace": ["sales"]}))
        }
        ("PUT", p) if p.contains("/maintenance/") => Reply::empty(204),
        _ => Reply::json(400, &json!({"message": "nope"})),
    })
    .await
    .unwrap();
    let props: HashMap<String, String> = [
        ("uri", server.endpoint()),
        ("client.region", "us-east-1".into()),
        ("s3tables.access-key-id", "AK".into()),
        ("s3tables.secret-access-key", "SK".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let admin = S3TablesAdmin::from_props(&props).unwrap();
    let arn = "arn:aws:s3tables:us-east-1:1:bucket/b";
    assert_eq!(
        admin.create_table_bucket("b").await.unwrap(),
        json!({"arn": arn})
    );
    assert_eq!(
        admin.create_namespace(arn, "sales").await.unwrap(),
        json!({"tableBucketARN": arn, "namespace": ["sales"]})
    );
    let value =
        json!({"status": "enabled", "settings": {"icebergCompaction": {"targetFileSizeMB": 256}}});
    assert_eq!(
        admin
            .put_table_maintenance_configuration(
                arn,
                "sales",
                "orders",
                "icebergCompaction",
                &value
            )
            .await
            .unwrap(),
        json!({})
    );
    let e = admin
        .put_table_bucket_maintenance_configuration(
            arn,
            "icebergUnreferencedFileRemoval",
            &json!("enabled"),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), floe_core::ErrorKind::InvalidInput);
    let e = admin
        .get_table_maintenance_job_status(arn, "sales", "orders")
        .await
        .unwrap_err();
    assert_eq!(e.kind(), floe_core::ErrorKind::InvalidInput, "{e}");
    assert!(
        e.to_string().contains("http 400") && e.to_string().contains("nope"),
        "{e}"
    );
}

/// What floe sets on a table it creates (`s3tables.managed-maintenance`, on by default): the
/// catalog's snapshot management on, and its compaction on, or off for a table whose rows floe
/// deletes by position (floe compacts those itself). Shaped as the
/// put-table-maintenance-configuration cases above.
#[tokio::test]
async fn managed_maintenance_turns_on_snapshot_management_and_compaction_unless_floe_compacts() {
    let server = RecordingServer::start(|_| Reply::json(200, &json!({})))
        .await
        .unwrap();
    let props: HashMap<String, String> = [
        ("uri", server.endpoint()),
        ("client.region", "us-east-1".into()),
        ("s3tables.access-key-id", "AKIDEXAMPLE".into()),
        ("s3tables.secret-access-key", "secret".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let config = S3TablesConfig::from_props_with_env(&props, |_| None).unwrap();
    assert!(config.managed_maintenance, "on unless set off");
    let client = S3TablesClient::with_http_client(&config, reqwest::Client::new(), system_clock());
    let arn = "arn:aws:s3tables:us-east-1:111122223333:bucket/b";
    for (compaction, status) in [(true, "enabled"), (false, "disabled")] {
        server.clear();
        client
            .set_managed_maintenance(arn, "ns", "t", compaction)
            .await
            .unwrap();
        let seen: Vec<(String, String, Value)> = (server.requests().iter())
            .map(|r| {
                (
                    r.method.clone(),
                    r.path().to_owned(),
                    serde_json::from_slice(&r.body).unwrap(),
                )
            })
            .collect();
        let base = "/tables/arn%3Aaws%3As3tables%3Aus-east-1%3A111122223333%3Abucket%2Fb/ns/t";
        assert_eq!(
            seen,
            [
                (
                    "PUT".to_owned(),
                    format!("{base}/maintenance/icebergSnapshotManagement"),
                    json!({"value": {"status": "enabled"}})
                ),
                (
                    "PUT".to_owned(),
                    format!("{base}/maintenance/icebergCompaction"),
                    json!({"value": {"status": status}})
                ),
            ]
        );
    }
    let off = HashMap::from([
        ("uri".to_owned(), server.endpoint()),
        ("client.region".to_owned(), "us-east-1".to_owned()),
        (
            "s3tables.managed-maintenance".to_owned(),
            "false".to_owned(),
        ),
    ]);
    let config = S3TablesConfig::from_props_with_env(&off, |_| None).unwrap();
    assert!(!config.managed_maintenance);
    let bad = HashMap::from([
        ("client.region".to_owned(), "us-east-1".to_owned()),
        (
            "s3tables.managed-maintenance".to_owned(),
            "sometimes".to_owned(),
        ),
    ]);
    let e = S3TablesConfig::from_props_with_env(&bad, |_| None).unwrap_err();
    assert!(
        e.to_string().contains("s3tables.managed-maintenance"),
        "{e}"
    );
}

/// OSS Tables signed as ossutil `tables-api` signs (`s3tables.signature = oss-v4`, the default
/// for an `acs:` warehouse): the requests floe's client sends for the seed's steps and the other
/// `floe tables` calls (all six of the OSS Tables seed's steps among them) carry the very
/// `Authorization` the OSS SDK's signer gives the same requests (`tests/vectors/oss_tables_signatures.json`), and the `Content-MD5` of their body.
#[tokio::test]
async fn oss_tables_calls_are_signed_as_ossutil_signs_them() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/vectors/oss_tables_signatures.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let server = RecordingServer::start(|_| Reply::json(200, &json!({})))
        .await
        .unwrap();
    let (arn, ns, table) = (
        s(&v, "table_bucket_arn"),
        s(&v, "namespace"),
        s(&v, "table"),
    );
    let clock: floe_iceberg::rest::auth::SigningClock = std::sync::Arc::new(|| {
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_796_112_000)
    });
    let mut checked = 0;
    for case in v["ossutil_cases"].as_array().unwrap() {
        let name = s(case, "name");
        let input = &case["inputs"];
        let c = &input["credentials"];
        let mut props: HashMap<String, String> = [
            ("uri", server.endpoint()),
            ("warehouse", arn.to_owned()),
            ("s3tables.access-key-id", s(c, "access_key_id").to_owned()),
            (
                "s3tables.secret-access-key",
                s(c, "access_key_secret").to_owned(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        if let Some(t) = c["security_token"].as_str() {
            props.insert("s3tables.session-token".into(), t.to_owned());
        }
        let config = S3TablesConfig::from_props_with_env(&props, |_| None).unwrap();
        assert_eq!(config.signature, floe_iceberg::s3tables::Signature::OssV4);
        let client =
            S3TablesClient::with_http_client(&config, reqwest::Client::new(), clock.clone());
        let body: Value = input["body"]
            .as_str()
            .filter(|b| !b.is_empty())
            .map(|b| serde_json::from_str(b).unwrap())
            .unwrap_or(Value::Null);
        server.clear();
        let sent = match name.trim_end_matches("_sts") {
            "create_table_bucket" => client.create_table_bucket(s(&body, "name")).await,
            "create_namespace" => client.create_namespace(arn, ns).await,
            "get_table_maintenance_job_status" => {
                client
                    .get_table_maintenance_job_status(arn, ns, table)
                    .await
            }
            "get_table_maintenance_configuration" => {
                client
                    .get_table_maintenance_configuration(arn, ns, table)
                    .await
            }
            "get_table_bucket_maintenance_configuration" => {
                client.get_table_bucket_maintenance_configuration(arn).await
            }
            "get_table" => client.get_table(arn, ns, table).await,
            "put_table_maintenance_configuration" => {
                let kind = input["path"].as_str().unwrap().rsplit('/').next().unwrap();
                client
                    .put_table_maintenance_configuration(arn, ns, table, kind, &body["value"])
                    .await
            }
            "put_table_bucket_maintenance_configuration" => {
                let kind = input["path"].as_str().unwrap().rsplit('/').next().unwrap();
                client
                    .put_table_bucket_maintenance_configuration(arn, kind, &body["value"])
                    .await
            }
            "create_table" => {
                client
                    .create_table(arn, ns, table, Some(&body["metadata"]))
                    .await
            }
            other => panic!("a vector case this test does not send: {other}"),
        };
        sent.unwrap();
        let requests = server.requests();
        let req = &requests[0];
        let out = &case["outputs"]["headers_after_signing"];
        assert_eq!(req.method, s(input, "method"), "{name}");
        assert_eq!(req.path(), s(input, "path"), "{name}");
        // The same pairs (botocore's order, not Go's sorted one: the signature sorts them).
        let sorted = |q: &str| {
            let mut p: Vec<String> = q.split('&').map(str::to_owned).collect();
            p.sort();
            p
        };
        assert_eq!(sorted(req.query()), sorted(s(input, "query")), "{name}");
        for header in ["Content-MD5", "x-oss-date", "Authorization"] {
            assert_eq!(req.header(header), out[header].as_str(), "{name}: {header}");
        }
        assert_eq!(
            req.header("x-oss-security-token"),
            out["x-oss-security-token"].as_str(),
            "{name}"
        );
        checked += 1;
    }
    assert_eq!(checked, 12, "cases compared");
}
