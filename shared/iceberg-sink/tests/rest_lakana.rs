//! floe's REST catalog against a real Iceberg REST server (lakana-server, started here), read
//! back with pyiceberg through the same REST endpoint.
//!
//! One test, in steps, so the server starts once: namespaces; a table with the seed's schema;
//! an append; two catalog clients appending at once (one gets a 409 and succeeds on retry);
//! errors for missing things; rename and drop; pyiceberg counts the rows.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use common::{RacingCatalog, append, append_transaction, seed_creation, total_records};
use floe_iceberg::rest::RestCatalog;
use floe_testbed::servers::LakanaServer;
use floe_testbed::venv::{python_with, run_python};
use iceberg::{Catalog, ErrorKind, NamespaceIdent, TableIdent};

async fn catalog(server: &LakanaServer) -> RestCatalog {
    let props: HashMap<String, String> = server.catalog_props().into_iter().collect();
    RestCatalog::from_props("lakana", &props)
        .await
        .expect("connect to lakana")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_catalog_against_lakana() {
    let server = LakanaServer::start()
        .await
        .expect("lakana-server must run for this test");
    let cat = catalog(&server).await;
    assert_eq!(cat.prefix(), Some("dev"));

    // Namespaces: lakana has bronze/silver/gold; a scratch one comes and goes.
    let bronze = NamespaceIdent::new("bronze".into());
    if !cat.namespace_exists(&bronze).await.unwrap() {
        cat.create_namespace(&bronze, HashMap::new()).await.unwrap();
    }
    let e = cat
        .create_namespace(&bronze, HashMap::new())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NamespaceAlreadyExists, "{e}");
    let scratch = NamespaceIdent::new("scratch".into());
    let created = cat
        .create_namespace(&scratch, HashMap::from([("owner".into(), "floe".into())]))
        .await
        .unwrap();
    assert_eq!(created.name(), &scratch);
    assert!(cat.namespace_exists(&scratch).await.unwrap());
    assert_eq!(
        cat.get_namespace(&scratch).await.unwrap().properties()["owner"],
        "floe"
    );
    let all = cat.list_namespaces(None).await.unwrap();
    assert!(all.contains(&bronze) && all.contains(&scratch), "{all:?}");
    cat.drop_namespace(&scratch).await.unwrap();
    assert!(!cat.namespace_exists(&scratch).await.unwrap());
    let e = cat.get_namespace(&scratch).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NamespaceNotFound, "{e}");

    // A table with the seed's schema, and one append.
    let ident = TableIdent::new(bronze.clone(), "events".into());
    let table = cat
        .create_table(&bronze, seed_creation("events"))
        .await
        .unwrap();
    assert_eq!(
        table.metadata().current_schema().as_struct().fields().len(),
        3
    );
    assert!(
        table.metadata().location().starts_with("file://"),
        "{}",
        table.metadata().location()
    );
    assert!(cat.table_exists(&ident).await.unwrap());
    assert_eq!(cat.list_tables(&bronze).await.unwrap(), vec![ident.clone()]);
    let e = cat
        .create_table(&bronze, seed_creation("events"))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TableAlreadyExists, "{e}");
    let after = append(&cat, &ident, &["a1", "a2", "a3"]).await.unwrap();
    assert_eq!(total_records(&after), 3);

    // Two clients append at once: both commits are based on the same snapshot, one gets a 409,
    // iceberg's transaction reloads and retries it, and both land.
    let (c1, c2, conflicts) = RacingCatalog::pair(
        Arc::new(catalog(&server).await),
        Arc::new(catalog(&server).await),
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
        "exactly one writer must have hit a 409"
    );
    let table = cat.load_table(&ident).await.unwrap();
    assert_eq!(total_records(&table), 7);
    assert_eq!(table.metadata().snapshots().count(), 3);

    // Missing things.
    let e = cat
        .load_table(&TableIdent::new(bronze.clone(), "nope".into()))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TableNotFound, "{e}");
    assert!(
        !cat.table_exists(&TableIdent::new(bronze.clone(), "nope".into()))
            .await
            .unwrap()
    );

    // Rename, and a table created only to be dropped.
    let renamed = TableIdent::new(bronze.clone(), "events_v2".into());
    cat.rename_table(&ident, &renamed).await.unwrap();
    assert!(!cat.table_exists(&ident).await.unwrap());
    assert_eq!(total_records(&cat.load_table(&renamed).await.unwrap()), 7);
    cat.create_table(&bronze, seed_creation("dropme"))
        .await
        .unwrap();
    cat.drop_table(&TableIdent::new(bronze.clone(), "dropme".into()))
        .await
        .unwrap();
    assert_eq!(
        cat.list_tables(&bronze).await.unwrap(),
        vec![renamed.clone()]
    );

    // An independent reader: pyiceberg through the same REST endpoint.
    let python =
        python_with(&[("pyiceberg", "pyiceberg[sql-sqlite,pyarrow,pyiceberg-core]")]).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/read_rest_table.py");
    let out = run_python(
        &python,
        &script,
        &[
            &server.uri(),
            &server.token(),
            server.prefix(),
            "bronze.events_v2",
        ],
    )
    .unwrap_or_else(|e| panic!("{e}\nlakana log:\n{}", server.log_tail()));
    let read: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(read["rows"], 7, "{read}");
    assert_eq!(read["snapshots"], 3, "{read}");
    let mut ids: Vec<String> = serde_json::from_value(read["event_ids"].clone()).unwrap();
    ids.sort();
    assert_eq!(ids, ["a1", "a2", "a3", "b1", "b2", "c1", "c2"]);
}
