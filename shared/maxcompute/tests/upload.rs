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
    ArrowBlockEncoder, BatchConverter, PartitionSpec, Resumed, SessionRecord, TunnelOptions,
    UploadOptions, UploadStatus, resume,
};
use floe_testbed::maxcompute::{FaultAction, FaultPoint, MaxComputeEmulatorConfig, TableDef};
use floe_tunnel_codec::{Column, Compression, DataType, TableSchema, Value};

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

/// The table both formats write: every type the Arrow format carries, a NOT NULL key.
fn all_types_table(name: &str) -> TableDef {
    let columns: Vec<Column> = [
        ("id", "bigint"),
        ("name", "varchar(5)"),
        ("score", "double"),
        ("flag", "boolean"),
        ("dt", "datetime"),
        ("ts", "timestamp"),
        ("amount", "decimal(10,2)"),
        ("day", "date"),
        ("small", "int"),
        ("raw", "binary"),
    ]
    .iter()
    .map(|(n, t)| {
        let c = Column::new(*n, t.parse::<DataType>().unwrap());
        if *n == "id" { c.not_null() } else { c }
    })
    .collect();
    TableDef::new(PROJECT, name, TableSchema::new(columns).unwrap())
}

/// Rows as a staged Parquet file hands them over: microsecond timestamps, 64-bit ints for an
/// `int` column, a decimal of the column's scale. Row 1 has a null key, row 3 a name longer
/// than varchar(5), row 4 an int out of range: bad rows in either format.
fn staged_batch() -> RecordBatch {
    use arrow_array::{
        BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float64Array,
        TimestampMicrosecondArray,
    };
    use arrow_schema::TimeUnit;
    let n = 6;
    let schema = Schema::new(vec![
        Field::new("id", ArrowType::Int64, true),
        Field::new("name", ArrowType::Utf8, true),
        Field::new("score", ArrowType::Float64, true),
        Field::new("flag", ArrowType::Boolean, true),
        Field::new(
            "dt",
            ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new(
            "ts",
            ArrowType::Timestamp(TimeUnit::Microsecond, None),
            true,
        ),
        Field::new("amount", ArrowType::Decimal128(10, 2), true),
        Field::new("day", ArrowType::Date32, true),
        Field::new("small", ArrowType::Int64, true),
        Field::new("raw", ArrowType::Binary, true),
    ]);
    let columns: Vec<arrow_array::ArrayRef> = vec![
        Arc::new(Int64Array::from(vec![
            Some(1),
            None,
            Some(3),
            Some(4),
            Some(5),
            Some(i64::MIN),
        ])),
        Arc::new(StringArray::from(vec![
            Some("ann"),
            Some("bob"),
            None,
            Some("toolong"),
            Some("été"),
            Some(""),
        ])),
        Arc::new(Float64Array::from(vec![
            Some(1.5),
            None,
            Some(-0.0),
            Some(1e300),
            Some(2.25),
            None,
        ])),
        Arc::new(BooleanArray::from(vec![
            Some(true),
            Some(false),
            None,
            Some(true),
            Some(false),
            None,
        ])),
        Arc::new(
            TimestampMicrosecondArray::from(vec![
                Some(1_736_929_800_123_456),
                None,
                Some(-1),
                Some(0),
                Some(951_782_400_000_000),
                Some(-62_135_596_800_000_000),
            ])
            .with_timezone("UTC"),
        ),
        Arc::new(TimestampMicrosecondArray::from(vec![
            Some(1_736_929_800_123_456),
            Some(-1),
            None,
            Some(1),
            Some(951_825_600_000_001),
            Some(0),
        ])),
        Arc::new(
            Decimal128Array::from(vec![
                Some(1_234),
                Some(-1),
                None,
                Some(0),
                Some(9_999_999_999),
                Some(-5),
            ])
            .with_precision_and_scale(10, 2)
            .unwrap(),
        ),
        Arc::new(Date32Array::from(vec![
            Some(20_103),
            Some(-1),
            None,
            Some(0),
            Some(11_016),
            None,
        ])),
        Arc::new(Int64Array::from(vec![
            Some(7),
            Some(-7),
            None,
            Some(0),
            Some(1 << 40),
            Some(-2_147_483_648),
        ])),
        Arc::new(BinaryArray::from(vec![
            Some(&b"\x00\x01"[..]),
            None,
            Some(&b""[..]),
            Some(&b"x"[..]),
            Some(&b"\xff"[..]),
            None,
        ])),
    ];
    let batch = RecordBatch::try_new(Arc::new(schema), columns).unwrap();
    assert_eq!(batch.num_rows(), n);
    batch
}

/// The same staged rows through a record-format session and an Arrow-format session land the
/// same rows in the emulator (which decodes the Arrow blocks on its own, against the table),
/// and leave out the same bad rows for the same reasons.
#[tokio::test]
async fn arrow_blocks_land_the_same_rows_as_record_blocks() {
    let e = env().await;
    e.emu.create_table(all_types_table("by_record"));
    e.emu.create_table(all_types_table("by_arrow"));
    let batch = staged_batch();
    let mut landed = Vec::new();
    let mut refused = Vec::new();
    for (name, arrow) in [("by_record", false), ("by_arrow", true)] {
        let table = e.client.table_id(None, name);
        let mut s = e
            .tunnel
            .create_upload(&table, None, &UploadOptions::default())
            .await
            .unwrap();
        let conv = BatchConverter::new(s.schema(), &batch.schema(), "yyyy-MM-dd HH:mm:ss").unwrap();
        let errors = if arrow {
            let mut enc = ArrowBlockEncoder::new(s.schema()).unwrap();
            let errors = enc
                .write(&conv.prepare(&batch).unwrap(), &mut |_| None)
                .unwrap();
            assert_eq!(enc.record_count(), 3);
            s.write_arrow_block(0, &enc.finish()).await.unwrap();
            errors
        } else {
            s.write_batch(0, &conv, &batch).await.unwrap()
        };
        s.commit(&[0]).await.unwrap();
        refused.push(errors.iter().map(|e| e.row).collect::<Vec<_>>());
        landed.push(e.emu.rows(&format!("{PROJECT}.{name}"), None).unwrap());
    }
    assert_eq!(refused[0], [1, 3, 4], "record format");
    assert_eq!(refused[1], refused[0], "arrow format");
    assert_eq!(landed[0].len(), 3);
    assert_eq!(landed[1], landed[0]);
    // The Arrow blocks went out as such.
    let puts: Vec<String> = e
        .emu
        .requests()
        .into_iter()
        .filter(|r| r.method == "PUT")
        .map(|r| r.target)
        .collect();
    assert!(
        !puts[0].contains("arrow") && puts[1].ends_with("&arrow"),
        "{puts:?}"
    );
}

/// pyodps's own Arrow tunnel reader decodes what floe sends (chunk size 64, so the block has
/// many chunk checksums), to the values floe meant.
#[tokio::test]
async fn pyodps_reads_floes_arrow_blocks() {
    let python = floe_testbed::venv::python_with(&[("odps", "pyodps==0.13.2")]).unwrap();
    let table = all_types_table("t");
    let batch = staged_batch();
    let conv = BatchConverter::new(&table.columns, &batch.schema(), "yyyy-MM-dd HH:mm:ss").unwrap();
    let mut enc = ArrowBlockEncoder::with_chunk_size(&table.columns, 64).unwrap();
    enc.write(&conv.prepare(&batch).unwrap(), &mut |_| None)
        .unwrap();
    // A second message: the first two rows again.
    enc.write(&conv.prepare(&batch.slice(0, 2)).unwrap(), &mut |_| None)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("block.bin");
    std::fs::write(&body, enc.finish()).unwrap();
    let spec = table
        .columns
        .columns()
        .iter()
        .map(|c| format!("{}:{}", c.name, c.data_type))
        .collect::<Vec<_>>()
        .join(";");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/py/pyodps_read_arrow.py");
    let out =
        floe_testbed::venv::run_python(&python, &script, &[body.to_str().unwrap(), &spec]).unwrap();
    let rows: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let expect = serde_json::json!([
        {"id": 1, "name": "ann", "score": 1.5, "flag": true, "dt": "2025-01-15T08:30:00.123000+00:00",
         "ts": "2025-01-15T08:30:00.123456+00:00", "amount": "12.34", "day": "2025-01-15", "small": 7, "raw": "0001"},
        {"id": 3, "name": null, "score": -0.0, "flag": null, "dt": "1969-12-31T23:59:59.999000+00:00",
         "ts": null, "amount": null, "day": null, "small": null, "raw": ""},
        {"id": -9223372036854775808i64, "name": "", "score": null, "flag": null,
         "dt": "0001-01-01T00:00:00+00:00", "ts": "1970-01-01T00:00:00+00:00", "amount": "-0.05",
         "day": null, "small": -2147483648i64, "raw": null},
        {"id": 1, "name": "ann", "score": 1.5, "flag": true, "dt": "2025-01-15T08:30:00.123000+00:00",
         "ts": "2025-01-15T08:30:00.123456+00:00", "amount": "12.34", "day": "2025-01-15", "small": 7, "raw": "0001"},
    ]);
    assert_eq!(rows.len(), 4, "{out}");
    for (got, want) in rows.iter().zip(expect.as_array().unwrap()) {
        assert_eq!(got, want, "{out}");
    }
}
