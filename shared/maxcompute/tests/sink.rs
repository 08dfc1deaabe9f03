//! The sink's start-up and a whole write through `MaxComputeSink`, from options to rows read
//! back from the emulator: multi-table name, created table and partition, upload and upsert.

mod common;

use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType as ArrowType, Field as ArrowField, Schema};
use common::{creds, rows, sorted};
use floe_decode::{Field, IcebergType, TableSchema as IcebergSchema};
use floe_maxcompute::{
    MaxComputeSink, MaxComputeSinkConfig, RowKind, SessionRecord, UpstreamTable,
};
use floe_testbed::maxcompute::{MaxComputeEmulator, MaxComputeEmulatorConfig};

fn upstream() -> UpstreamTable {
    let mut schema = IcebergSchema::new(vec![
        Field::required("id", IcebergType::Long),
        Field::optional("name", IcebergType::String),
    ]);
    schema.identifier_fields = vec!["id".into()];
    UpstreamTable {
        database: "shop".into(),
        table_name: "orders".into(),
        schema,
        ..UpstreamTable::default()
    }
}

fn batch() -> RecordBatch {
    let arrow = Schema::new(vec![
        ArrowField::new("id", ArrowType::Int64, false),
        ArrowField::new("name", ArrowType::Utf8, true),
    ]);
    RecordBatch::try_new(
        Arc::new(arrow),
        vec![
            Arc::new(Int64Array::from(vec![1, 2])),
            Arc::new(StringArray::from(vec!["a", "b"])),
        ],
    )
    .unwrap()
}

async fn emulator() -> MaxComputeEmulator {
    let mut config = MaxComputeEmulatorConfig::new(creds());
    config.sql_running_polls = 0;
    config.upsert_commit_polls = 0;
    MaxComputeEmulator::start(config).await.unwrap()
}

fn options(emu: &MaxComputeEmulator, extra: &str) -> MaxComputeSinkConfig {
    MaxComputeSinkConfig::from_json(&format!(
        r#"{{"endpoint":"{}","project":"proj","table_name":"${{table_name}}_sink",
            "partition_spec":"ds='20250115'"{extra}}}"#,
        emu.endpoint()
    ))
    .unwrap()
}

#[tokio::test]
async fn uploads_through_the_sink_from_options_to_rows() {
    let emu = emulator().await;
    let env = |k: &str| match k {
        "ALIBABA_CLOUD_ACCESS_KEY_ID" => Some(creds().access_key_id().to_owned()),
        "ALIBABA_CLOUD_ACCESS_KEY_SECRET" => Some("test-secret".to_owned()),
        _ => None,
    };
    let sink = MaxComputeSink::connect(options(&emu, ""), env)
        .await
        .unwrap();
    assert!(!sink.upserts());
    let vars = |k: &str| (k == "table_name").then(|| "orders".to_owned());
    let target = sink.open_table(vars, &upstream()).await.unwrap();
    assert_eq!(target.id.to_string(), "proj.orders_sink");
    assert_eq!(emu.partitions("proj.orders_sink").unwrap(), ["ds=20250115"]);

    let batch = batch();
    let conv = sink.converter(&target, &batch.schema()).unwrap();
    let mut s = sink.begin_upload(&target).await.unwrap();
    let mut record = SessionRecord::for_upload(&s);
    assert!(s.write_batch(0, &conv, &batch).await.unwrap().is_empty());
    record.blocks.push(0);
    record.commit_requested = true;
    s.commit(&record.blocks).await.unwrap();
    assert!(matches!(
        sink.resume(&record).await.unwrap(),
        floe_maxcompute::Resumed::Committed
    ));
    assert_eq!(
        sorted(emu.rows("proj.orders_sink", Some("ds=20250115")).unwrap()),
        rows(&[(1, "a"), (2, "b")])
    );
}

#[tokio::test]
async fn upserts_through_the_sink_into_a_table_it_created_with_a_primary_key() {
    let emu = emulator().await;
    let template = r#"CREATE TABLE IF NOT EXISTS `${table}` (\n${rowtype_fields},\nPRIMARY KEY (${rowtype_primary_key})\n) TBLPROPERTIES (\"transactional\"=\"true\");"#;
    let extra = format!(
        r#","accessId":"{}","accesskey":"test-secret","insert_strategy":"upsert","save_mode_create_template":"{template}""#,
        creds().access_key_id()
    );
    let sink = MaxComputeSink::connect(options(&emu, &extra), |_| None)
        .await
        .unwrap();
    assert!(sink.upserts());
    let vars = |k: &str| (k == "table_name").then(|| "orders".to_owned());
    let target = sink.open_table(vars, &upstream()).await.unwrap();
    assert_eq!(target.meta.primary_key, ["id"]);

    let batch = batch();
    let conv = sink.converter(&target, &batch.schema()).unwrap();
    let mut s = sink.begin_upsert(&target).await.unwrap();
    s.write_batch(&conv, &batch, |_| Ok(RowKind::Insert))
        .await
        .unwrap();
    s.write_batch(&conv, &batch, |i| {
        Ok(if i == 0 {
            RowKind::Delete
        } else {
            RowKind::UpdateAfter
        })
    })
    .await
    .unwrap();
    s.commit().await.unwrap();
    assert_eq!(
        emu.rows("proj.orders_sink", Some("ds=20250115")).unwrap(),
        rows(&[(2, "b")])
    );
}
