//! The s3tables catalog and admin calls against moto's S3 Tables control plane and S3 (one
//! moto server, started here): the seed's steps (table bucket, namespace, table from the schema
//! document), appends, a stale versionToken refused with 409, two racing writers (one retried),
//! table management, and a pyiceberg read-back of the data files on moto's S3.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use common::{RacingCatalog, append, append_transaction, seed_creation, total_records};
use floe_iceberg::s3tables::{S3TablesAdmin, S3TablesCatalog};
use floe_testbed::servers::MotoServer;
use floe_testbed::venv::{python_with, run_python};
use iceberg::{Catalog, ErrorKind, NamespaceIdent, TableIdent};
use serde_json::json;

const KEY: &str = "testing";
const REGION: &str = "us-east-1";

fn props(moto: &MotoServer, warehouse: Option<&str>) -> HashMap<String, String> {
    let mut p: HashMap<String, String> = [
        ("type", "s3tables"),
        ("uri", &moto.endpoint()),
        ("client.region", REGION),
        ("s3tables.access-key-id", KEY),
        ("s3tables.secret-access-key", KEY),
        ("s3.endpoint", &moto.endpoint()),
        ("s3.access-key-id", KEY),
        ("s3.secret-access-key", KEY),
        ("s3.path-style-access", "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    if let Some(w) = warehouse {
        p.insert("warehouse".into(), w.into());
    }
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3tables_catalog_against_moto() {
    let moto = MotoServer::start()
        .await
        .expect("moto_server must run for this test");

    // The seed's `aws s3tables` steps.
    let admin = S3TablesAdmin::from_props(&props(&moto, None)).unwrap();
    let bucket = admin.create_table_bucket("floe-lake").await.unwrap();
    let arn = bucket["arn"].as_str().unwrap().to_owned();
    assert!(
        arn.starts_with("arn:aws:s3tables:us-east-1:") && arn.ends_with(":bucket/floe-lake"),
        "{arn}"
    );
    let ns = admin.create_namespace(&arn, "bronze").await.unwrap();
    assert_eq!(ns, json!({"tableBucketARN": arn, "namespace": ["bronze"]}));
    let schema_doc = json!({"iceberg": {"schema": {"fields": [
        {"name": "event_id", "type": "string", "required": true},
        {"name": "event_time", "type": "string"},
        {"name": "event_type", "type": "string"}
    ]}}});
    let created = admin
        .create_table(&arn, "bronze", "events", Some(&schema_doc))
        .await
        .unwrap();
    assert_eq!(created["tableARN"], json!(format!("{arn}/table/events")));
    let state = admin.get_table(&arn, "bronze", "events").await.unwrap();
    assert_eq!(state["versionToken"], created["versionToken"]);
    let warehouse = state["warehouseLocation"].as_str().unwrap().to_owned();
    assert!(
        state["metadataLocation"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{warehouse}/metadata/00000-")),
        "{state}"
    );

    // The catalog over that bucket.
    let cat = S3TablesCatalog::from_props("s3tables", &props(&moto, Some(&arn))).unwrap();
    let bronze = NamespaceIdent::new("bronze".into());
    assert_eq!(
        cat.list_namespaces(None).await.unwrap(),
        vec![bronze.clone()]
    );
    assert!(cat.namespace_exists(&bronze).await.unwrap());
    assert!(
        !cat.namespace_exists(&NamespaceIdent::new("nope".into()))
            .await
            .unwrap()
    );
    let ident = TableIdent::new(bronze.clone(), "events".into());
    let table = cat.load_table(&ident).await.unwrap();
    let fields: Vec<(i32, String, bool)> = table
        .metadata()
        .current_schema()
        .as_struct()
        .fields()
        .iter()
        .map(|f| (f.id, f.name.clone(), f.required))
        .collect();
    assert_eq!(
        fields,
        [
            (1, "event_id".into(), true),
            (2, "event_time".into(), false),
            (3, "event_type".into(), false)
        ]
    );
    assert_eq!(
        total_records(&append(&cat, &ident, &["a1", "a2", "a3"]).await.unwrap()),
        3
    );

    // A stale versionToken is refused with a conflict.
    let e = cat
        .client()
        .update_table_metadata_location(
            &arn,
            "bronze",
            "events",
            "stale-token",
            &format!("{warehouse}/metadata/x.metadata.json"),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), floe_core::ErrorKind::Conflict, "{e}");
    assert!(e.is_retryable());

    // Two writers based on the same version: one gets the stale-token 409, retries, lands.
    let (c1, c2, conflicts) = RacingCatalog::pair(
        Arc::new(S3TablesCatalog::from_props("a", &props(&moto, Some(&arn))).unwrap()),
        Arc::new(S3TablesCatalog::from_props("b", &props(&moto, Some(&arn))).unwrap()),
    );
    let (t1, t2) = (
        c1.load_table(&ident).await.unwrap(),
        c2.load_table(&ident).await.unwrap(),
    );
    let (tx1, tx2) = (
        append_transaction(&t1, &["b1", "b2"]).await,
        append_transaction(&t2, &["c1", "c2"]).await,
    );
    let (r1, r2) = tokio::join!(tx1.commit(&c1), tx2.commit(&c2));
    r1.expect("first writer");
    r2.expect("second writer");
    assert_eq!(
        conflicts.load(Ordering::SeqCst),
        1,
        "exactly one writer must have hit a stale token"
    );
    let table = cat.load_table(&ident).await.unwrap();
    assert_eq!(total_records(&table), 7);
    assert_eq!(table.metadata().snapshots().count(), 3);
    let location = table.metadata_location().unwrap().to_owned();
    assert!(
        location.starts_with(&format!("{warehouse}/metadata/00003-")),
        "{location}"
    );

    // Tables created through the catalog, renamed and dropped.
    let other = cat
        .create_table(&bronze, seed_creation("other"))
        .await
        .unwrap();
    assert!(
        other
            .metadata_location()
            .unwrap()
            .contains("/metadata/00000-")
    );
    let e = cat
        .create_table(&bronze, seed_creation("other"))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TableAlreadyExists, "{e}");
    let renamed = TableIdent::new(bronze.clone(), "other2".into());
    cat.rename_table(&TableIdent::new(bronze.clone(), "other".into()), &renamed)
        .await
        .unwrap();
    assert!(cat.table_exists(&renamed).await.unwrap());
    let mut tables = cat.list_tables(&bronze).await.unwrap();
    tables.sort();
    assert_eq!(tables, vec![ident.clone(), renamed.clone()]);
    cat.drop_table(&renamed).await.unwrap();
    assert!(!cat.table_exists(&renamed).await.unwrap());
    let e = cat.load_table(&renamed).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TableNotFound, "{e}");

    // An independent reader: pyiceberg reads the metadata and data files from moto's S3.
    let python =
        python_with(&[("pyiceberg", "pyiceberg[sql-sqlite,pyarrow,pyiceberg-core]")]).unwrap();
    let script = floe_testbed::templates::repo_root().join("tests/py/read_static_table.py");
    let out = run_python(
        &python,
        &script,
        &[&location, &moto.endpoint(), KEY, KEY, REGION, "event_id"],
    )
    .unwrap_or_else(|e| panic!("{e}\nmoto log:\n{}", moto.log_tail()));
    let read: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(read["rows"], 7, "{read}");
    assert_eq!(read["snapshots"], 3, "{read}");
}
