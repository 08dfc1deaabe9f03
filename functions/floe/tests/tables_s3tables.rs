//! `floe tables <s3tables call>`, the seed's `aws s3tables` steps with the AWS CLI's
//! arguments and output: against moto for what moto implements (table bucket, namespace,
//! tables from `--metadata file://…` and `--cli-input-json file://…`, get-table), and the
//! maintenance calls moto lacks against a recording server, checked against the requests
//! botocore builds for the same inputs (`shared/iceberg-sink/tests/fixtures/s3tables`).

mod common;

use std::path::{Path, PathBuf};

use common::{Ran, floe_async};
use floe_testbed::recorder::{RecordingServer, Reply};
use floe_testbed::servers::MotoServer;
use serde_json::{Value, json};

fn json_out(r: &Ran) -> Value {
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", r.stdout))
}

const SCHEMA: &str = r#"{
  "iceberg": {
    "schema": {
      "fields": [
        {"name": "event_id", "type": "string", "required": true},
        {"name": "event_time", "type": "string"},
        {"name": "event_type", "type": "string"}
      ]
    }
  }
}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_steps_against_moto() {
    let moto = MotoServer::start().await.expect("start moto_server");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let ep = moto.endpoint();
    let keys = [
        ("AWS_ACCESS_KEY_ID", MotoServer::ACCESS_KEY_ID),
        ("AWS_SECRET_ACCESS_KEY", MotoServer::SECRET_ACCESS_KEY),
    ];

    // `aws s3tables --endpoint … create-table-bucket --region … --name …`, keys from the
    // environment.
    let r = floe_async(
        dir,
        &[
            "tables",
            "create-table-bucket",
            "--endpoint",
            &ep,
            "--region",
            MotoServer::REGION,
            "--name",
            "floe-lake",
        ],
        &keys,
    )
    .await
    .expect_code(0, "create-table-bucket");
    assert!(
        r.stdout.starts_with("{\n    \"arn\""),
        "the AWS CLI's layout: {}",
        r.stdout
    );
    let arn = json_out(&r)["arn"].as_str().unwrap().to_owned();
    assert!(arn.ends_with(":bucket/floe-lake"), "{arn}");

    // The rest through a file holding just a catalog block (Kafka Connect names) of the
    // s3tables catalog; its s3.* keys also let floe write the first metadata file moto does
    // not write.
    std::fs::write(
        dir.join("admin.properties"),
        format!(
            "iceberg.catalog.type=s3tables\n\
             iceberg.catalog.uri={ep}\n\
             iceberg.catalog.warehouse={arn}\n\
             iceberg.catalog.client.region={region}\n\
             iceberg.catalog.s3tables.access-key-id={k}\n\
             iceberg.catalog.s3tables.secret-access-key={k}\n\
             iceberg.catalog.s3.endpoint={ep}\n\
             iceberg.catalog.s3.access-key-id={k}\n\
             iceberg.catalog.s3.secret-access-key={k}\n\
             iceberg.catalog.s3.path-style-access=true\n",
            region = MotoServer::REGION,
            k = MotoServer::ACCESS_KEY_ID,
        ),
    )
    .unwrap();
    let admin = |args: &[&str]| {
        let mut all = vec!["tables"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--config", "admin.properties"]);
        let all: Vec<String> = all.iter().map(|s| s.to_string()).collect();
        async move {
            let all: Vec<&str> = all.iter().map(String::as_str).collect();
            floe_async(dir, &all, &[]).await
        }
    };
    let r = admin(&[
        "create-namespace",
        "--table-bucket-arn",
        &arn,
        "--namespace",
        "bronze",
    ])
    .await
    .expect_code(0, "create-namespace");
    assert_eq!(
        json_out(&r),
        json!({"tableBucketARN": arn, "namespace": ["bronze"]})
    );

    std::fs::write(dir.join("schema.json"), SCHEMA).unwrap();
    let r = admin(&[
        "create-table",
        "--table-bucket-arn",
        &arn,
        "--namespace",
        "bronze",
        "--name",
        "events",
        "--format",
        "ICEBERG",
        "--metadata",
        &format!("file://{}", dir.join("schema.json").display()),
    ])
    .await
    .expect_code(0, "create-table --metadata");
    let created = json_out(&r);
    assert_eq!(created["tableARN"], json!(format!("{arn}/table/events")));
    assert!(created["versionToken"].is_string(), "{created}");

    // The AWS CLI's other form: every argument in one JSON file.
    let input = json!({
        "tableBucketARN": arn,
        "namespace": "bronze",
        "name": "events_v2",
        "format": "ICEBERG",
        "metadata": serde_json::from_str::<Value>(SCHEMA).unwrap(),
    });
    std::fs::write(dir.join("create-table.json"), input.to_string()).unwrap();
    let r = admin(&[
        "create-table",
        "--cli-input-json",
        &format!("file://{}", dir.join("create-table.json").display()),
    ])
    .await
    .expect_code(0, "create-table --cli-input-json");
    assert_eq!(
        json_out(&r)["tableARN"],
        json!(format!("{arn}/table/events_v2"))
    );

    let r = admin(&[
        "get-table",
        "--table-bucket-arn",
        &arn,
        "--namespace",
        "bronze",
        "--name",
        "events",
    ])
    .await
    .expect_code(0, "get-table");
    let state = json_out(&r);
    assert_eq!(state["versionToken"], created["versionToken"]);
    assert!(
        state["metadataLocation"]
            .as_str()
            .is_some_and(|l| l.contains("/metadata/00000-")),
        "{state}"
    );

    // Errors name the thing and exit non-zero.
    let r = admin(&[
        "create-namespace",
        "--table-bucket-arn",
        &format!("{arn}-missing"),
        "--namespace",
        "bronze",
    ])
    .await;
    assert_ne!(r.code, 0, "{}", r.stdout);
    assert!(r.stderr.starts_with("error: "), "{}", r.stderr);
}

fn fixture() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/iceberg-sink/tests/fixtures/s3tables/requests.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_commands_send_what_botocore_sends() {
    let server = RecordingServer::start(|req| match (req.method.as_str(), req.path()) {
        ("GET", p) if p.ends_with("/maintenance-job-status") => Reply::json(
            200,
            &json!({"tableARN": "arn:aws:s3tables:us-east-1:111122223333:bucket/my-table-bucket/table/t1",
                    "status": {"icebergCompaction": {"status": "Successful",
                                                     "lastRunTimestamp": "2025-01-15T08:00:00Z"}}}),
        ),
        ("PUT", p) if p.contains("/maintenance/") => Reply::empty(204),
        _ => Reply::json(400, &json!({"message": "unexpected"})),
    })
    .await
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir: &Path = tmp.path();
    let ep = server.endpoint();
    let env = [
        ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
        (
            "AWS_SECRET_ACCESS_KEY",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        ),
        ("AWS_REGION", "us-east-1"),
    ];
    let cases = fixture()["cases"].as_array().unwrap().clone();
    let case = |op: &str| {
        cases
            .iter()
            .find(|c| c["operation"] == op)
            .unwrap_or_else(|| panic!("no fixture for {op}"))
            .clone()
    };

    // The seed's command lines, `--opt=value` forms included.
    let status = case("get_table_maintenance_job_status");
    let p = &status["params"];
    let r = floe_async(
        dir,
        &[
            "tables",
            "get-table-maintenance-job-status",
            &format!(
                "--table-bucket-arn={}",
                p["tableBucketARN"].as_str().unwrap()
            ),
            &format!("--namespace={}", p["namespace"].as_str().unwrap()),
            &format!("--name={}", p["name"].as_str().unwrap()),
            "--endpoint",
            &ep,
        ],
        &env,
    )
    .await
    .expect_code(0, "get-table-maintenance-job-status");
    assert_eq!(
        json_out(&r)["status"]["icebergCompaction"]["status"],
        "Successful"
    );

    let bucket = case("put_table_bucket_maintenance_configuration");
    let p = &bucket["params"];
    let r = floe_async(
        dir,
        &[
            "tables",
            "put-table-bucket-maintenance-configuration",
            "--table-bucket-arn",
            p["tableBucketARN"].as_str().unwrap(),
            "--type",
            p["type"].as_str().unwrap(),
            "--value",
            &p["value"].to_string(),
            "--endpoint",
            &ep,
        ],
        &env,
    )
    .await
    .expect_code(0, "put-table-bucket-maintenance-configuration");
    assert_eq!(r.stdout, "", "the AWS CLI prints nothing for a put");

    let table = case("put_table_maintenance_configuration");
    let p = &table["params"];
    floe_async(
        dir,
        &[
            "tables",
            "put-table-maintenance-configuration",
            "--table-bucket-arn",
            p["tableBucketARN"].as_str().unwrap(),
            "--type",
            p["type"].as_str().unwrap(),
            "--namespace",
            p["namespace"].as_str().unwrap(),
            "--name",
            p["name"].as_str().unwrap(),
            &format!("--value={}", p["value"]),
            "--endpoint",
            &ep,
        ],
        &env,
    )
    .await
    .expect_code(0, "put-table-maintenance-configuration");

    let sent = server.requests();
    assert_eq!(sent.len(), 3, "{sent:?}");
    for (got, case) in sent.iter().zip([status, bucket, table]) {
        let want = &case["request"];
        let op = case["operation"].as_str().unwrap();
        assert_eq!(got.method, want["method"], "{op}");
        assert_eq!(got.path(), want["path"], "{op}");
        let body: Value = if got.body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&got.body).unwrap()
        };
        assert_eq!(body, want["body"], "{op}");
        assert!(
            got.header("authorization")
                .is_some_and(|a| a.contains("/us-east-1/s3tables/aws4_request")),
            "{op}: signed for s3tables: {:?}",
            got.header("authorization")
        );
    }
}
