//! Upsert sessions against the emulator: upsert and delete by primary key, bucket routing with a
//! moved slot (308), a lost commit answer, recovery, and refused UPDATE_BEFORE rows.

mod common;

use std::sync::Arc;
use std::time::Duration;

use arrow_array::{Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType as ArrowType, Field, Schema};
use common::{env, events_table, rows, sorted};
use floe_core::ErrorKind;
use floe_maxcompute::{
    BatchConverter, Resumed, RowKind, SessionRecord, UpsertOptions, UpsertStatus, resume,
    resume_with,
};
use floe_testbed::maxcompute::{FaultAction, FaultPoint};
use floe_tunnel_codec::Value;

const TABLE: &str = "proj.events";

fn fast() -> UpsertOptions {
    UpsertOptions {
        commit_poll_interval: Duration::from_millis(5),
        commit_timeout: Duration::from_secs(10),
        ..UpsertOptions::default()
    }
}

#[tokio::test]
async fn upserts_and_deletes_by_primary_key_across_buckets() {
    let e = env().await;
    e.emu.create_table(events_table().primary_key(&["id"]));
    e.emu
        .insert_rows(TABLE, None, rows(&[(1, "one"), (2, "two"), (3, "three")]))
        .unwrap();
    let table = e.client.table_id(None, "events");
    let meta = e.client.get_table(&table).await.unwrap();
    assert_eq!(meta.primary_key, ["id"]);
    assert!(meta.transactional);

    let mut s = e.tunnel.create_upsert(&table, None, fast()).await.unwrap();
    assert_eq!(s.bucket_count(), 4);
    assert_eq!(s.hash_keys(), ["id"]);
    for (id, name) in [
        (2, "TWO"),
        (4, "four"),
        (5, "five"),
        (6, "six"),
        (7, "seven"),
    ] {
        s.upsert(vec![Value::BigInt(id), Value::String(name.into())])
            .await
            .unwrap();
    }
    s.delete(vec![Value::BigInt(3), Value::Null]).await.unwrap();
    s.delete(vec![Value::BigInt(6), Value::Null]).await.unwrap();
    // Move a bucket to another worker: its next block gets a 308 and follows it.
    e.emu
        .move_upsert_bucket(s.id(), 0, "worker-9.emulator:8080")
        .unwrap();
    e.emu
        .move_upsert_bucket(s.id(), 1, "worker-9.emulator:8080")
        .unwrap();
    s.commit().await.unwrap();
    assert_eq!(s.status(), UpsertStatus::Committed);
    assert_eq!(
        sorted(e.emu.rows(TABLE, None).unwrap()),
        rows(&[
            (1, "one"),
            (2, "TWO"),
            (4, "four"),
            (5, "five"),
            (7, "seven")
        ])
    );
    assert!(
        e.emu.requests().iter().any(|r| r.status == 308),
        "a bucket was re-routed"
    );
}

#[tokio::test]
async fn a_lost_commit_answer_and_a_crash_are_recovered() {
    let e = env().await;
    e.emu.create_table(events_table().primary_key(&["id"]));
    let table = e.client.table_id(None, "events");

    // The commit applies but its answer is lost: commit() finds it committed.
    let mut s = e.tunnel.create_upsert(&table, None, fast()).await.unwrap();
    s.upsert(vec![Value::BigInt(1), Value::String("a".into())])
        .await
        .unwrap();
    e.emu.inject(
        FaultPoint::CommitUpsert,
        FaultAction::DropConnectionAfterApply,
    );
    s.commit().await.unwrap();
    assert_eq!(e.emu.rows(TABLE, None).unwrap(), rows(&[(1, "a")]));

    // A crash after the rows were sent, before the commit: resume and commit.
    let mut record = {
        let mut s = e.tunnel.create_upsert(&table, None, fast()).await.unwrap();
        s.upsert(vec![Value::BigInt(2), Value::String("b".into())])
            .await
            .unwrap();
        s.flush().await.unwrap();
        SessionRecord::for_upsert(&s)
    };
    let Resumed::Upsert(mut s) = resume_with(&e.tunnel, &record, fast()).await.unwrap() else {
        panic!("the session should be open");
    };
    record.commit_requested = true;
    s.commit().await.unwrap();
    assert!(matches!(
        resume(&e.tunnel, &record).await.unwrap(),
        Resumed::Committed
    ));
    assert_eq!(
        sorted(e.emu.rows(TABLE, None).unwrap()),
        rows(&[(1, "a"), (2, "b")])
    );

    // An aborted session commits nothing.
    let mut s = e.tunnel.create_upsert(&table, None, fast()).await.unwrap();
    s.upsert(vec![Value::BigInt(3), Value::String("c".into())])
        .await
        .unwrap();
    s.flush().await.unwrap();
    s.abort().await.unwrap();
    let err = s.commit().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    assert_eq!(e.emu.rows(TABLE, None).unwrap().len(), 2);
}

#[tokio::test]
async fn batches_carry_their_row_kinds_and_update_before_is_refused() {
    let e = env().await;
    e.emu.create_table(events_table().primary_key(&["id"]));
    e.emu
        .insert_rows(TABLE, None, rows(&[(1, "one"), (2, "two")]))
        .unwrap();
    let table = e.client.table_id(None, "events");
    let mut s = e.tunnel.create_upsert(&table, None, fast()).await.unwrap();
    let arrow = Schema::new(vec![
        Field::new("id", ArrowType::Int64, false),
        Field::new("name", ArrowType::Utf8, true),
        Field::new("op", ArrowType::Utf8, false),
    ]);
    let batch = RecordBatch::try_new(
        Arc::new(arrow.clone()),
        vec![
            Arc::new(Int64Array::from(vec![1, 2, 2, 3])),
            Arc::new(StringArray::from(vec![
                None,
                Some("old"),
                Some("new"),
                Some("three"),
            ])),
            Arc::new(StringArray::from(vec!["-D", "-U", "+U", "+I"])),
        ],
    )
    .unwrap();
    let ops = batch.column(2).clone();
    let ops = ops.as_any().downcast_ref::<StringArray>().unwrap();
    let conv = BatchConverter::new(s.schema(), &arrow, "yyyy-MM-dd HH:mm:ss").unwrap();
    let bad = s
        .write_batch(&conv, &batch, |i| RowKind::parse(ops.value(i)))
        .await
        .unwrap();
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0].row, 1);
    assert!(bad[0].message.contains("update_before"), "{}", bad[0]);
    s.commit().await.unwrap();
    assert_eq!(
        sorted(e.emu.rows(TABLE, None).unwrap()),
        rows(&[(2, "new"), (3, "three")])
    );
}

#[tokio::test]
async fn upsert_needs_a_primary_key_table() {
    let e = env().await;
    e.emu.create_table(events_table());
    let table = e.client.table_id(None, "events");
    let err = e
        .tunnel
        .create_upsert(&table, None, fast())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let cfg = floe_maxcompute::MaxComputeSinkConfig::from_json(&format!(
        r#"{{"endpoint":"{}","project":"proj","table_name":"events","insert_strategy":"upsert"}}"#,
        e.emu.endpoint()
    ))
    .unwrap();
    cfg.validate().unwrap();
    let meta = e.client.get_table(&table).await.unwrap();
    let err = cfg.check_table(&meta).unwrap_err();
    assert!(err.to_string().contains("insert_strategy"), "{err}");
    assert!(err.to_string().contains("primary key"), "{err}");
}
