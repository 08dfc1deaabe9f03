//! The REST client and the save modes against the emulator: signatures (classic, v4, STS,
//! refused), table metadata, partitions, SQL jobs, the tunnel endpoint lookup, and every
//! schema_save_mode and data_save_mode.

mod common;

use common::{PROJECT, client_config, creds, env, env_with, events_table, rows, schema};
use floe_core::ErrorKind;
use floe_decode::{Field, IcebergType, TableSchema as IcebergSchema};
use floe_maxcompute::{
    DEFAULT_CREATE_TEMPLATE, DataSaveMode, MaxComputeClient, PartitionSpec, SaveModeTarget,
    SchemaOutcome, SchemaSaveMode, TableTunnel, TunnelOptions, UpstreamTable, apply_data_save_mode,
    apply_schema_save_mode,
};
use floe_signing::Credentials;
use floe_testbed::maxcompute::{MaxComputeEmulator, MaxComputeEmulatorConfig};

const TABLE: &str = "proj.events";

fn upstream() -> UpstreamTable {
    let mut schema = IcebergSchema::new(vec![
        Field::required("id", IcebergType::Long),
        Field::optional("name", IcebergType::String),
        Field::optional(
            "amount",
            IcebergType::Decimal {
                precision: 12,
                scale: 2,
            },
        ),
    ]);
    schema.identifier_fields = vec!["id".into()];
    UpstreamTable {
        database: "shop".into(),
        table_name: "events".into(),
        schema,
        unique_keys: Vec::new(),
        comment: "from shop".into(),
    }
}

#[tokio::test]
async fn signatures_classic_v4_and_sts_are_checked() {
    let emu = MaxComputeEmulator::start(MaxComputeEmulatorConfig::new(creds()))
        .await
        .unwrap();
    emu.create_table(events_table());
    let table = floe_maxcompute::TableId::new(PROJECT, "events");

    let classic = MaxComputeClient::new(client_config(&emu, creds())).unwrap();
    assert_eq!(classic.get_table(&table).await.unwrap().columns.len(), 2);

    let mut v4 = client_config(&emu, creds());
    v4.region = Some("cn-hangzhou".into());
    let v4 = MaxComputeClient::new(v4).unwrap();
    assert!(v4.table_exists(&table).await.unwrap());

    let wrong = MaxComputeClient::new(client_config(
        &emu,
        Credentials::new(creds().access_key_id(), "nope"),
    ))
    .unwrap();
    let err = wrong.get_table(&table).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Auth, "{err}");
    assert!(!err.is_retryable());
    assert!(err.to_string().contains("SignatureNotMatch"), "{err}");
    assert!(err.to_string().contains("proj.events"), "{err}");

    let sts = creds().with_security_token("sts-token");
    let emu = MaxComputeEmulator::start(MaxComputeEmulatorConfig::new(sts.clone()))
        .await
        .unwrap();
    emu.create_table(events_table());
    let ok = MaxComputeClient::new(client_config(&emu, sts)).unwrap();
    assert!(ok.table_exists(&table).await.unwrap());
    let no_token = MaxComputeClient::new(client_config(&emu, creds())).unwrap();
    assert_eq!(
        no_token.table_exists(&table).await.unwrap_err().kind(),
        ErrorKind::Auth
    );
}

#[tokio::test]
async fn metadata_partitions_sql_and_tunnel_endpoints() {
    let mut config = MaxComputeEmulatorConfig::new(creds());
    config.partition_page_size = 2;
    let e = env_with(config, TunnelOptions::default()).await;
    assert_eq!(
        e.tunnel.endpoint(),
        e.emu.tunnel_endpoint(),
        "found through ?service"
    );
    let explicit = TableTunnel::connect(
        &e.client,
        TunnelOptions {
            endpoint: Some(e.emu.tunnel_endpoint()),
            quota_name: Some("quota-a".into()),
            ..TunnelOptions::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(explicit.endpoint(), e.emu.tunnel_endpoint());

    e.emu.create_table(
        events_table()
            .partitioned_by(&["ds", "hh"])
            .in_schema("raw"),
    );
    let table = e.client.table_id(Some("raw"), "events");
    let meta = e.client.get_table(&table).await.unwrap();
    assert_eq!(meta.partition_columns.len(), 2);
    assert!(meta.primary_key.is_empty() && !meta.transactional);
    let missing = e
        .client
        .get_table(&e.client.table_id(None, "nope"))
        .await
        .unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound);
    assert!(missing.to_string().contains("proj.nope"), "{missing}");

    for spec in ["ds=1,hh=1", "ds=1,hh=2", "ds=2,hh=1"] {
        let p: PartitionSpec = spec.parse().unwrap();
        e.client.create_partition(&table, &p, true).await.unwrap();
    }
    let listed: Vec<String> = e
        .client
        .list_partitions(&table)
        .await
        .unwrap()
        .iter()
        .map(|p| p.to_tunnel())
        .collect();
    assert_eq!(
        listed,
        ["ds=1,hh=1", "ds=1,hh=2", "ds=2,hh=1"],
        "three pages of two"
    );
    let p: PartitionSpec = "ds='1',hh='2'".parse().unwrap();
    assert!(e.client.partition_exists(&table, &p).await.unwrap());
    e.client.drop_partition(&table, &p, false).await.unwrap();
    assert!(!e.client.partition_exists(&table, &p).await.unwrap());
    let err = e
        .client
        .drop_partition(&table, &p, false)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("sql instance"), "{err}");

    let err = e.client.run_sql("SELEC 1").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("ODPS-0130161"), "{err}");
}

#[tokio::test]
async fn tables_are_created_from_the_default_and_a_custom_template() {
    let e = env().await;
    let up = upstream();
    let table = e.client.table_id(None, "events");
    let target = SaveModeTarget {
        table: &table,
        partition: None,
        create_template: DEFAULT_CREATE_TEMPLATE,
        upstream: &up,
    };
    let outcome =
        apply_schema_save_mode(&e.client, SchemaSaveMode::CreateSchemaWhenNotExist, &target)
            .await
            .unwrap();
    assert_eq!(outcome, SchemaOutcome::Created);
    let def = e.emu.table(TABLE).unwrap();
    let cols: Vec<String> = def
        .columns
        .columns()
        .iter()
        .map(|c| format!("{} {} {}", c.name, c.data_type, c.nullable))
        .collect();
    assert_eq!(
        cols,
        [
            "id bigint false",
            "name string true",
            "amount decimal(12,2) true"
        ]
    );
    assert_eq!(def.comment, "from shop");
    assert!(def.primary_key.is_empty());

    let custom = "CREATE TABLE IF NOT EXISTS `${table}` (\n    id,\n    name STRING NOT NULL COMMENT 'who',\n    ${rowtype_fields},\n    PRIMARY KEY (${rowtype_primary_key})\n) COMMENT '${comment}' TBLPROPERTIES (\"transactional\"=\"true\");";
    let ds: PartitionSpec = "ds='20250115'".parse().unwrap();
    let orders = e.client.table_id(None, "orders");
    let target = SaveModeTarget {
        table: &orders,
        partition: Some(&ds),
        create_template: custom,
        upstream: &up,
    };
    apply_schema_save_mode(&e.client, SchemaSaveMode::CreateSchemaWhenNotExist, &target)
        .await
        .unwrap();
    let meta = e.client.get_table(&orders).await.unwrap();
    let cols: Vec<String> = meta
        .columns
        .columns()
        .iter()
        .map(|c| format!("{} {} {}", c.name, c.data_type, c.nullable))
        .collect();
    assert_eq!(
        cols,
        [
            "id bigint false",
            "name string false",
            "amount decimal(12,2) true"
        ]
    );
    assert_eq!(meta.primary_key, ["id"]);
    assert!(meta.transactional);
    assert_eq!(meta.partition_columns[0].name, "ds");
    assert_eq!(e.emu.partitions("proj.orders").unwrap(), ["ds=20250115"]);
}

#[tokio::test]
async fn every_schema_save_mode() {
    let e = env().await;
    let up = upstream();
    let table = e.client.table_id(None, "events");
    let ds: PartitionSpec = "ds=1".parse().unwrap();
    let plain = SaveModeTarget {
        table: &table,
        partition: None,
        create_template: DEFAULT_CREATE_TEMPLATE,
        upstream: &up,
    };
    let parted = SaveModeTarget {
        partition: Some(&ds),
        ..plain.clone()
    };

    let err = apply_schema_save_mode(&e.client, SchemaSaveMode::ErrorWhenSchemaNotExist, &plain)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(
        err.to_string().contains("ERROR_WHEN_SCHEMA_NOT_EXIST"),
        "{err}"
    );
    assert!(err.to_string().contains("proj.events"), "{err}");
    assert_eq!(
        apply_schema_save_mode(&e.client, SchemaSaveMode::Ignore, &plain)
            .await
            .unwrap(),
        SchemaOutcome::Ignored
    );
    assert!(!e.emu.table_exists(TABLE));

    // RECREATE on a missing table creates it; on an existing one drops its data with it.
    apply_schema_save_mode(&e.client, SchemaSaveMode::RecreateSchema, &plain)
        .await
        .unwrap();
    e.emu
        .insert_rows(
            TABLE,
            None,
            vec![vec![
                floe_tunnel_codec::Value::BigInt(1),
                floe_tunnel_codec::Value::Null,
                floe_tunnel_codec::Value::Null,
            ]],
        )
        .unwrap();
    assert_eq!(
        apply_schema_save_mode(&e.client, SchemaSaveMode::RecreateSchema, &plain)
            .await
            .unwrap(),
        SchemaOutcome::Recreated
    );
    assert!(e.emu.rows(TABLE, None).unwrap().is_empty());
    assert_eq!(
        apply_schema_save_mode(&e.client, SchemaSaveMode::ErrorWhenSchemaNotExist, &plain)
            .await
            .unwrap(),
        SchemaOutcome::Kept
    );

    // With a partition spec: created with the partition, kept, the partition re-made.
    e.emu.create_table(events_table().partitioned_by(&["ds"]));
    assert_eq!(
        apply_schema_save_mode(&e.client, SchemaSaveMode::CreateSchemaWhenNotExist, &parted)
            .await
            .unwrap(),
        SchemaOutcome::Kept
    );
    assert_eq!(e.emu.partitions(TABLE).unwrap(), ["ds=1"]);
    e.emu
        .insert_rows(TABLE, Some("ds=1"), rows(&[(1, "a")]))
        .unwrap();
    e.emu
        .insert_rows(TABLE, Some("ds=2"), rows(&[(2, "b")]))
        .unwrap();
    assert_eq!(
        apply_schema_save_mode(&e.client, SchemaSaveMode::RecreateSchema, &parted)
            .await
            .unwrap(),
        SchemaOutcome::Kept
    );
    assert!(e.emu.rows(TABLE, Some("ds=1")).unwrap().is_empty());
    assert_eq!(
        e.emu.rows(TABLE, Some("ds=2")).unwrap().len(),
        1,
        "other partitions untouched"
    );
    let log = e.emu.sql_log();
    assert!(
        log.iter()
            .any(|s| s == "ALTER TABLE proj.`events` DROP IF EXISTS PARTITION (`ds`='1');"),
        "{log:?}"
    );
}

#[tokio::test]
async fn every_data_save_mode() {
    let e = env().await;
    e.emu.create_table(events_table().partitioned_by(&["ds"]));
    let table = e.client.table_id(None, "events");
    let ds1: PartitionSpec = "ds=1".parse().unwrap();
    e.emu
        .insert_rows(TABLE, Some("ds=1"), rows(&[(1, "a"), (2, "b")]))
        .unwrap();
    e.emu
        .insert_rows(TABLE, Some("ds=2"), rows(&[(3, "c")]))
        .unwrap();

    apply_data_save_mode(
        &e.client,
        DataSaveMode::AppendData,
        None,
        &table,
        Some(&ds1),
    )
    .await
    .unwrap();
    assert_eq!(e.emu.rows(TABLE, None).unwrap().len(), 3);

    let err = apply_data_save_mode(
        &e.client,
        DataSaveMode::ErrorWhenDataExists,
        None,
        &table,
        Some(&ds1),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert!(!err.is_retryable());
    assert!(err.to_string().contains("already has 2 rows"), "{err}");
    assert!(err.to_string().contains("ERROR_WHEN_DATA_EXISTS"), "{err}");

    apply_data_save_mode(
        &e.client,
        DataSaveMode::CustomProcessing,
        Some("DELETE FROM proj.events WHERE id = 2;"),
        &table,
        Some(&ds1),
    )
    .await
    .unwrap();
    assert_eq!(e.emu.rows(TABLE, Some("ds=1")).unwrap(), rows(&[(1, "a")]));
    let err = apply_data_save_mode(
        &e.client,
        DataSaveMode::CustomProcessing,
        None,
        &table,
        None,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("custom_sql"), "{err}");

    apply_data_save_mode(&e.client, DataSaveMode::DropData, None, &table, Some(&ds1))
        .await
        .unwrap();
    assert!(e.emu.rows(TABLE, Some("ds=1")).unwrap().is_empty());
    assert_eq!(e.emu.rows(TABLE, Some("ds=2")).unwrap().len(), 1);
    apply_data_save_mode(
        &e.client,
        DataSaveMode::ErrorWhenDataExists,
        None,
        &table,
        Some(&ds1),
    )
    .await
    .unwrap();
    apply_data_save_mode(&e.client, DataSaveMode::DropData, None, &table, None)
        .await
        .unwrap();
    assert!(e.emu.rows(TABLE, None).unwrap().is_empty());
    apply_data_save_mode(
        &e.client,
        DataSaveMode::ErrorWhenDataExists,
        None,
        &table,
        None,
    )
    .await
    .unwrap();
    let _ = schema(&[("a", "int")]);
}
