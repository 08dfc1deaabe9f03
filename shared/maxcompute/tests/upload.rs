//! Upload sessions against the emulator: append, overwrite, compression, block checks, CRC
//! refusal, crash recovery, lost commit answers and expiry.

mod common;

use std::sync::Arc;
use std::time::Duration;

use arrow_array::{Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType as ArrowType, Field, Schema};
use common::{PROJECT, env, env_with, events_table, rows, sorted};
use floe_core::ErrorKind;
use floe_maxcompute::error::odps_code;
use floe_maxcompute::{
    BatchConverter, PartitionSpec, Resumed, SessionRecord, TunnelOptions, UploadOptions,
    UploadStatus, resume,
};
use floe_testbed::maxcompute::{FaultAction, FaultPoint, MaxComputeEmulatorConfig};
use floe_tunnel_codec::{Compression, Value};

const TABLE: &str = "proj.events";

#[tokio::test]
async fn appends_blocks_in_one_commit_and_checks_the_block_list() {
    let e = env().await;
    e.emu.create_table(events_table());
    e.emu.insert_rows(TABLE, None, rows(&[(0, "old")])).unwrap();
    let table = e.client.table_id(None, "events");
    let mut s = e
        .tunnel
        .create_upload(&table, None, &UploadOptions::default())
        .await
        .unwrap();
    assert_eq!(s.status(), UploadStatus::Normal);
    assert_eq!(s.schema().len(), 2);
    s.write_rows(0, &rows(&[(1, "a"), (2, "b")])).await.unwrap();
    s.write_rows(7, &rows(&[(3, "c")])).await.unwrap();
    // Nothing is visible before the commit.
    assert_eq!(e.emu.rows(TABLE, None).unwrap().len(), 1);

    let err = s.commit(&[0, 7, 9]).await.unwrap_err();
    assert!(
        err.to_string().contains("missing on the server [9]"),
        "{err}"
    );
    let err = s.commit(&[0]).await.unwrap_err();
    assert!(
        err.to_string().contains("unexpected on the server [7]"),
        "{err}"
    );

    s.commit(&[7, 0]).await.unwrap();
    assert_eq!(s.status(), UploadStatus::Closed);
    assert_eq!(
        sorted(e.emu.rows(TABLE, None).unwrap()),
        rows(&[(0, "old"), (1, "a"), (2, "b"), (3, "c")])
    );
    // Committing again is a no-op, not a second copy.
    s.commit(&[0, 7]).await.unwrap();
    assert_eq!(e.emu.rows(TABLE, None).unwrap().len(), 4);
    assert!(
        s.write_block(20_000, b"").await.is_err(),
        "block ids stop at 19999"
    );
}

#[tokio::test]
async fn overwrites_one_partition_with_compressed_blocks() {
    let e = env_with(
        MaxComputeEmulatorConfig::new(common::creds()),
        TunnelOptions {
            compression: Some(Compression::Deflate),
            ..TunnelOptions::default()
        },
    )
    .await;
    e.emu.create_table(events_table().partitioned_by(&["ds"]));
    e.emu
        .insert_rows(TABLE, Some("ds=1"), rows(&[(1, "old1")]))
        .unwrap();
    e.emu
        .insert_rows(TABLE, Some("ds=2"), rows(&[(2, "old2")]))
        .unwrap();
    let table = e.client.table_id(None, "events");
    let ds1: PartitionSpec = "ds='1'".parse().unwrap();
    let opts = UploadOptions {
        overwrite: true,
        ..UploadOptions::default()
    };
    let mut s = e
        .tunnel
        .create_upload(&table, Some(&ds1), &opts)
        .await
        .unwrap();
    s.write_rows(0, &rows(&[(10, "new")])).await.unwrap();
    s.commit(&[0]).await.unwrap();
    assert_eq!(
        e.emu.rows(TABLE, Some("ds=1")).unwrap(),
        rows(&[(10, "new")])
    );
    assert_eq!(
        e.emu.rows(TABLE, Some("ds='2'")).unwrap(),
        rows(&[(2, "old2")])
    );
    let puts: Vec<_> = e
        .emu
        .requests()
        .into_iter()
        .filter(|r| r.method == "PUT")
        .collect();
    assert_eq!(puts[0].content_encoding.as_deref(), Some("deflate"));

    // A missing partition is refused unless the session may create it.
    let ds3: PartitionSpec = "ds=3".parse().unwrap();
    let err = e
        .tunnel
        .create_upload(&table, Some(&ds3), &UploadOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    let create = UploadOptions {
        create_partition: true,
        ..UploadOptions::default()
    };
    let mut s = e
        .tunnel
        .create_upload(&table, Some(&ds3), &create)
        .await
        .unwrap();
    s.write_rows(0, &rows(&[(3, "c")])).await.unwrap();
    s.commit(&[0]).await.unwrap();
    assert_eq!(e.emu.partitions(TABLE).unwrap(), ["ds=1", "ds=2", "ds=3"]);
}

#[tokio::test]
async fn a_corrupted_block_is_refused_by_its_crc() {
    let e = env().await;
    e.emu.create_table(events_table());
    let table = e.client.table_id(None, "events");
    let s = e
        .tunnel
        .create_upload(&table, None, &UploadOptions::default())
        .await
        .unwrap();
    let mut enc = s.block_encoder();
    enc.write_record(&[Value::BigInt(1), Value::String("hello".into())])
        .unwrap();
    let mut block = enc.finish().to_vec();
    let at = block.windows(5).position(|w| w == b"hello").unwrap();
    block[at] = b'j';
    let err = s.write_block(0, &block).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert_eq!(odps_code(&err), Some("MalformedDataStream"));
    assert!(err.to_string().to_lowercase().contains("checksum"), "{err}");
    let mut s = s;
    s.reload().await.unwrap();
    assert!(s.server_blocks().is_empty());
}

#[tokio::test]
async fn a_crash_between_the_last_block_and_the_commit_resumes_from_the_record() {
    let e = env().await;
    e.emu.create_table(events_table());
    let table = e.client.table_id(None, "events");
    let mut record = {
        let s = e
            .tunnel
            .create_upload(&table, None, &UploadOptions::default())
            .await
            .unwrap();
        let mut record = SessionRecord::for_upload(&s);
        for (block, data) in [(0, rows(&[(1, "a")])), (1, rows(&[(2, "b")]))] {
            s.write_rows(block, &data).await.unwrap();
            record.blocks.push(block);
        }
        record
        // The process dies here: the session object is gone, the record was checkpointed.
    };
    let json = serde_json::to_string(&record).unwrap();
    record = serde_json::from_str(&json).unwrap();
    let Resumed::Upload(mut s) = resume(&e.tunnel, &record).await.unwrap() else {
        panic!("the session should still be open");
    };
    assert_eq!(s.server_blocks(), record.blocks.as_slice());
    record.commit_requested = true;
    s.commit(&record.blocks).await.unwrap();
    assert_eq!(
        sorted(e.emu.rows(TABLE, None).unwrap()),
        rows(&[(1, "a"), (2, "b")])
    );
    // A second recovery finds it committed and writes nothing.
    assert!(matches!(
        resume(&e.tunnel, &record).await.unwrap(),
        Resumed::Committed
    ));
    assert_eq!(e.emu.rows(TABLE, None).unwrap().len(), 2);
}

#[tokio::test]
async fn a_lost_commit_answer_is_recognised_as_committed() {
    let e = env().await;
    e.emu.create_table(events_table());
    let table = e.client.table_id(None, "events");
    let mut s = e
        .tunnel
        .create_upload(&table, None, &UploadOptions::default())
        .await
        .unwrap();
    let mut record = SessionRecord::for_upload(&s);
    s.write_rows(0, &rows(&[(1, "a")])).await.unwrap();
    record.blocks.push(0);
    record.commit_requested = true;
    e.emu.inject(
        FaultPoint::CommitUpload,
        FaultAction::DropConnectionAfterApply,
    );
    s.commit(&[0]).await.unwrap();
    assert_eq!(s.status(), UploadStatus::Closed);
    assert!(matches!(
        resume(&e.tunnel, &record).await.unwrap(),
        Resumed::Committed
    ));
    assert_eq!(e.emu.rows(TABLE, None).unwrap(), rows(&[(1, "a")]));

    // A commit that failed before it applied stays open and can be committed again.
    let mut s = e
        .tunnel
        .create_upload(&table, None, &UploadOptions::default())
        .await
        .unwrap();
    s.write_rows(0, &rows(&[(2, "b")])).await.unwrap();
    e.emu.inject(
        FaultPoint::CommitUpload,
        FaultAction::Fail {
            status: 503,
            code: "ServiceUnavailable".into(),
        },
    );
    let err = s.commit(&[0]).await.unwrap_err();
    assert!(err.is_retryable(), "{err:?}");
    assert_eq!(s.status(), UploadStatus::Normal);
    s.commit(&[0]).await.unwrap();
    assert_eq!(e.emu.rows(TABLE, None).unwrap().len(), 2);
}

#[tokio::test]
async fn a_block_whose_answer_was_lost_is_rewritten_without_duplicates() {
    let e = env().await;
    e.emu.create_table(events_table());
    let table = e.client.table_id(None, "events");
    let mut s = e
        .tunnel
        .create_upload(&table, None, &UploadOptions::default())
        .await
        .unwrap();
    s.write_rows(0, &rows(&[(1, "a")])).await.unwrap();
    e.emu.inject(
        FaultPoint::WriteBlock(Some(1)),
        FaultAction::DropConnectionAfterApply,
    );
    let err = s.write_rows(1, &rows(&[(2, "b")])).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Io, "{err}");
    assert!(err.is_retryable());
    s.write_rows(1, &rows(&[(2, "b")])).await.unwrap();
    s.commit(&[0, 1]).await.unwrap();
    assert_eq!(
        sorted(e.emu.rows(TABLE, None).unwrap()),
        rows(&[(1, "a"), (2, "b")])
    );
}

#[tokio::test]
async fn an_expired_session_is_reported_as_such() {
    let e = env().await;
    e.emu.create_table(events_table());
    let table = e.client.table_id(None, "events");
    let mut s = e
        .tunnel
        .create_upload(&table, None, &UploadOptions::default())
        .await
        .unwrap();
    let mut record = SessionRecord::for_upload(&s);
    s.write_rows(0, &rows(&[(1, "a")])).await.unwrap();
    record.blocks.push(0);
    e.emu.advance_clock(Duration::from_secs(25 * 3600));
    s.reload().await.unwrap();
    assert_eq!(s.status(), UploadStatus::Expired);
    assert!(matches!(
        resume(&e.tunnel, &record).await.unwrap(),
        Resumed::Expired
    ));
    let err = s.commit(&[0]).await.unwrap_err();
    assert!(err.to_string().contains("is expired"), "{err}");
    assert!(!err.is_retryable());
    assert!(
        err.context()
            .iter()
            .any(|(k, v)| *k == "session_status" && v == "EXPIRED")
    );
    assert!(e.emu.rows(TABLE, None).unwrap().is_empty());
}

#[tokio::test]
async fn arrow_batches_land_and_bad_rows_come_back() {
    let e = env().await;
    e.emu.create_table(events_table());
    let table = e.client.table_id(None, "events");
    let s = e
        .tunnel
        .create_upload(&table, None, &UploadOptions::default())
        .await
        .unwrap();
    let arrow = Schema::new(vec![
        Field::new("name", ArrowType::Utf8, true),
        Field::new("id", ArrowType::Utf8, true),
        Field::new("extra", ArrowType::Int64, true),
    ]);
    let batch = RecordBatch::try_new(
        Arc::new(arrow.clone()),
        vec![
            Arc::new(StringArray::from(vec!["a", "b", "c"])),
            Arc::new(StringArray::from(vec!["1", "two", "3"])),
            Arc::new(Int64Array::from(vec![7, 8, 9])),
        ],
    )
    .unwrap();
    let conv = BatchConverter::new(s.schema(), &arrow, "yyyy-MM-dd HH:mm:ss").unwrap();
    let bad = s.write_batch(0, &conv, &batch).await.unwrap();
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0].row, 1);
    assert_eq!(
        bad[0].to_string(),
        "row 1 column `id`: text `two` is not an integer"
    );
    let mut s = s;
    s.commit(&[0]).await.unwrap();
    assert_eq!(
        sorted(e.emu.rows(TABLE, None).unwrap()),
        rows(&[(1, "a"), (3, "c")])
    );
    let _ = PROJECT;
}
