//! A long-lived process on AWS (`floe run --watch` in a container): floe's own SigV4 signers,
//! the REST catalog's and the S3 Tables client's, take their keys from the AWS default chain,
//! here container credentials (`AWS_CONTAINER_CREDENTIALS_FULL_URI` +
//! `AWS_CONTAINER_AUTHORIZATION_TOKEN`) served by a local endpoint with a short expiry. Both
//! clients share one fetch; once the keys come within a minute of expiry the next request
//! fetches again and signs with the new keys, which are then the only ones the SigV4 gates
//! before the servers accept.
//!
//! The chain reads the process environment, which a test cannot change safely, so the test
//! runs its body in a child process of this binary with exactly that environment (no `AWS_*`
//! keys, no profile files, no instance metadata), and checks the child's output for the keys.

use std::collections::HashMap;
use std::time::Duration;

use floe_iceberg::rest::RestCatalog;
use floe_iceberg::s3tables::{S3TablesClient, S3TablesConfig};
use floe_signing::Credentials;
use floe_testbed::recorder::{RecordingServer, Reply};
use floe_testbed::servers::{ContainerCredentials, Linearizer, SigV4Gate, free_port};
use iceberg::Catalog;

const REGION: &str = "us-east-1";
const AUTHORIZATION: &str = "floe-test-container-authorization";
const PORT_VAR: &str = "FLOE_TEST_CONTAINER_CREDENTIALS_PORT";
const CHILD: &str = "container_credentials_child";
const FIRST_SECRET: &str = "floe-first-container-secret-0123456789";
const FIRST_TOKEN: &str = "floe-first-container-session-token";
const NEXT_SECRET: &str = "floe-next-container-secret-9876543210";
const NEXT_TOKEN: &str = "floe-next-container-session-token";

fn first() -> Credentials {
    Credentials::new("ASIAFLOEFIRST", FIRST_SECRET).with_security_token(FIRST_TOKEN)
}

fn next() -> Credentials {
    Credentials::new("ASIAFLOENEXT", NEXT_SECRET).with_security_token(NEXT_TOKEN)
}

#[test]
fn aws_signers_take_refreshed_container_credentials() {
    let port = free_port().unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child
        .args([CHILD, "--exact", "--ignored", "--nocapture"])
        .env(PORT_VAR, port.to_string());
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("AWS_")) {
        child.env_remove(k);
    }
    let missing = std::env::temp_dir().join("floe-no-such-aws-profile");
    child
        .env(
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            format!("http://127.0.0.1:{port}/credentials"),
        )
        .env("AWS_CONTAINER_AUTHORIZATION_TOKEN", AUTHORIZATION)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", &missing)
        .env("AWS_SHARED_CREDENTIALS_FILE", &missing);
    let out = child.output().unwrap();
    let output =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{output}");
    assert!(
        output.contains("1 passed"),
        "the child ran nothing: {output}"
    );
    for secret in [FIRST_SECRET, FIRST_TOKEN, NEXT_SECRET, NEXT_TOKEN] {
        assert!(
            !output.contains(secret),
            "a key secret or token was printed: {}",
            output.replace(secret, "<secret>")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the body of aws_signers_take_refreshed_container_credentials, run in its environment"]
async fn container_credentials_child() {
    let port: u16 = std::env::var(PORT_VAR)
        .expect("run by aws_signers_take_refreshed_container_credentials")
        .parse()
        .unwrap();
    // Keys valid for 65 s: kept for a few seconds, then within the refresh margin (60 s).
    let endpoint =
        ContainerCredentials::start(port, AUTHORIZATION, first(), Duration::from_secs(65))
            .await
            .unwrap();
    let upstream = RecordingServer::start(|req| {
        if req.path().ends_with("/namespaces") {
            Reply::json(200, &serde_json::json!({"namespaces": [["bronze"]]}))
        } else {
            Reply::json(
                200,
                &serde_json::json!({"arn": "arn:aws:s3tables:us-east-1:1:bucket/b", "name": "b"}),
            )
        }
    })
    .await
    .unwrap();
    let rest_gate = Linearizer::start_sigv4(
        &upstream.endpoint(),
        SigV4Gate::new("glue", REGION, first(), "unused").with_config_prefix("catalogs/floe"),
    )
    .await
    .unwrap();
    let tables_gate = Linearizer::start_sigv4(
        &upstream.endpoint(),
        SigV4Gate::new("s3tables", REGION, first(), "unused"),
    )
    .await
    .unwrap();

    let props = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let catalog = RestCatalog::from_props(
        "glue",
        &props(&[
            ("uri", rest_gate.endpoint()),
            ("rest.sigv4-enabled", "true"),
            ("rest.signing-name", "glue"),
            ("rest.signing-region", REGION),
        ]),
    )
    .await
    .unwrap();
    let arn = "arn:aws:s3tables:us-east-1:1:bucket/b";
    let tables = S3TablesClient::new(
        &S3TablesConfig::from_props(&props(&[
            ("uri", tables_gate.endpoint()),
            ("warehouse", arn),
        ]))
        .unwrap(),
    )
    .unwrap();

    // Both signers, twice, with the first keys: one fetch between them.
    for _ in 0..2 {
        catalog.list_namespaces(None).await.unwrap();
        tables.get_table_bucket(arn).await.unwrap();
    }
    assert_eq!(endpoint.hits(), 1, "the keys were not cached and shared");

    // The platform issues new keys; the old ones stop working.
    endpoint.set(next(), Duration::from_secs(3600));
    for gate in [&rest_gate, &tables_gate] {
        gate.set_gate_credentials(next());
    }
    // Wait until the first keys are within a minute of their expiry.
    tokio::time::sleep(Duration::from_millis(5500)).await;
    for _ in 0..2 {
        catalog.list_namespaces(None).await.unwrap();
        tables.get_table_bucket(arn).await.unwrap();
    }
    assert_eq!(endpoint.hits(), 2, "the new keys were not fetched once");
    for gate in [&rest_gate, &tables_gate] {
        let (checked, refused) = gate.gate_counts();
        assert_eq!(refused, 0, "a request was signed with expired keys");
        assert!(checked >= 4, "{checked}");
    }
}
