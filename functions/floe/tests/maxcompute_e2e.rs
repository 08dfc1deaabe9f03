//! `floe run` into MaxCompute, end to end: the test starts the MaxCompute emulator (REST and
//! tunnel over real HTTP, signatures checked), writes its endpoint into the configuration, runs
//! the `floe` binary on a local bucket, and reads back what landed from the emulator (and from
//! pyiceberg where a route also targets Iceberg): append, partition overwrite, upserts and
//! deletes, multi-table names, every save mode, a create template with a custom field, one change
//! in both targets, bad values, and a crash at every step of the session protocol.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use floe_signing::Credentials;
use floe_testbed::maxcompute::{
    FaultAction, FaultPoint, MaxComputeEmulator, MaxComputeEmulatorConfig, TableDef,
};
use floe_testbed::pyiceberg::read_sql_table;
use floe_tunnel_codec::{TableSchema, Value};
use serde_json::Value as Json;

const PROJECT: &str = "proj";
const ACCESS_ID: &str = "LTAI5tTestAccessKeyId01";
const SECRET: &str = "test-secret";

const PEOPLE_SCHEMA: &str =
    r#"{"fields":[{"name":"id","type":"long","required":true},{"name":"name","type":"string"}]}"#;

/// Creates tables with a primary key (the transactional tables upserts need).
const PK_TEMPLATE: &str = "save_mode_create_template = '''CREATE TABLE IF NOT EXISTS `${table}` (\n${rowtype_fields},\nPRIMARY KEY (${rowtype_primary_key})\n) TBLPROPERTIES (\"transactional\"=\"true\");'''\n";

/// The emulator (served by its own runtime while `floe run` runs as a child process) and a
/// working folder with the bucket, the configuration and everything floe keeps.
struct Stand {
    emu: MaxComputeEmulator,
    _rt: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
    /// Credentials from the environment instead of the configuration.
    env_credentials: bool,
    /// More variables for `floe run`.
    env: Vec<(String, String)>,
}

impl Stand {
    fn new() -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let mut config = MaxComputeEmulatorConfig::new(Credentials::new(ACCESS_ID, SECRET));
        config.sql_running_polls = 0;
        config.upsert_commit_polls = 0;
        let emu = rt.block_on(MaxComputeEmulator::start(config)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("bucket")).unwrap();
        Stand {
            emu,
            _rt: rt,
            dir,
            env_credentials: false,
            env: Vec::new(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn put(&self, key: &str, text: &str) {
        let p = self.path().join("bucket").join(key);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn remove(&self, key: &str) {
        std::fs::remove_file(self.path().join("bucket").join(key)).unwrap();
    }

    /// Write `floe.toml`: the local source, a SQLite catalog, `[maxcompute]` pointing at the
    /// emulator plus `maxcompute` lines, then `rest` (routes and other sections).
    fn config(&self, maxcompute: &str, rest: &str) {
        let credentials = if self.env_credentials {
            String::new()
        } else {
            format!("accessId = \"{ACCESS_ID}\"\naccesskey = \"{SECRET}\"\n")
        };
        let text = format!(
            "[source]\ntype = \"local\"\nfolder = \"bucket\"\nbucket = \"landing\"\n\n\
             [iceberg]\ncatalog.type = \"sql\"\ncatalog.uri = \"catalog.db\"\ncatalog.warehouse = \"warehouse\"\n\n\
             [checkpoint]\npath = \"checkpoint.db\"\n\n[dead-letter]\npath = \"dead-letter\"\n\n\
             [maxcompute]\nendpoint = \"{}\"\ntunnel_endpoint = \"{}\"\nproject = \"{PROJECT}\"\n{credentials}{maxcompute}\n\n{rest}",
            self.emu.endpoint(),
            self.emu.tunnel_endpoint()
        );
        std::fs::write(self.path().join("floe.toml"), text).unwrap();
    }

    /// Run `floe run`: (exit code, stdout, stderr).
    fn floe(&self, fault: Option<&str>) -> (i32, String, String) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_floe"));
        cmd.arg("run")
            .arg("--config")
            .arg(self.path().join("floe.toml"))
            .env_remove("ALIBABA_CLOUD_ACCESS_KEY_ID")
            .env_remove("ALIBABA_CLOUD_ACCESS_KEY_SECRET")
            .env_remove("ALIBABA_CLOUD_SECURITY_TOKEN");
        if self.env_credentials {
            cmd.env("ALIBABA_CLOUD_ACCESS_KEY_ID", ACCESS_ID)
                .env("ALIBABA_CLOUD_ACCESS_KEY_SECRET", SECRET);
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        match fault {
            Some(f) => cmd.env("FLOE_FAULT", f),
            None => cmd.env_remove("FLOE_FAULT"),
        };
        let out = cmd.output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `floe run`, which must succeed; its stdout.
    fn run(&self) -> String {
        let (code, out, err) = self.floe(None);
        assert_eq!(code, 0, "floe run failed:\n{out}\n{err}");
        out
    }

    fn create(&self, table: &str, columns: &[(&str, &str)]) -> TableDef {
        let def = TableDef::new(PROJECT, table, schema(columns));
        self.emu.create_table(def.clone());
        def
    }

    fn insert(&self, table: &str, partition: Option<&str>, rows: &[(i64, &str)]) {
        let rows = rows
            .iter()
            .map(|(id, name)| vec![Value::BigInt(*id), Value::String((*name).into())])
            .collect();
        self.emu
            .insert_rows(&format!("{PROJECT}.{table}"), partition, rows)
            .unwrap();
    }

    /// The rows of a table (or partition) as text, sorted.
    fn rows(&self, table: &str, partition: Option<&str>) -> Vec<Vec<String>> {
        let mut rows: Vec<Vec<String>> = self
            .emu
            .rows(&format!("{PROJECT}.{table}"), partition)
            .unwrap()
            .iter()
            .map(|r| r.iter().map(show).collect())
            .collect();
        rows.sort_by_key(|r| (r[0].parse::<i64>().unwrap_or(i64::MAX), r.clone()));
        rows
    }

    /// Columns `names` of every row, sorted.
    fn pick(&self, table: &str, names: &[&str]) -> Vec<Vec<String>> {
        let def = self.emu.table(&format!("{PROJECT}.{table}")).unwrap();
        let at: Vec<usize> = names
            .iter()
            .map(|n| {
                def.columns
                    .columns()
                    .iter()
                    .position(|c| c.name == *n)
                    .unwrap_or_else(|| panic!("{table} has no column {n}"))
            })
            .collect();
        let mut rows: Vec<Vec<String>> = self
            .emu
            .rows(&format!("{PROJECT}.{table}"), None)
            .unwrap()
            .iter()
            .map(|r| at.iter().map(|i| show(&r[*i])).collect())
            .collect();
        rows.sort();
        rows
    }

    fn columns(&self, table: &str) -> Vec<String> {
        self.emu
            .table(&format!("{PROJECT}.{table}"))
            .unwrap()
            .columns
            .columns()
            .iter()
            .map(|c| format!("{} {}", c.name, c.data_type))
            .collect()
    }

    fn sql(&self, verb: &str) -> usize {
        self.emu
            .sql_log()
            .iter()
            .filter(|s| s.trim_start().to_ascii_uppercase().starts_with(verb))
            .count()
    }

    fn dead_letters(&self) -> Vec<Json> {
        let mut out = Vec::new();
        let Ok(days) = std::fs::read_dir(self.path().join("dead-letter")) else {
            return out;
        };
        for day in days {
            for f in std::fs::read_dir(day.unwrap().path()).unwrap() {
                let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
                out.extend(
                    text.lines()
                        .map(|l| serde_json::from_str::<Json>(l).unwrap()),
                );
            }
        }
        out
    }

    fn parquet_files(&self) -> Vec<PathBuf> {
        walkdir(&self.path().join("warehouse"))
            .into_iter()
            .filter(|p| p.ends_with(".parquet"))
            .map(PathBuf::from)
            .collect()
    }

    /// Upload sessions created so far.
    fn upload_sessions(&self) -> usize {
        self.emu
            .requests()
            .iter()
            .filter(|r| r.method == "POST" && r.target.contains("uploads=1"))
            .count()
    }

    fn iceberg(&self, table: &str) -> Json {
        let root = self.path().canonicalize().unwrap();
        read_sql_table(
            "floe",
            &root.join("catalog.db"),
            &root.join("warehouse"),
            table,
        )
    }
}

fn schema(columns: &[(&str, &str)]) -> TableSchema {
    TableSchema::from_type_strings(columns.iter().copied()).unwrap()
}

fn show(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::BigInt(n) => n.to_string(),
        Value::Int(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Decimal(d) => d.to_string(),
        Value::Double(d) => d.to_string(),
        Value::Boolean(b) => b.to_string(),
        other => format!("{other:?}"),
    }
}

fn people(rows: &[(i64, &str)]) -> Vec<Vec<String>> {
    rows.iter()
        .map(|(id, name)| vec![id.to_string(), (*name).to_owned()])
        .collect()
}

fn ndjson(rows: &[(i64, &str)]) -> String {
    rows.iter()
        .map(|(id, name)| format!("{{\"id\":{id},\"name\":\"{name}\"}}\n"))
        .collect()
}

/// A route of `prefix` into MaxCompute only, with the people schema.
fn people_route(prefix: &str) -> String {
    format!(
        "[[routes]]\nname = \"{}\"\nprefix = \"{prefix}\"\ntargets = [\"maxcompute\"]\nschema = '{PEOPLE_SCHEMA}'\n",
        prefix.trim_end_matches('/')
    )
}

#[test]
fn appends_into_a_table_it_creates_and_keeps_no_staging_files() {
    let mut s = Stand::new();
    s.env_credentials = true;
    s.config("table_name = \"events\"", &people_route("events/"));
    s.put(
        "events/a.ndjson",
        &ndjson(&[(1, "ann"), (2, "bob"), (3, "cy")]),
    );
    let out = s.run();
    assert!(out.contains("committed proj.events"), "{out}");
    assert_eq!(
        s.rows("events", None),
        people(&[(1, "ann"), (2, "bob"), (3, "cy")])
    );
    assert_eq!(s.columns("events"), ["id bigint", "name string"]);
    assert_eq!(s.sql("CREATE"), 1);
    assert!(
        s.parquet_files().is_empty(),
        "staging files left: {:?}",
        s.parquet_files()
    );

    // More objects append; the save modes do not run again.
    s.put("events/b.ndjson", &ndjson(&[(4, "di"), (5, "ed")]));
    s.run();
    assert_eq!(s.rows("events", None).len(), 5);
    assert_eq!(s.sql("CREATE"), 1);
    let again = s.run();
    assert!(again.contains("nothing changed"), "{again}");
    assert_eq!(s.rows("events", None).len(), 5);
}

/// On ACK with RRSA (or anywhere the chain's later links apply) there are no keys in the
/// configuration or in `ALIBABA_CLOUD_ACCESS_KEY_*`: `floe run` assumes the role with the OIDC
/// token, once for the whole process, and signs MaxCompute's calls with the keys STS gave.
#[test]
fn keys_come_from_the_oidc_role_when_neither_the_configuration_nor_the_environment_has_any() {
    use floe_testbed::alibaba_auth::{AlibabaAuthStandIn, OIDC_TOKEN};
    let mut s = Stand::new();
    s.env_credentials = false;
    let sts = (s._rt)
        .block_on(AlibabaAuthStandIn::start(Credentials::new(
            "LTAI-none",
            "none",
        )))
        .unwrap();
    s.emu.set_credentials(AlibabaAuthStandIn::keys(1));
    let token = s.path().join("oidc-token");
    std::fs::write(&token, OIDC_TOKEN).unwrap();
    let home = s.path().display().to_string();
    s.env = [
        ("HOME", home.as_str()),
        ("ALIBABA_CLOUD_ROLE_ARN", "acs:ram::1:role/floe"),
        (
            "ALIBABA_CLOUD_OIDC_PROVIDER_ARN",
            "acs:ram::1:oidc-provider/ack",
        ),
        ("ALIBABA_CLOUD_OIDC_TOKEN_FILE", token.to_str().unwrap()),
        ("ALIBABA_CLOUD_STS_ENDPOINT", sts.endpoint().as_str()),
        ("FLOE_LOG", "debug"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    // `config` writes the keys into the file when `env_credentials` is off: take them out.
    s.config("table_name = \"events\"", &people_route("events/"));
    let text = std::fs::read_to_string(s.path().join("floe.toml")).unwrap();
    let text = text.replace(
        &format!("accessId = \"{ACCESS_ID}\"\naccesskey = \"{SECRET}\"\n"),
        "",
    );
    assert!(!text.contains("accessId"), "{text}");
    std::fs::write(s.path().join("floe.toml"), text).unwrap();
    s.put("events/a.ndjson", &ndjson(&[(1, "ann"), (2, "bob")]));

    let (code, out, err) = s.floe(None);
    assert_eq!(code, 0, "floe run failed:\n{out}\n{err}");
    assert_eq!(s.rows("events", None), people(&[(1, "ann"), (2, "bob")]));
    assert_eq!(sts.issued(), 1, "one STS session for the process");
    assert!(err.contains("Alibaba Cloud credentials found"), "{err}");
    let keys = AlibabaAuthStandIn::keys(1);
    for secret in [
        OIDC_TOKEN,
        keys.access_key_secret().expose(),
        keys.security_token().unwrap().expose(),
    ] {
        assert!(
            !out.contains(secret) && !err.contains(secret),
            "{secret} was printed"
        );
    }
}

#[test]
fn a_maxcompute_only_configuration_needs_no_iceberg_catalog() {
    let mut s = Stand::new();
    s.env_credentials = true;
    s.config("table_name = \"events\"", &people_route("events/"));
    // No [iceberg] section at all, and the staged files kept where the configuration says.
    let path = s.path().join("floe.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace(
            "[iceberg]\ncatalog.type = \"sql\"\ncatalog.uri = \"catalog.db\"\ncatalog.warehouse = \"warehouse\"\n",
            "",
        )
        .replace(
            "table_name = \"events\"",
            "table_name = \"events\"\nstaging-location = \"stage\"",
        );
    assert!(!text.contains("[iceberg]"), "{text}");
    std::fs::write(&path, text).unwrap();
    s.put("events/a.ndjson", &ndjson(&[(1, "ann"), (2, "bob")]));

    // Staged but not committed: the files wait under the staging location.
    let (code, out, err) = s.floe(Some("commit.mc.after-session"));
    assert_ne!(code, 0, "{out}\n{err}");
    let staged: Vec<_> = walkdir(&s.path().join("stage"));
    assert!(
        !staged.is_empty()
            && staged
                .iter()
                .all(|p| p.contains("/floe_staging/events/data/")),
        "{staged:?}"
    );

    let out = s.run();
    assert!(out.contains("committed proj.events"), "{out}");
    assert_eq!(s.rows("events", None), people(&[(1, "ann"), (2, "bob")]));
    assert!(walkdir(&s.path().join("stage")).is_empty());
    for made in ["catalog.db", "warehouse"] {
        assert!(
            !s.path().join(made).exists(),
            "{made} was created for a configuration without an iceberg target"
        );
    }
}

/// The files under `dir`, recursively.
fn walkdir(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walkdir(&p));
        } else {
            out.push(p.display().to_string());
        }
    }
    out
}

/// `overwrite = true` replaces the partition once, as SeaTunnel's job does: the first commit
/// into it overwrites, and every later commit of the same deployment (checkpoint) appends, so
/// a continuous pipeline does not wipe its own earlier commits.
#[test]
fn overwrite_replaces_the_partition_once_then_appends() {
    let s = Stand::new();
    let def = TableDef::new(
        PROJECT,
        "daily",
        schema(&[("id", "bigint"), ("name", "string")]),
    )
    .partitioned_by(&["ds"]);
    s.emu.create_table(def);
    s.insert("daily", Some("ds=20250115"), &[(9, "old")]);
    s.insert("daily", Some("ds=20250114"), &[(8, "other day")]);
    s.config(
        "table_name = \"daily\"\npartition_spec = \"ds='20250115'\"\noverwrite = true",
        &people_route("daily/"),
    );
    s.put("daily/1.ndjson", &ndjson(&[(1, "ann"), (2, "bob")]));
    s.run();
    assert_eq!(
        s.rows("daily", Some("ds=20250115")),
        people(&[(1, "ann"), (2, "bob")])
    );
    assert_eq!(
        s.rows("daily", Some("ds=20250114")),
        people(&[(8, "other day")])
    );
    s.put("daily/2.ndjson", &ndjson(&[(3, "cy")]));
    s.run();
    assert_eq!(
        s.rows("daily", Some("ds=20250115")),
        people(&[(1, "ann"), (2, "bob"), (3, "cy")])
    );
    assert_eq!(s.rows("daily", Some("ds=20250114")).len(), 1);
}

#[test]
fn upserts_and_deletes_on_primary_key_tables() {
    let s = Stand::new();
    let cdc_schema = r#"{"fields":[{"name":"id","type":"long","required":true},{"name":"name","type":"string"},{"name":"op","type":"string"}],"identifierFields":["id"]}"#;
    s.config(
        &format!("table_name = \"unused\"\n{PK_TEMPLATE}"),
        &format!(
            "[[routes]]\nname = \"files\"\nprefix = \"files/\"\nmode = \"metadata\"\ntargets = [\"maxcompute\"]\nmaxcompute.table_name = \"objects\"\n\n\
             [[routes]]\nname = \"cdc\"\nprefix = \"cdc/\"\ntargets = [\"maxcompute\"]\nschema = '{cdc_schema}'\nmaxcompute.table_name = \"people\"\nmaxcompute.row-kind-field = \"op\"\n"
        ),
    );
    s.put("files/a.txt", "aaa");
    s.put("files/b.txt", "bbbb");
    s.put("files/c.txt", "cc");
    s.put(
        "cdc/1.ndjson",
        "{\"id\":1,\"name\":\"ann\",\"op\":\"+I\"}\n{\"id\":2,\"name\":\"bob\",\"op\":\"+I\"}\n{\"id\":3,\"name\":\"cy\",\"op\":\"INSERT\"}\n",
    );
    s.put(
        "cdc/2.ndjson",
        "{\"id\":1,\"name\":\"ann\",\"op\":\"-U\"}\n{\"id\":1,\"name\":\"anne\",\"op\":\"+U\"}\n{\"id\":2,\"op\":\"-D\"}\n",
    );
    s.run();
    assert_eq!(s.emu.table("proj.objects").unwrap().primary_key, ["key"]);
    assert_eq!(
        s.pick("objects", &["key", "size", "operation"]),
        [
            ["files/a.txt", "3", "created"],
            ["files/b.txt", "4", "created"],
            ["files/c.txt", "2", "created"]
        ]
    );
    assert_eq!(
        s.pick("people", &["id", "name"]),
        [["1", "anne"], ["3", "cy"]]
    );
    // The UPDATE_BEFORE row is refused with a clear reason, the rest lands.
    let dl = s.dead_letters();
    assert_eq!(dl.len(), 1, "{dl:?}");
    assert_eq!(dl[0]["route"], "cdc");
    let reason = dl[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("maxcompute table proj.people") && reason.contains("update_before"),
        "{reason}"
    );
    assert!(
        dl[0]["raw"].as_str().unwrap().contains("\"-U\""),
        "{}",
        dl[0]
    );

    // A removed object is a delete, a changed one an upsert.
    s.remove("files/b.txt");
    s.put("files/c.txt", "cccccc");
    s.run();
    assert_eq!(
        s.pick("objects", &["key", "size", "operation"]),
        [
            ["files/a.txt", "3", "created"],
            ["files/c.txt", "6", "created"]
        ]
    );
    assert_eq!(s.dead_letters().len(), 1);
}

#[test]
fn multi_table_names_come_from_the_object_path() {
    let s = Stand::new();
    s.config(
        "table_name = \"${table_name}_sink\"",
        "[[routes]]\nname = \"tables\"\nprefix = \"tables/\"\ntargets = [\"maxcompute\"]\n",
    );
    s.put(
        "tables/orders/1.ndjson",
        "{\"id\":1,\"item\":\"pen\"}\n{\"id\":2,\"item\":\"ink\"}\n",
    );
    s.put("tables/users/1.ndjson", "{\"id\":7,\"name\":\"zoe\"}\n");
    let out = s.run();
    assert!(
        out.contains("committed proj.orders_sink") && out.contains("committed proj.users_sink"),
        "{out}"
    );
    assert_eq!(s.rows("orders_sink", None), [["1", "pen"], ["2", "ink"]]);
    assert_eq!(s.rows("users_sink", None), [["7", "zoe"]]);
}

#[test]
fn every_schema_and_data_save_mode() {
    let rows = [(1, "ann"), (2, "bob")];
    let stand = |modes: &str| {
        let s = Stand::new();
        s.config(
            &format!("table_name = \"events\"\n{modes}"),
            &people_route("events/"),
        );
        s.put("events/a.ndjson", &ndjson(&rows));
        s
    };
    let existing = |s: &Stand, old: &[(i64, &str)]| {
        s.create("events", &[("id", "bigint"), ("name", "string")]);
        s.insert("events", None, old);
    };

    // RECREATE_SCHEMA: the old table (other columns, old rows) is dropped and made again.
    let s = stand("schema_save_mode = \"RECREATE_SCHEMA\"");
    s.create("events", &[("id", "bigint"), ("legacy", "string")]);
    s.insert("events", None, &[(9, "x")]);
    s.run();
    assert_eq!(s.columns("events"), ["id bigint", "name string"]);
    assert_eq!(s.rows("events", None), people(&rows));

    // CREATE_SCHEMA_WHEN_NOT_EXIST on an existing table: kept, with its rows.
    let s = stand("schema_save_mode = \"CREATE_SCHEMA_WHEN_NOT_EXIST\"");
    existing(&s, &[(9, "x")]);
    s.run();
    assert_eq!(s.sql("CREATE"), 0);
    assert_eq!(
        s.rows("events", None),
        people(&[(1, "ann"), (2, "bob"), (9, "x")])
    );

    // ERROR_WHEN_SCHEMA_NOT_EXIST: fails while the table is missing; the staged rows wait.
    let s = stand("schema_save_mode = \"ERROR_WHEN_SCHEMA_NOT_EXIST\"");
    let (code, out, err) = s.floe(None);
    assert_ne!(code, 0, "{out}");
    assert!(
        err.contains("maxcompute table proj.events does not exist")
            && err.contains("ERROR_WHEN_SCHEMA_NOT_EXIST"),
        "{err}"
    );
    s.create("events", &[("id", "bigint"), ("name", "string")]);
    s.run();
    assert_eq!(s.rows("events", None), people(&rows));

    // IGNORE: no statement at all.
    let s = stand("schema_save_mode = \"IGNORE\"");
    existing(&s, &[(9, "x")]);
    s.run();
    assert!(s.emu.sql_log().is_empty(), "{:?}", s.emu.sql_log());
    assert_eq!(s.rows("events", None).len(), 3);

    // DROP_DATA: once, before the first commit; later commits keep what floe landed.
    let s = stand("data_save_mode = \"DROP_DATA\"");
    existing(&s, &[(9, "x")]);
    s.run();
    assert_eq!(s.rows("events", None), people(&rows));
    s.put("events/b.ndjson", &ndjson(&[(3, "cy")]));
    s.run();
    assert_eq!(
        s.rows("events", None),
        people(&[(1, "ann"), (2, "bob"), (3, "cy")])
    );
    assert_eq!(s.sql("TRUNCATE"), 1);

    // APPEND_DATA: the old rows stay.
    let s = stand("data_save_mode = \"APPEND_DATA\"");
    existing(&s, &[(9, "x")]);
    s.run();
    assert_eq!(s.rows("events", None).len(), 3);

    // CUSTOM_PROCESSING: custom_sql runs first.
    let s = stand(
        "data_save_mode = \"CUSTOM_PROCESSING\"\ncustom_sql = \"DELETE FROM events WHERE id = 9\"",
    );
    existing(&s, &[(9, "x"), (8, "y")]);
    s.run();
    assert_eq!(
        s.rows("events", None),
        people(&[(1, "ann"), (2, "bob"), (8, "y")])
    );
    assert_eq!(s.sql("DELETE"), 1);

    // ERROR_WHEN_DATA_EXISTS: fails on rows, passes on an empty table.
    let s = stand("data_save_mode = \"ERROR_WHEN_DATA_EXISTS\"");
    existing(&s, &[(9, "x")]);
    let (code, out, err) = s.floe(None);
    assert_ne!(code, 0, "{out}");
    assert!(
        err.contains("already has 1 rows") && err.contains("ERROR_WHEN_DATA_EXISTS"),
        "{err}"
    );
    assert_eq!(s.rows("events", None).len(), 1);
    let s = stand("data_save_mode = \"ERROR_WHEN_DATA_EXISTS\"");
    existing(&s, &[]);
    s.run();
    assert_eq!(s.rows("events", None), people(&rows));
}

#[test]
fn a_create_template_with_a_custom_field() {
    let s = Stand::new();
    let template = "save_mode_create_template = '''CREATE TABLE IF NOT EXISTS `${table}` (\n    id,\n    amount DECIMAL(20,4) COMMENT 'money',\n    ${rowtype_fields}\n) COMMENT '${comment}';'''";
    s.config(
        &format!("table_name = \"sales\"\n{template}"),
        "[[routes]]\nname = \"sales\"\nprefix = \"sales/\"\ntargets = [\"maxcompute\"]\n\
         schema = '{\"fields\":[{\"name\":\"id\",\"type\":\"long\",\"required\":true},{\"name\":\"name\",\"type\":\"string\"},{\"name\":\"amount\",\"type\":\"double\"}]}'\n",
    );
    s.put(
        "sales/1.ndjson",
        "{\"id\":1,\"name\":\"pen\",\"amount\":1.5}\n{\"id\":2,\"name\":\"ink\",\"amount\":20.25}\n",
    );
    s.run();
    assert_eq!(
        s.columns("sales"),
        ["id bigint", "amount decimal(20,4)", "name string"]
    );
    let def = s.emu.table("proj.sales").unwrap();
    assert!(!def.columns.columns()[0].nullable, "id keeps NOT NULL");
    assert_eq!(def.comment, "landed by floe (route sales)");
    assert_eq!(
        s.rows("sales", None),
        [["1", "1.5", "pen"], ["2", "20.25", "ink"]]
    );
}

#[test]
fn one_change_lands_in_iceberg_and_maxcompute_under_one_checkpoint() {
    for fault in [None, Some("commit.mc.after-blocks")] {
        let s = Stand::new();
        s.config(
            "table_name = \"events\"",
            &format!(
                "[[routes]]\nname = \"events\"\nprefix = \"events/\"\ntable = \"lake.events\"\n\
                 targets = [\"iceberg\", \"maxcompute\"]\nschema = '{PEOPLE_SCHEMA}'\n"
            ),
        );
        s.put("events/a.ndjson", &ndjson(&[(1, "ann"), (2, "bob")]));
        if let Some(f) = fault {
            let (code, out, err) = s.floe(Some(f));
            assert_eq!(code, 86, "{f}: the fault did not fire\n{out}\n{err}");
            // Iceberg (first in target order) committed; MaxCompute has nothing yet.
            assert_eq!(s.iceberg("lake.events")["count"], 2);
            assert!(s.rows("events", None).is_empty());
        }
        let out = s.run();
        assert!(out.contains("committed proj.events"), "{fault:?}: {out}");
        let ice = s.iceberg("lake.events");
        assert_eq!(ice["count"], 2, "{fault:?}");
        assert_eq!(ice["snapshots"].as_array().unwrap().len(), 1, "{fault:?}");
        assert_eq!(
            s.rows("events", None),
            people(&[(1, "ann"), (2, "bob")]),
            "{fault:?}"
        );
        // The shared files are Iceberg's data files: they stay.
        assert!(!s.parquet_files().is_empty());
        let again = s.run();
        assert!(again.contains("nothing changed"), "{again}");
        assert_eq!(s.iceberg("lake.events")["count"], 2);
        assert_eq!(s.rows("events", None).len(), 2);
    }
}

#[test]
fn bad_values_are_dead_lettered_and_the_rest_lands() {
    let route = "[[routes]]\nname = \"prices\"\nprefix = \"prices/\"\ntable = \"lake.prices\"\n\
         targets = [\"iceberg\", \"maxcompute\"]\n\
         schema = '{\"fields\":[{\"name\":\"id\",\"type\":\"string\"},{\"name\":\"amount\",\"type\":\"double\"},{\"name\":\"name\",\"type\":\"string\"}]}'\n";
    let data = "{\"id\":\"1\",\"amount\":1.5,\"name\":\"a\"}\n{\"id\":\"x2\",\"amount\":2.0,\"name\":\"b\"}\n\
                {\"id\":\"3\",\"amount\":123456.78,\"name\":\"c\"}\n{\"id\":\"4\",\"amount\":4.25,\"name\":\"d\"}\n";
    let stand = |on_error: &str, format: &str| {
        let s = Stand::new();
        s.create(
            "prices",
            &[
                ("id", "bigint"),
                ("amount", "decimal(5,2)"),
                ("name", "string"),
            ],
        );
        s.config(
            &format!("table_name = \"prices\"\ntunnel_format = \"{format}\""),
            &format!("{route}on-error = \"{on_error}\"\n"),
        );
        s.put("prices/p.ndjson", data);
        s
    };

    // Both tunnel formats land the same rows and set aside the same ones, for the same reasons.
    for format in ["record", "arrow"] {
        let s = stand("dead-letter", format);
        let out = s.run();
        assert!(
            out.lines().any(|l| l.contains("committed proj.prices:")
                && l.contains(" 2 rows (2 bad rows set aside)")),
            "{out}"
        );
        // Iceberg takes every row (its schema has them as text and doubles); MaxCompute two.
        assert_eq!(s.iceberg("lake.prices")["count"], 4);
        assert_eq!(s.pick("prices", &["id", "name"]), [["1", "a"], ["4", "d"]]);
        let mut dl = s.dead_letters();
        dl.sort_by_key(|d| d["line"].as_u64());
        assert_eq!(dl.len(), 2, "{dl:?}");
        assert_eq!(dl[0]["line"], 2);
        assert!(
            dl[0]["reason"]
                .as_str()
                .unwrap()
                .contains("column `id`: text `x2` is not an integer"),
            "{}",
            dl[0]
        );
        assert_eq!(dl[1]["line"], 3);
        assert!(
            dl[1]["reason"]
                .as_str()
                .unwrap()
                .contains("column `amount`")
                && dl[1]["reason"].as_str().unwrap().contains("decimal(5,2)"),
            "{}",
            dl[1]
        );
        assert!(dl[1]["url"].as_str().unwrap().ends_with(".parquet"));
        assert!(dl[1]["raw"].as_str().unwrap().contains("123456.78"));
        s.run();
        assert_eq!(s.dead_letters().len(), 2);
        let arrow_blocks = (s.emu.requests().iter())
            .filter(|r| r.method == "PUT" && r.target.ends_with("&arrow"))
            .count();
        assert_eq!(arrow_blocks, usize::from(format == "arrow"), "{format}");
    }

    let s = stand("skip", "record");
    s.run();
    assert_eq!(s.pick("prices", &["id"]), [["1"], ["4"]]);
    assert!(s.dead_letters().is_empty());

    let s = stand("fail", "record");
    let (code, out, err) = s.floe(None);
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("on-error = fail"), "{err}");
    assert!(s.rows("prices", None).is_empty());
}

/// Events: 2500 rows in three row groups (three blocks) plus one small object, one value too
/// long for its column; a table of object metadata with a primary key (an upsert session).
fn crash_stand() -> Stand {
    let s = Stand::new();
    s.create("events", &[("id", "bigint"), ("name", "varchar(8)")]);
    s.insert("events", None, &[(999, "old")]);
    s.config(
        &format!("table_name = \"events\"\ndata_save_mode = \"DROP_DATA\"\n{PK_TEMPLATE}"),
        &format!(
            "[ingest]\nrow-group-rows = 1024\n\n{}\n\
             [[routes]]\nname = \"files\"\nprefix = \"files/\"\nmode = \"metadata\"\ntargets = [\"maxcompute\"]\nmaxcompute.table_name = \"objects\"\n",
            people_route("events/")
        ),
    );
    let big: Vec<(i64, String)> = (1..=2500)
        .map(|i| {
            (
                i,
                if i == 77 {
                    "far-too-long".into()
                } else {
                    format!("n{i}")
                },
            )
        })
        .collect();
    let big: Vec<(i64, &str)> = big.iter().map(|(i, n)| (*i, n.as_str())).collect();
    s.put("events/big.ndjson", &ndjson(&big));
    s.put("events/small.ndjson", &ndjson(&[(3001, "x"), (3002, "y")]));
    s.put("files/a.txt", "a");
    s.put("files/b.txt", "bb");
    s
}

fn assert_exactly_once(s: &Stand, context: &str) {
    let ids: Vec<i64> = s
        .rows("events", None)
        .iter()
        .map(|r| r[0].parse().unwrap())
        .collect();
    let want: Vec<i64> = (1..=2500)
        .filter(|i| *i != 77)
        .chain([3001, 3002])
        .collect();
    assert_eq!(ids.len(), want.len(), "{context}: events rows");
    assert_eq!(ids, want, "{context}: events ids");
    let dl = s.dead_letters();
    assert_eq!(dl.len(), 1, "{context}: dead letters {dl:?}");
    assert!(
        dl[0]["raw"].as_str().unwrap().contains("far-too-long"),
        "{context}"
    );
    assert_eq!(
        s.pick("objects", &["key", "size"]),
        [["files/a.txt", "1"], ["files/b.txt", "2"]],
        "{context}: objects"
    );
    for table in ["`events`", "`objects`"] {
        let truncates = s
            .emu
            .sql_log()
            .iter()
            .filter(|q| q.starts_with("TRUNCATE") && q.contains(table))
            .count();
        assert_eq!(truncates, 1, "{context}: DROP_DATA ran once on {table}");
    }
}

#[test]
fn a_crash_at_every_step_of_the_session_protocol_then_a_rerun_lands_every_row_once() {
    // (fault, expire the sessions before the rerun)
    let cases = [
        ("ingest.after-stage", false),
        ("commit.after-lease", false),
        ("commit.after-record", false),
        ("commit.mc.after-save-modes", false),
        ("commit.mc.after-session", false),
        ("commit.mc.after-session", true),
        ("commit.mc.after-blocks", false),
        ("commit.mc.after-blocks", true),
        ("commit.mc.after-commit", false),
        ("commit.after-done", false),
        ("commit.after-batches", false),
        // The second target: the metadata table's upsert session.
        ("commit.mc.after-session@2", false),
        ("commit.mc.after-blocks@2", false),
        ("commit.mc.after-blocks@2", true),
        ("commit.mc.after-commit@2", false),
    ];
    for (fault, expire) in cases {
        let context = format!("{fault}{}", if expire { " (expired)" } else { "" });
        let s = crash_stand();
        let (code, out, err) = s.floe(Some(fault));
        assert_eq!(code, 86, "{context}: the fault did not fire\n{out}\n{err}");
        if expire {
            s.emu.advance_clock(Duration::from_secs(25 * 3600));
        }
        let sessions_before = s.upload_sessions();
        let out = s.run();
        assert_exactly_once(&s, &context);
        if fault.starts_with("commit.mc.after-session")
            || fault.starts_with("commit.mc.after-blocks")
        {
            assert!(out.contains("[recovered]"), "{context}: {out}");
        }
        if fault == "commit.mc.after-blocks" {
            // An open session is resumed and committed; an expired one is redone.
            let new_sessions = s.upload_sessions() - sessions_before;
            assert_eq!(
                new_sessions,
                usize::from(expire),
                "{context}: upload sessions created by the rerun"
            );
        }
        let again = s.run();
        assert!(again.contains("nothing changed"), "{context}: {again}");
        assert_exactly_once(&s, &format!("{context}, third run"));
    }
}

#[test]
fn lost_answers_and_failed_blocks_on_the_wire_then_a_rerun_lands_every_row_once() {
    let cases = [
        // The commit applied, its answer lost: the session's state says it committed.
        (
            FaultPoint::CommitUpload,
            FaultAction::DropConnectionAfterApply,
        ),
        // A block refused: the run fails, the rerun resumes the session.
        (
            FaultPoint::WriteBlock(Some(1)),
            FaultAction::Fail {
                status: 400,
                code: "MalformedDataStream".into(),
            },
        ),
        (FaultPoint::CommitUpsert, FaultAction::DropConnection),
    ];
    for (point, action) in cases {
        let context = format!("{point:?} {action:?}");
        let s = crash_stand();
        s.emu.inject(point, action);
        let _ = s.floe(None);
        s.run();
        assert_exactly_once(&s, &context);
    }
}
