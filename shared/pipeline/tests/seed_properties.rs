//! The seed's OSS Tables connector block (`../seeds/oss-tables-kafka-connect-iceberg-sink.txt`,
//! "Connector configuration") as a Kafka Connect `.properties` file, unchanged, is floe
//! configuration: it loads, its `iceberg.catalog.*` block becomes the REST catalog with SigV4
//! for `osstables` and S3FileIO settings for `oss://` data, and the REST catalog accepts it.

use floe_iceberg::CatalogKind;
use floe_iceberg::rest::{AuthConfig, RestCatalogConfig};
use floe_pipeline::FloeConfig;
use floe_pipeline::config::SourceConfig;

/// The block as the seed prints it, placeholders filled in, JVM flags and converters included.
const SEED_BLOCK: &str = "\
# --- Iceberg Catalog (REST) ---
iceberg.catalog.type: rest
iceberg.catalog.uri: https://cn-hangzhou-internal.oss-tables.aliyuncs.com/iceberg
iceberg.catalog.rest.sigv4-enabled: true
iceberg.catalog.rest.signing-region: cn-hangzhou
iceberg.catalog.warehouse: acs:osstables:cn-hangzhou:1234567890:bucket/floe-lake
iceberg.catalog.rest.signing-name: osstables
iceberg.catalog.rest.access-key-id: LTAI5tFloeTestKeyId
iceberg.catalog.rest.secret-access-key: floe-test-secret-never-printed


# --- Force S3FileIO (catalog returns oss:// but storage is S3-compatible) ---
iceberg.catalog.io-impl: org.apache.iceberg.aws.s3.S3FileIO

# --- S3FileIO storage configuration ---
iceberg.catalog.s3.endpoint: https://oss-cn-hangzhou-internal.aliyuncs.com
iceberg.catalog.s3.access-key-id: LTAI5tFloeTestKeyId
iceberg.catalog.s3.secret-access-key: floe-test-secret-never-printed
iceberg.catalog.s3.path-style-access: true
iceberg.catalog.client.region: cn-hangzhou

# --- Data format conversion ---
key.converter: org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable: false
value.converter: org.apache.kafka.connect.json.JsonConverter
value.converter.schemas.enable: false

-Daws.requestChecksumCalculation=when_required
-Daws.responseChecksumValidation=when_required
";

/// What floe adds around it: where objects come from, and Kafka Connect's static table.
const FLOE_LINES: &str = "\
connector.class=org.apache.iceberg.connect.IcebergSinkConnector
iceberg.tables=lake.events
source.type=mns
source.endpoint=http://1234567890.mns.cn-hangzhou.aliyuncs.com
source.region=cn-hangzhou
source.queue-name=oss-events
source.access-key-id=LTAI5tFloeTestKeyId
source.access-key-secret=floe-test-secret-never-printed
";

#[test]
fn the_seed_connector_block_is_floe_configuration_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("oss-tables.properties");
    std::fs::write(&path, format!("{SEED_BLOCK}\n{FLOE_LINES}")).unwrap();
    let config = FloeConfig::load(&path).unwrap();

    assert_eq!(config.catalog.kind, CatalogKind::Rest);
    let props = &config.catalog.props;
    for (k, v) in [
        ("rest.sigv4-enabled", "true"),
        ("rest.signing-name", "osstables"),
        ("rest.signing-region", "cn-hangzhou"),
        ("io-impl", "org.apache.iceberg.aws.s3.S3FileIO"),
        (
            "s3.endpoint",
            "https://oss-cn-hangzhou-internal.aliyuncs.com",
        ),
        ("s3.path-style-access", "true"),
        ("client.region", "cn-hangzhou"),
    ] {
        assert_eq!(props.get(k).map(String::as_str), Some(v), "{k}");
    }
    let rest = RestCatalogConfig::from_props_with_env(props, |_| None).unwrap();
    assert_eq!(
        rest.uri,
        "https://cn-hangzhou-internal.oss-tables.aliyuncs.com/iceberg"
    );
    assert_eq!(
        rest.warehouse.as_deref(),
        Some("acs:osstables:cn-hangzhou:1234567890:bucket/floe-lake")
    );
    assert!(
        matches!(&rest.auth, AuthConfig::SigV4 { signing_name, .. } if signing_name == "osstables"),
        "{:?}",
        rest.auth
    );

    // Kafka Connect's static routing: one table takes every object.
    assert_eq!(config.routes.len(), 1);
    assert_eq!(config.routes[0].table, "lake.events");
    assert!(matches!(config.source, SourceConfig::Cloud(_)));

    // Secrets stay out of Debug output.
    let shown = format!("{config:?} {:?}", config.catalog);
    assert!(!shown.contains("floe-test-secret"), "{shown}");
}

/// `iceberg.tables` naming several tables: one route whose every record lands in each (Kafka
/// Connect's static routing without a route field); upserts are refused there.
#[test]
fn several_static_tables_take_every_record_each() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.properties");
    let base = "iceberg.tables=a.b,c.d\nsource.type=local\nsource.folder=bucket\n";
    std::fs::write(&path, base).unwrap();
    let config = FloeConfig::load(&path).unwrap();
    assert_eq!(config.routes.len(), 1);
    assert_eq!(config.routes[0].table, "a.b");
    assert_eq!(config.routes[0].also_tables, ["c.d"]);
    std::fs::write(
        &path,
        format!("{base}iceberg.tables.cdc-field=op\niceberg.tables.default-id-columns=id\n"),
    )
    .unwrap();
    let e = FloeConfig::load(&path).unwrap_err();
    assert!(e.to_string().contains("`iceberg.tables`"), "{e}");
}
