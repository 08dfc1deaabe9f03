//! The `floe` command's surface: configuration errors, `tables list/show`, content mode, help.

use std::path::Path;
use std::process::Command;

fn floe(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_floe"))
        .args(args)
        .env_remove("FLOE_FAULT")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn write(path: &Path, text: impl AsRef<[u8]>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn invalid_configuration_fails_at_start_naming_the_option() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[source]\nfolder = \"b\"\n[[routes]]\ntable = \"a.b\"\non-error = \"ignore\"\n",
            "routes[0].on-error",
        ),
        (
            "[source]\nfolder = \"b\"\nbatch-size = 3\n[[routes]]\ntable = \"a.b\"\n",
            "source.batch-size",
        ),
        (
            "[source]\nfolder = \"b\"\n[ingest]\nbatch-rows = -1\n[[routes]]\ntable = \"a.b\"\n",
            "ingest.batch-rows",
        ),
        (
            "[source]\nfolder = \"b\"\n[[routes]]\ntable = \"no_namespace\"\n",
            "table",
        ),
    ];
    for (text, option) in cases {
        let config = dir.path().join("floe.toml");
        write(&config, text);
        let (code, _, err) = floe(&["run", "--config", config.to_str().unwrap()]);
        assert_eq!(code, 2, "{option}: {err}");
        assert!(err.contains(option), "{option}: {err}");
    }
    let (code, _, err) = floe(&["run", "--config", "/nonexistent/floe.toml"]);
    assert_eq!(code, 1);
    assert!(err.contains("/nonexistent/floe.toml"), "{err}");
}

#[test]
fn a_source_folder_that_is_not_there_fails_instead_of_landing_nothing() {
    // A typo in `folder` used to print "nothing changed" and exit 0.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("floe.toml");
    write(
        &config,
        "[source]\nfolder = \"nope\"\n[[routes]]\ntable = \"lake.t\"\n",
    );
    let (code, out, err) = floe(&["run", "--config", config.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("source.folder") && err.contains("nope"),
        "{err}"
    );
    assert!(
        !dir.path().join("nope").exists(),
        "no folder is made for it"
    );
}

#[test]
fn config_check_says_what_a_file_means_and_names_a_bad_option() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("bucket")).unwrap();
    let config = dir.path().join("floe.toml");
    write(
        &config,
        "[source]\nfolder = \"bucket\"\n[dead-letter]\npath = \"s3://state/floe/dl/\"\n\
         [[routes]]\nprefix = \"orders/\"\ntable = \"lake.orders\"\n",
    );
    let path = config.to_str().unwrap();
    let (code, out, err) = floe(&["config", "check", "--config", path]);
    assert_eq!(code, 0, "{out}{err}");
    for want in [
        "source: folder",
        "checkpoint: sqlite",
        "dead letters: s3://state/floe/dl/",
        "route route0: orders/ as Records -> iceberg lake.orders",
        "ok: ",
    ] {
        assert!(out.contains(want), "{want}: {out}");
    }
    // Nothing was opened: no catalog or checkpoint file appeared.
    assert!(!dir.path().join("checkpoint.db").exists());

    // --connect opens what the file names (here: the local catalog and checkpoint table).
    write(
        &config,
        "[source]\nfolder = \"bucket\"\n[[routes]]\ntable = \"lake.orders\"\n",
    );
    let (code, out, err) = floe(&["config", "check", "--config", path, "--connect"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("reached: catalog floe"), "{out}");

    write(
        &config,
        "[source]\nfolder = \"bucket\"\nqueue = \"x\"\n[[routes]]\ntable = \"lake.orders\"\n",
    );
    let (code, _, err) = floe(&["config", "check", "--config", path]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("source.queue"), "{err}");
}

#[test]
fn every_command_has_help() {
    for args in [
        vec!["--help"],
        vec!["run", "--help"],
        vec!["commit", "--help"],
        vec!["demo", "--help"],
        vec!["tables", "--help"],
        vec!["tables", "list", "--help"],
        vec!["tables", "show", "--help"],
        vec!["bench", "--help"],
        vec!["config", "check", "--help"],
        vec!["dead-letters", "replay", "--help"],
    ] {
        let (code, out, _) = floe(&args);
        assert_eq!(code, 0, "{args:?}");
        assert!(out.contains("Usage:"), "{args:?}: {out}");
    }
}

#[test]
fn content_mode_tables_list_and_show() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(&root.join("bucket/blobs/small.txt"), "tiny");
    write(&root.join("bucket/blobs/large.bin"), vec![7u8; 4096]);
    write(
        &root.join("floe.toml"),
        "[source]\nfolder = \"bucket\"\n[iceberg]\ncatalog.uri = \"catalog.db\"\ncatalog.warehouse = \"warehouse\"\n\
         [[routes]]\nprefix = \"blobs/\"\nmode = \"content\"\ntable = \"raw.blobs\"\ncontent.max-bytes = 1024\n\
         columns = [\"KEY\", \"size\", \"url\", \"content\"]\n",
    );
    let config = root.join("floe.toml");
    let config = config.to_str().unwrap();
    let (code, out, err) = floe(&["run", "--config", config]);
    assert_eq!(code, 0, "{out}{err}");
    let r = root.canonicalize().unwrap();
    let t = floe_testbed::pyiceberg::read_sql_table(
        "floe",
        &r.join("catalog.db"),
        &r.join("warehouse"),
        "raw.blobs",
    );
    assert_eq!(
        t["columns"],
        serde_json::json!(["KEY", "size", "url", "content"])
    );
    let rows = t["rows"].as_array().unwrap();
    let small = rows.iter().find(|r| r["KEY"] == "blobs/small.txt").unwrap();
    assert_eq!(small["content"], hex("tiny"));
    let large = rows.iter().find(|r| r["KEY"] == "blobs/large.bin").unwrap();
    assert_eq!(
        large["content"],
        serde_json::Value::Null,
        "over the limit: url only"
    );
    assert_eq!(large["size"], 4096);
    assert!(
        large["url"]
            .as_str()
            .unwrap()
            .ends_with("/bucket/blobs/large.bin")
    );

    let (code, out, _) = floe(&["tables", "list", "--config", config]);
    assert_eq!(code, 0);
    assert!(out.contains("raw.blobs\t2 rows\t1 snapshots"), "{out}");
    let (code, out, _) = floe(&[
        "tables",
        "show",
        "raw.blobs",
        "--config",
        config,
        "--rows",
        "5",
    ]);
    assert_eq!(code, 0);
    assert!(
        out.contains("schema: KEY: string not null, size: long, url: string, content: binary"),
        "{out}"
    );
    assert!(out.contains("floe commit "), "{out}");
    assert!(out.contains("blobs/small.txt"), "{out}");
    let (code, _, err) = floe(&["tables", "show", "raw.nope", "--config", config]);
    assert_eq!(code, 1);
    assert!(err.contains("raw.nope does not exist"), "{err}");
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn schema_evolution_adds_optional_columns_for_new_fields() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        &root.join("bucket/a/1.ndjson"),
        "{\"id\": 1, \"name\": \"one\"}\n",
    );
    write(
        &root.join("bucket/a/2.ndjson"),
        "{\"id\": 2, \"name\": \"two\", \"score\": 2.5, \"tags\": [\"x\"]}\n",
    );
    write(
        &root.join("bucket/b/1.ndjson"),
        "{\"id\": 3, \"name\": \"three\", \"dropped\": true}\n",
    );
    write(
        &root.join("floe.toml"),
        "[source]\nfolder = \"bucket\"\n\
         [[routes]]\nprefix = \"a/\"\ntable = \"t.evolving\"\nschema.evolution = true\n\
         [[routes]]\nprefix = \"b/\"\ntable = \"t.fixed\"\nschema = '{\"fields\":[{\"name\":\"id\",\"type\":\"long\"},{\"name\":\"name\",\"type\":\"string\"}]}'\n",
    );
    let config = root.join("floe.toml");
    let (code, out, err) = floe(&["run", "--config", config.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let r = root.canonicalize().unwrap();
    let tables = floe_testbed::pyiceberg::read_sql_tables(
        "floe",
        &r.join("catalog.db"),
        &r.join("warehouse"),
        &["t.evolving", "t.fixed"],
    );
    let evolving = &tables["t.evolving"];
    assert_eq!(
        evolving["columns"],
        serde_json::json!(["id", "name", "score", "tags"])
    );
    let rows = evolving["rows"].as_array().unwrap();
    let one = rows.iter().find(|r| r["id"] == 1).unwrap();
    assert_eq!(
        one["score"],
        serde_json::Value::Null,
        "older rows read the new column as null"
    );
    let two = rows.iter().find(|r| r["id"] == 2).unwrap();
    assert_eq!(two["score"], 2.5);
    assert_eq!(two["tags"], serde_json::json!(["x"]));
    // Without evolution, fields the table lacks are ignored.
    assert_eq!(
        tables["t.fixed"]["columns"],
        serde_json::json!(["id", "name"])
    );
    assert_eq!(tables["t.fixed"]["count"], 1);
}

/// Schema evolution widens columns as the Iceberg spec allows: a table made with `int`,
/// `float` and `decimal(10,2)` columns (a route schema) takes, once the route infers its schema
/// from the data with evolution on (Kafka Connect's `iceberg.tables.evolve-schema-enabled`), a JSON integer beyond `int`, a `double`, and a Parquet
/// object's `decimal(12,2)`, instead of setting those rows aside. Rows written before keep
/// reading back through the promotion.
#[test]
fn schema_evolution_widens_int_float_and_decimal_columns() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let route = |schema: &str| {
        format!(
            "[source]\nfolder = \"bucket\"\n[[routes]]\nprefix = \"w/\"\ntable = \"t.wide\"\n{schema}"
        )
    };
    write(
        &root.join("bucket/w/1.ndjson"),
        "{\"id\": 1, \"score\": 1.5, \"amount\": \"12.34\"}\n",
    );
    write(
        &root.join("floe.toml"),
        route(
            "schema = '{\"fields\":[{\"name\":\"id\",\"type\":\"int\"},{\"name\":\"score\",\"type\":\"float\"},{\"name\":\"amount\",\"type\":\"decimal(10,2)\"}]}'\n",
        ),
    );
    let config = root.join("floe.toml");
    let (code, out, err) = floe(&["run", "--config", config.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");

    // From now on the route infers: JSON integers are longs, numbers doubles; the Parquet
    // object brings decimal(12,2).
    write(
        &root.join("floe.toml"),
        format!(
            "{}[iceberg]\ntables.evolve-schema-enabled = true\n",
            route("")
        ),
    );
    write(
        &root.join("bucket/w/2.ndjson"),
        "{\"id\": 5000000000, \"score\": 1e300}\n",
    );
    let python = floe_testbed::venv::python_with(&[("pyarrow", "pyarrow")]).unwrap();
    let script = root.join("make_parquet.py");
    write(
        &script,
        "import sys, decimal, pyarrow as pa, pyarrow.parquet as pq\n\
         t = pa.table({'id': pa.array([3], pa.int64()), 'amount': pa.array([decimal.Decimal('1234567890.12')], pa.decimal128(12, 2))})\n\
         pq.write_table(t, sys.argv[1])\n",
    );
    let parquet = root.join("bucket/w/3.parquet");
    floe_testbed::venv::run_python(&python, &script, &[parquet.to_str().unwrap()]).unwrap();
    let (code, out, err) = floe(&["run", "--config", config.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("bad records: 0"), "no row set aside: {out}");

    let r = root.canonicalize().unwrap();
    let table = read_local(&r, "t.wide");
    assert_eq!(table["count"], 3, "{table}");
    let by_id = |id: i64| row_by_id(&table, id);
    assert_eq!(by_id(1)["score"], 1.5);
    assert_eq!(by_id(5_000_000_000)["score"], 1e300);
    assert_eq!(by_id(3)["amount"], "1234567890.12");
    assert_eq!(by_id(1)["amount"], "12.34");
    let types = table["types"].as_object().unwrap();
    assert_eq!(types["id"], "long", "{table}");
    assert_eq!(types["score"], "double", "{table}");
    assert_eq!(types["amount"], "decimal(12, 2)", "{table}");
    let duck = floe_testbed::duckdb::read_sql_table(&r.join("catalog.db"), "t.wide", Some("id"));
    assert_eq!(duck["count"], 3, "{duck}");
    assert_eq!(duck["rows"][2]["id"], 5_000_000_000i64, "{duck}");
}

/// Schema evolution adds nested fields, as the Iceberg spec allows: a struct column gains a
/// field, and so does the struct in a list's elements, each as an optional field with a new
/// id. Rows written before read the new fields as null. (A map's value struct evolves the same
/// way; JSON inference never gives maps, so this test has none.)
#[test]
fn schema_evolution_adds_fields_inside_structs_and_lists() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let schema = r#"{"fields":[{"name":"id","type":"long"},{"name":"addr","type":{"type":"struct","fields":[{"name":"city","type":"string"}]}},{"name":"items","type":{"type":"list","element":{"type":"struct","fields":[{"name":"sku","type":"string"}]}}}]}"#;
    write(
        &root.join("floe.toml"),
        format!(
            "[source]\nfolder = \"bucket\"\n[[routes]]\nprefix = \"n/\"\ntable = \"t.nested\"\nschema = '{schema}'\n"
        ),
    );
    write(
        &root.join("bucket/n/1.ndjson"),
        "{\"id\": 1, \"addr\": {\"city\": \"Oslo\"}, \"items\": [{\"sku\": \"a\"}]}\n",
    );
    let config = root.join("floe.toml");
    let (code, out, err) = floe(&["run", "--config", config.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");

    // The route now infers its schema from the data, with evolution on.
    write(
        &root.join("floe.toml"),
        "[source]\nfolder = \"bucket\"\n[iceberg]\ntables.evolve-schema-enabled = true\n\
         [[routes]]\nprefix = \"n/\"\ntable = \"t.nested\"\n",
    );
    write(
        &root.join("bucket/n/2.ndjson"),
        "{\"id\": 2, \"addr\": {\"city\": \"Rome\", \"zip\": \"00100\"}, \"items\": [{\"sku\": \"b\", \"qty\": 3}]}\n",
    );
    let (code, out, err) = floe(&["run", "--config", config.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("bad records: 0"), "{out}");

    let r = root.canonicalize().unwrap();
    let table = read_local(&r, "t.nested");
    assert_eq!(table["count"], 2, "{table}");
    let by_id = |id: i64| row_by_id(&table, id);
    assert_eq!(by_id(2)["addr"]["zip"], "00100", "{table}");
    assert_eq!(by_id(2)["items"][0]["qty"], 3, "{table}");
    assert_eq!(by_id(1)["addr"]["zip"], serde_json::Value::Null, "{table}");
    assert_eq!(by_id(1)["addr"]["city"], "Oslo", "{table}");
    assert_eq!(
        by_id(1)["items"][0]["qty"],
        serde_json::Value::Null,
        "{table}"
    );
    let types = table["types"].as_object().unwrap();
    let addr = types["addr"].as_str().unwrap();
    assert!(addr.contains("zip"), "{table}");
    assert!(types["items"].as_str().unwrap().contains("qty"), "{table}");
    let duck = floe_testbed::duckdb::read_sql_table(&r.join("catalog.db"), "t.nested", Some("id"));
    assert_eq!(duck["count"], 2, "{duck}");
}

/// Schema evolution widens types inside columns too, as the Iceberg spec allows a nested
/// field's type to be promoted: an `int` in a struct becomes a `long`, a `float` in a list's
/// element struct a `double`, field ids kept. Rows written before read their old values.
#[test]
fn schema_evolution_widens_types_inside_structs_and_lists() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let schema = r#"{"fields":[{"name":"id","type":"long"},{"name":"addr","type":{"type":"struct","fields":[{"name":"n","type":"int"}]}},{"name":"items","type":{"type":"list","element":{"type":"struct","fields":[{"name":"q","type":"float"}]}}}]}"#;
    write(
        &root.join("floe.toml"),
        format!(
            "[source]\nfolder = \"bucket\"\n[[routes]]\nprefix = \"n/\"\ntable = \"t.deep\"\nschema = '{schema}'\n"
        ),
    );
    write(
        &root.join("bucket/n/1.ndjson"),
        "{\"id\": 1, \"addr\": {\"n\": 7}, \"items\": [{\"q\": 1.5}]}\n",
    );
    run_passes(root, 1);
    write(
        &root.join("floe.toml"),
        "[source]\nfolder = \"bucket\"\n[iceberg]\ntables.evolve-schema-enabled = true\n\
         [[routes]]\nprefix = \"n/\"\ntable = \"t.deep\"\n",
    );
    write(
        &root.join("bucket/n/2.ndjson"),
        "{\"id\": 2, \"addr\": {\"n\": 5000000000}, \"items\": [{\"q\": 1e300}]}\n",
    );
    let config = root.join("floe.toml");
    let (code, out, err) = floe(&["run", "--config", config.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("bad records: 0"), "{out}");

    let r = root.canonicalize().unwrap();
    let table = read_local(&r, "t.deep");
    assert_eq!(table["count"], 2, "{table}");
    let types = table["types"].as_object().unwrap();
    assert!(types["addr"].as_str().unwrap().contains("long"), "{table}");
    assert!(!types["addr"].as_str().unwrap().contains("int"), "{table}");
    assert!(
        types["items"].as_str().unwrap().contains("double"),
        "{table}"
    );
    assert_eq!(
        row_by_id(&table, 2)["addr"]["n"],
        5_000_000_000i64,
        "{table}"
    );
    assert_eq!(row_by_id(&table, 2)["items"][0]["q"], 1e300, "{table}");
    assert_eq!(row_by_id(&table, 1)["addr"]["n"], 7, "{table}");
    assert_eq!(row_by_id(&table, 1)["items"][0]["q"], 1.5, "{table}");
    let duck = floe_testbed::duckdb::read_sql_table(&r.join("catalog.db"), "t.deep", Some("id"));
    assert_eq!(duck["count"], 2, "{duck}");
    assert_eq!(duck["rows"][1]["addr"]["n"], 5_000_000_000i64, "{duck}");
}

/// `iceberg.tables.schema-case-insensitive` (default true): fields named `ID`, `NAME`, `Addr.CITY`
/// land in the columns `id`, `name`, `addr.city`, from JSON and CSV alike; a table created from
/// records spelling a field two ways has one column for it, and schema evolution adds none. Set to false, names match byte for byte: evolution adds `Name` as a
/// column of its own beside `name`. pyiceberg reads both states back.
#[test]
fn field_names_find_columns_case_insensitively_unless_the_table_options_say_exact() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let config = |exact: &str| {
        write(
            &root.join("floe.toml"),
            format!(
                "[source]\nfolder = \"bucket\"\n[iceberg]\ntables.evolve-schema-enabled = true\n\
                 {exact}[[routes]]\ntable = \"t.names\"\n"
            ),
        )
    };
    config("");
    write(
        &root.join("bucket/1.ndjson"),
        "{\"id\": 1, \"name\": \"a\", \"addr\": {\"city\": \"x\"}}\n\
         {\"ID\": 5, \"Name\": \"e\"}\n",
    );
    run_passes(root, 1);
    write(
        &root.join("bucket/2.ndjson"),
        "{\"ID\": 2, \"NAME\": \"b\", \"Addr\": {\"CITY\": \"y\"}}\n",
    );
    write(&root.join("bucket/3.csv"), "Id,Name\n3,c\n");
    run_passes(root, 1);
    let r = root.canonicalize().unwrap();
    let table = read_local(&r, "t.names");
    assert_eq!(table["count"], 4, "{table}");
    let mut columns: Vec<&String> = table["types"].as_object().unwrap().keys().collect();
    columns.sort();
    assert_eq!(columns, ["addr", "id", "name"], "{table}");
    assert_eq!(row_by_id(&table, 2)["name"], "b", "{table}");
    assert_eq!(row_by_id(&table, 2)["addr"]["city"], "y", "{table}");
    assert_eq!(row_by_id(&table, 3)["name"], "c", "{table}");
    assert_eq!(row_by_id(&table, 5)["name"], "e", "{table}");

    config("tables.schema-case-insensitive = false\n");
    write(
        &root.join("bucket/4.ndjson"),
        "{\"id\": 4, \"Name\": \"d\"}\n",
    );
    run_passes(root, 1);
    let table = read_local(&r, "t.names");
    assert_eq!(table["count"], 5, "{table}");
    let types = table["types"].as_object().unwrap();
    assert!(
        types.contains_key("Name") && types.contains_key("name"),
        "{table}"
    );
    let four = row_by_id(&table, 4);
    assert_eq!(
        (&four["Name"], &four["name"]),
        (&serde_json::json!("d"), &serde_json::json!(null)),
        "{table}"
    );
    assert_eq!(
        row_by_id(&table, 2)["Name"],
        serde_json::json!(null),
        "{table}"
    );
}

/// Kafka Connect's `iceberg.tables.default-commit-branch`: snapshots go on that branch, made
/// from main at the first commit, each on top of the branch's last; main stays as it was; a pass
/// with nothing new commits nothing. pyiceberg reads the branch at its snapshot (DuckDB's
/// iceberg extension reads main only, so it is not asked).
#[test]
fn commits_go_on_the_default_commit_branch() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        &root.join("floe.toml"),
        "[source]\nfolder = \"bucket\"\n[iceberg]\ntables.default-commit-branch = \"audit\"\n\
         [[routes]]\ntable = \"t.wap\"\non-change = \"append\"\n",
    );
    let config = root.join("floe.toml");
    let config = config.to_str().unwrap();
    write(&root.join("bucket/1.ndjson"), "{\"id\": 1}\n{\"id\": 2}\n");
    let (code, out, err) = floe(&["run", "--config", config]);
    assert_eq!(code, 0, "{out}{err}");
    write(&root.join("bucket/2.ndjson"), "{\"id\": 3}\n");
    let (code, out, err) = floe(&["run", "--config", config]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = floe(&["run", "--config", config]);
    assert_eq!(code, 0, "{out}{err}");

    let r = root.canonicalize().unwrap();
    let table = read_local(&r, "t.wap");
    assert_eq!(table["count"], 0, "main has nothing: {table}");
    assert!(table["refs"].get("main").is_none(), "{table}");
    let audit = &table["branches"]["audit"];
    assert_eq!(audit["count"], 3, "{table}");
    let snapshots = table["snapshots"].as_array().unwrap();
    assert_eq!(snapshots.len(), 2, "one per pass that landed: {table}");
    let head = table["refs"]["audit"].as_i64().unwrap();
    let newest = snapshots.iter().find(|s| s["id"] == head).unwrap();
    let first = snapshots.iter().find(|s| s["id"] != head).unwrap();
    assert_eq!(newest["parent"], first["id"], "{table}");
    assert!(newest["summary"]["floe.commit-id"].is_string(), "{table}");
}

/// Kafka Connect's dynamic routing (`iceberg.tables.dynamic-enabled` with
/// `iceberg.tables.route-field`): each record lands in the table its field names, lowercased,
/// in the route table's namespace unless it names one; records without it land in the route's
/// table. Every table is committed once: a second pass lands nothing.
#[test]
fn records_go_to_the_tables_their_route_field_names() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        &root.join("floe.toml"),
        "[source]\nfolder = \"bucket\"\n[iceberg]\ntables.dynamic-enabled = true\n\
         tables.route-field = \"kind\"\n[[routes]]\ntable = \"ev.other\"\n",
    );
    write(
        &root.join("bucket/1.ndjson"),
        "{\"id\": 1, \"kind\": \"clicks\"}\n{\"id\": 2, \"kind\": \"Views\"}\n{\"id\": 3}\n\
         {\"id\": 4, \"kind\": \"ev.clicks\"}\n{\"id\": 5, \"kind\": \"audit.log\"}\n",
    );
    write(
        &root.join("bucket/2.ndjson"),
        "{\"id\": 6, \"kind\": \"views\"}\n",
    );
    run_passes(root, 2);
    let r = root.canonicalize().unwrap();
    let names = ["ev.clicks", "ev.views", "ev.other", "audit.log"];
    let tables = floe_testbed::pyiceberg::read_sql_tables(
        "floe",
        &r.join("catalog.db"),
        &r.join("warehouse"),
        &names,
    );
    let ids = |t: &str| sorted_ids(&tables[t]);
    assert_eq!(ids("ev.clicks"), [1, 4]);
    assert_eq!(ids("ev.views"), [2, 6]);
    assert_eq!(ids("ev.other"), [3]);
    assert_eq!(ids("audit.log"), [5]);
    for t in names {
        assert_eq!(
            tables[t]["snapshots"].as_array().unwrap().len(),
            1,
            "{t}: one commit, none made again: {}",
            tables[t]
        );
    }
    let duck = floe_testbed::duckdb::read_sql_table(&r.join("catalog.db"), "ev.views", Some("id"));
    assert_eq!(duck["count"], 2, "{duck}");
}

/// With schema evolution on, a table that records choose by their route field takes the
/// fields they bring, as the route's own table does: ev.clicks exists with `id` and `kind`,
/// then records bring `extra`.
#[test]
fn tables_records_route_to_evolve_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        &root.join("floe.toml"),
        "[source]\nfolder = \"bucket\"\n[iceberg]\ntables.dynamic-enabled = true\n\
         tables.route-field = \"kind\"\ntables.evolve-schema-enabled = true\n\
         [[routes]]\ntable = \"ev.other\"\n",
    );
    write(
        &root.join("bucket/1.ndjson"),
        "{\"id\": 1, \"kind\": \"clicks\", \"n\": 1.5}\n{\"id\": 2}\n",
    );
    run_passes(root, 1);
    write(
        &root.join("bucket/2.ndjson"),
        "{\"id\": 3, \"kind\": \"clicks\", \"extra\": \"e\", \"n\": 1e300}\n{\"id\": 4, \"extra\": \"f\"}\n",
    );
    run_passes(root, 1);
    let r = root.canonicalize().unwrap();
    let tables = floe_testbed::pyiceberg::read_sql_tables(
        "floe",
        &r.join("catalog.db"),
        &r.join("warehouse"),
        &["ev.clicks", "ev.other"],
    );
    assert_eq!(sorted_ids(&tables["ev.clicks"]), [1, 3]);
    assert_eq!(sorted_ids(&tables["ev.other"]), [2, 4]);
    for t in ["ev.clicks", "ev.other"] {
        assert!(
            tables[t]["columns"].to_string().contains("extra"),
            "{t} took the new field: {}",
            tables[t]
        );
    }
    assert_eq!(row_by_id(&tables["ev.clicks"], 3)["extra"], "e");
    assert_eq!(row_by_id(&tables["ev.clicks"], 3)["n"], 1e300);
    assert_eq!(row_by_id(&tables["ev.other"], 4)["extra"], "f");
}

/// Kafka Connect's static routing, from a connector's properties: `iceberg.tables` with
/// `iceberg.tables.route-field` and a `route-regex` per table. A record goes to every table
/// whose regex matches the whole value; one that matches none is dead-lettered, naming the
/// value (Kafka Connect drops it). A TOML route's own `table`, when it has no regex, takes
/// what matches none instead.
#[test]
fn records_go_to_every_table_whose_route_regex_matches_their_field() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        &root.join("floe.properties"),
        "source.folder = bucket\n\
         iceberg.tables = ev.list,ev.create\n\
         iceberg.tables.route-field = type\n\
         iceberg.table.ev.list.route-regex = list|ls\n\
         iceberg.table.ev.create.route-regex = create|ls\n\
         iceberg.tables.default-partition-by = bucket(id, 4)\n",
    );
    write(
        &root.join("bucket/1.ndjson"),
        "{\"id\": 1, \"type\": \"list\"}\n{\"id\": 2, \"type\": \"create\"}\n\
         {\"id\": 3, \"type\": \"ls\"}\n{\"id\": 4, \"type\": \"delete\"}\n\
         {\"id\": 5}\n{\"id\": 6, \"type\": \"lists\"}\n",
    );
    let config = root.join("floe.properties");
    let config = config.to_str().unwrap();
    for _ in 0..2 {
        let (code, out, err) = floe(&["run", "--config", config]);
        assert_eq!(code, 0, "{out}{err}");
    }
    let r = root.canonicalize().unwrap();
    let tables = floe_testbed::pyiceberg::read_sql_tables(
        "floe",
        &r.join("catalog.db"),
        &r.join("warehouse"),
        &["ev.list", "ev.create"],
    );
    assert_eq!(sorted_ids(&tables["ev.list"]), [1, 3]);
    assert_eq!(sorted_ids(&tables["ev.create"]), [2, 3]);
    for t in ["ev.list", "ev.create"] {
        assert_eq!(tables[t]["snapshots"].as_array().unwrap().len(), 1, "{t}");
        assert!(
            tables[t]["spec"].as_str().unwrap().contains("bucket"),
            "iceberg.tables.default-partition-by: {}",
            tables[t]
        );
    }
    let duck = floe_testbed::duckdb::read_sql_table(&r.join("catalog.db"), "ev.create", Some("id"));
    assert_eq!(duck["count"], 2, "{duck}");
    // The three that match nothing are dead letters, one record each, naming the value.
    let (code, out, err) = floe(&["dead-letters", "list", "--json", "--config", config]);
    assert_eq!(code, 0, "{out}{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["totals"]["letters"], 3, "{doc}");
    let key = doc["files"][0]["key"].as_str().unwrap().to_owned();
    let (code, out, err) = floe(&["dead-letters", "show", "--config", config, &key]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("`delete`, which matches no table's route-regex"),
        "{out}"
    );
    assert!(out.contains("`lists`"), "{out}");
    assert!(out.contains("null (or no such field)"), "{out}");
    assert!(out.contains("line 4"), "the record's row: {out}");

    // A TOML route whose own table has no regex takes what matches none.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        &root.join("floe.toml"),
        "[source]\nfolder = \"bucket\"\n[[routes]]\ntable = \"ev.rest\"\n\
         route-field = \"type\"\nroute-regex = { \"ev.list\" = \"list\" }\n",
    );
    write(
        &root.join("bucket/1.ndjson"),
        "{\"id\": 1, \"type\": \"list\"}\n{\"id\": 2, \"type\": \"create\"}\n{\"id\": 3}\n",
    );
    run_passes(root, 1);
    let r = root.canonicalize().unwrap();
    let tables = floe_testbed::pyiceberg::read_sql_tables(
        "floe",
        &r.join("catalog.db"),
        &r.join("warehouse"),
        &["ev.list", "ev.rest"],
    );
    assert_eq!(sorted_ids(&tables["ev.list"]), [1]);
    assert_eq!(sorted_ids(&tables["ev.rest"]), [2, 3]);
}

/// Kafka Connect's `iceberg.tables` naming several tables (no `[[routes]]`): every record
/// lands in each, each table committed once.
#[test]
fn iceberg_tables_naming_several_tables_take_every_record_each() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        &root.join("floe.toml"),
        "[source]\nfolder = \"bucket\"\n[iceberg]\ntables = \"ev.a, ev.b\"\n",
    );
    write(&root.join("bucket/1.ndjson"), "{\"id\": 1}\n{\"id\": 2}\n");
    write(&root.join("bucket/2.ndjson"), "{\"id\": 3}\n");
    run_passes(root, 2);
    let r = root.canonicalize().unwrap();
    let tables = floe_testbed::pyiceberg::read_sql_tables(
        "floe",
        &r.join("catalog.db"),
        &r.join("warehouse"),
        &["ev.a", "ev.b"],
    );
    for t in ["ev.a", "ev.b"] {
        assert_eq!(sorted_ids(&tables[t]), [1, 2, 3], "{t}");
        assert_eq!(tables[t]["snapshots"].as_array().unwrap().len(), 1, "{t}");
    }
}

/// Kafka Connect's `iceberg.tables.write-props.*` reach the Parquet writer: the codec, its
/// level and the rows per row group; an unknown property stops the start, named.
#[test]
fn write_props_set_the_parquet_codec_and_row_groups() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let rows: String = (0..2500).map(|i| format!("{{\"id\": {i}}}\n")).collect();
    write(&root.join("bucket/p/1.ndjson"), &rows);
    write(&root.join("bucket/q/1.ndjson"), &rows);
    // A second route with write-props of its own: its codec wins, the row groups are the
    // [iceberg] default's.
    let config = |props: &str| {
        format!(
            "[source]\nfolder = \"bucket\"\n[iceberg]\n{props}[[routes]]\nprefix = \"p/\"\ntable = \"t.props\"\n\
             [[routes]]\nprefix = \"q/\"\ntable = \"t.own\"\n\
             write-props = {{ \"write.parquet.compression-codec\" = \"snappy\" }}\n"
        )
    };
    write(
        &root.join("floe.toml"),
        config(
            "tables.write-props.write.parquet.compression-codec = \"gzip\"\ntables.write-props.write.parquet.compression-level = \"9\"\ntables.write-props.write.parquet.row-group-limit = \"1000\"\n",
        ),
    );
    let path = root.join("floe.toml");
    let (code, out, err) = floe(&["run", "--config", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let r = root.canonicalize().unwrap();
    let table = read_local(&r, "t.props");
    assert_eq!(table["count"], 2500);
    let meta = first_file_footer(&table);
    assert_eq!(meta.num_row_groups(), 3, "1000-row groups");
    let codec = meta.row_group(0).column(0).compression();
    // (A Parquet footer records the codec, not its level.)
    assert!(
        matches!(codec, parquet::basic::Compression::GZIP(_)),
        "{codec:?}"
    );
    let own = read_local(&r, "t.own");
    assert_eq!(own["count"], 2500);
    let meta = first_file_footer(&own);
    assert_eq!(meta.num_row_groups(), 3, "the [iceberg] row groups");
    let codec = meta.row_group(0).column(0).compression();
    assert_eq!(
        codec,
        parquet::basic::Compression::SNAPPY,
        "the route's own codec"
    );

    write(
        &path,
        config("tables.write-props.write.format.default = \"orc\"\n"),
    );
    let (code, out, err) = floe(&["run", "--config", path.to_str().unwrap()]);
    assert_ne!(code, 0, "{out}");
    assert!(
        err.contains("iceberg.tables.write-props.write.format.default"),
        "{err}"
    );
    write(&path, config("").replace("\"snappy\"", "\"brotli\""));
    let (code, out, err) = floe(&["run", "--config", path.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}");
    assert!(
        err.contains("routes[1].write-props.write.parquet.compression-codec"),
        "{err}"
    );
}

/// The Parquet footer of the first data file of `table` (as [`read_local`] read it).
fn first_file_footer(table: &serde_json::Value) -> parquet::file::metadata::ParquetMetaData {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let path = table["files"][0]["path"].as_str().unwrap();
    let file = std::fs::File::open(path.trim_start_matches("file://")).unwrap();
    SerializedFileReader::new(file).unwrap().metadata().clone()
}

/// `table` of the SQL catalog in `root` (`catalog.db`, `warehouse/`), as pyiceberg reads it.
fn read_local(root: &Path, table: &str) -> serde_json::Value {
    floe_testbed::pyiceberg::read_sql_table(
        "floe",
        &root.join("catalog.db"),
        &root.join("warehouse"),
        table,
    )
}

/// The row of `table` (as [`read_local`] read it) whose `id` is `id`.
fn row_by_id(table: &serde_json::Value, id: i64) -> &serde_json::Value {
    (table["rows"].as_array().into_iter().flatten())
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no row {id}: {table}"))
}

/// `floe run` on `floe.toml` in `root`, `passes` times, each of which must succeed.
fn run_passes(root: &Path, passes: usize) {
    let config = root.join("floe.toml");
    for _ in 0..passes {
        let (code, out, err) = floe(&["run", "--config", config.to_str().unwrap()]);
        assert_eq!(code, 0, "{out}{err}");
    }
}

/// The `id`s of a table as [`read_local`] (or `read_sql_tables`) read it, sorted.
fn sorted_ids(table: &serde_json::Value) -> Vec<i64> {
    let mut ids: Vec<i64> = (table["rows"].as_array().into_iter().flatten())
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

/// `floe bench-raw`, the benchmark's floor, decodes with floe's own decoder and times decoding
/// and encoding apart: the figures `floe bench` sets floe's wall time against.
#[test]
fn bench_floor_reports_its_rows_and_both_stage_times() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("events.ndjson");
    let mut lines = String::new();
    for id in 0..20_000 {
        lines.push_str(&format!(
            "{{\"id\":{id},\"ts\":\"2025-01-02T03:04:05.006Z\",\"user\":\"u{id}\",\"level\":\"info\",\"amount\":1.5,\"ok\":true,\"message\":\"m\"}}\n"
        ));
    }
    lines.push_str("{\"id\": not json}\n");
    std::fs::write(&input, lines).unwrap();
    let output = dir.path().join("out.parquet");
    let (code, out, err) = floe(&[
        "bench-raw",
        input.to_str().unwrap(),
        output.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let figure = |name: &str| -> f64 {
        out.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {out}"))
            .parse()
            .unwrap()
    };
    // The malformed line is set aside, as `floe run` does.
    assert_eq!(figure("rows="), 20_000.0, "{out}");
    assert!(figure("decode_s=") > 0.0, "{out}");
    assert!(figure("encode_s=") > 0.0, "{out}");
    let file = std::fs::File::open(&output).unwrap();
    let reader = parquet::file::reader::SerializedFileReader::new(file).unwrap();
    use parquet::file::reader::FileReader;
    assert_eq!(reader.metadata().file_metadata().num_rows(), 20_000);
}
