//! `floe run` into an Iceberg REST catalog (lakana-server, bearer token), configured as a Kafka
//! Connect `.properties` file: two floe processes landing into the same table at once (a commit
//! that loses the race reloads the table and retries), read back with pyiceberg through the
//! same catalog.

mod common;

use std::path::Path;

use common::floe_async;
use floe_testbed::pyiceberg::read_rest_table;
use floe_testbed::servers::LakanaServer;

/// A working folder whose bucket holds `files` objects of `rows` records each, ids from
/// `first_id`, and a properties configuration for the REST catalog.
fn workdir(server: &LakanaServer, first_id: i64, files: i64, rows: i64) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let bucket = tmp.path().join("bucket/events");
    std::fs::create_dir_all(&bucket).unwrap();
    for f in 0..files {
        let body: String = (0..rows)
            .map(|r| {
                let id = first_id + f * rows + r;
                format!("{{\"id\":{id},\"kind\":\"k{}\"}}\n", id % 3)
            })
            .collect();
        std::fs::write(bucket.join(format!("part-{f}.ndjson")), body).unwrap();
    }
    std::fs::write(
        tmp.path().join("floe.properties"),
        format!(
            "# the catalog block, Kafka Connect names\n\
             iceberg.catalog.type=rest\n\
             iceberg.catalog.uri={uri}\n\
             iceberg.catalog.token=${{env:FLOE_TEST_LAKANA_TOKEN}}\n\
             iceberg.catalog.prefix={prefix}\n\
             iceberg.tables=bronze.events\n\
             iceberg.control.commit.interval-ms=1000\n\
             # where objects come from\n\
             source.type=local\n\
             source.folder=bucket\n\
             checkpoint.path=checkpoint.db\n",
            uri = server.uri(),
            prefix = server.prefix(),
        ),
    )
    .unwrap();
    tmp
}

/// `floe run`, again while it exits with 3 ("some objects failed and will be retried on the
/// next run"): lakana keeps its catalog in SQLite and may answer a read with a 5xx while the
/// other process commits; the retry is floe's documented answer to that, and the rows must
/// still land once.
async fn run(dir: &Path, token: &str) -> common::Ran {
    let mut tries = 0;
    loop {
        tries += 1;
        let r = floe_async(
            dir,
            &["run", "--config", "floe.properties"],
            &[("FLOE_TEST_LAKANA_TOKEN", token)],
        )
        .await;
        if r.code != 3 || tries == 3 {
            return r;
        }
        eprintln!("floe run exited 3; running again:\n{}", r.stdout);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floe_run_lands_in_a_rest_catalog_from_two_processes_at_once() {
    let server = LakanaServer::start()
        .await
        .expect("lakana-server must run for this test");
    let token = server.token();
    let first = workdir(&server, 0, 3, 40);
    // The table exists before the race (both processes would create it otherwise).
    run(first.path(), &token)
        .await
        .expect_code(0, "first process");
    let a = workdir(&server, 1000, 4, 25);
    let b = workdir(&server, 2000, 5, 20);
    let (ra, rb) = tokio::join!(run(a.path(), &token), run(b.path(), &token));
    let ra = ra.expect_code(0, "process a");
    let rb = rb.expect_code(0, "process b");
    for r in [&ra, &rb] {
        assert!(r.stdout.contains("committed bronze.events"), "{}", r.stdout);
    }

    let (uri, prefix) = (server.uri(), server.prefix());
    let read =
        tokio::task::spawn_blocking(move || read_rest_table(&uri, &token, prefix, "bronze.events"))
            .await
            .unwrap();
    assert_eq!(read["count"], 120 + 100 + 100, "{}", server.log_tail());
    let ids = common::counts(&read, "id");
    assert!(ids.values().all(|n| *n == 1), "every row once");
    // One snapshot per pass (more only if a pass had to be run again).
    assert!(read["snapshots"].as_array().unwrap().len() >= 3);
    common::assert_commit_ids_unique(&read);
}
