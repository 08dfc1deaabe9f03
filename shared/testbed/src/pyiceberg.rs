//! Reading tables back with pyiceberg, the independent reader.
//!
//! Runs `tests/py/iceberg_read.py` with the Python of floe's test venv ([`crate::venv`]) and
//! returns its JSON. A missing venv or pyiceberg is a test failure that says how to install
//! it, never a skipped check.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::venv::{python_with, run_python};

/// What `pip install` gives the reader (the version `tests/requirements.txt` pins).
pub const PYICEBERG_REQUIREMENT: &str = "pyiceberg[sql-sqlite,pyarrow,pyiceberg-core]==0.12.0";

/// The venv's python with pyiceberg (checked once per process), or a panic saying how to
/// install it.
pub fn python() -> PathBuf {
    static CHECKED: OnceLock<PathBuf> = OnceLock::new();
    CHECKED
        .get_or_init(|| {
            python_with(&[("pyiceberg", PYICEBERG_REQUIREMENT)]).unwrap_or_else(|e| panic!("{e}"))
        })
        .clone()
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/py/iceberg_read.py")
}

/// Run the reader with `args`; panics with its output on failure.
pub fn read_table(args: &[String]) -> serde_json::Value {
    try_read_table(args).unwrap_or_else(|e| panic!("pyiceberg read failed: {e}"))
}

/// Run the reader with `args`; an error (with the reader's output) when it fails, e.g. because
/// the table does not exist yet.
pub fn try_read_table(args: &[String]) -> floe_core::Result<serde_json::Value> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_python(&python(), &script(), &args)?;
    serde_json::from_str(&out).map_err(|e| {
        floe_core::Error::new(
            floe_core::ErrorKind::Protocol,
            "pyiceberg reader printed invalid json",
        )
        .with_source(e)
    })
}

/// The deletion vectors of the Puffin file at `puffin` as pyiceberg decodes them
/// (`tests/py/read_deletion_vectors.py`): `{"blobs": [...], "vectors": {data file: [positions]}}`.
pub fn read_deletion_vectors(puffin: &Path) -> serde_json::Value {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/py/read_deletion_vectors.py");
    let path = puffin.display().to_string();
    let out = run_python(&python(), &script, &[&path])
        .unwrap_or_else(|e| panic!("pyiceberg could not decode {path}: {e}"));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("invalid json from {path}: {e}"))
}

/// Read a table of a SQLite catalog (`catalog` is the catalog name floe used).
pub fn read_sql_table(
    catalog: &str,
    sqlite: &Path,
    warehouse: &Path,
    table: &str,
) -> serde_json::Value {
    read_table(&sql_args(catalog, sqlite, warehouse, table))
}

/// [`read_sql_table`], with an error instead of a panic.
pub fn try_read_sql_table(
    catalog: &str,
    sqlite: &Path,
    warehouse: &Path,
    table: &str,
) -> floe_core::Result<serde_json::Value> {
    try_read_table(&sql_args(catalog, sqlite, warehouse, table))
}

fn sql_args(catalog: &str, sqlite: &Path, warehouse: &Path, table: &str) -> Vec<String> {
    vec![
        "--catalog".into(),
        catalog.into(),
        "--uri".into(),
        format!("sqlite:///{}", sqlite.display()),
        "--warehouse".into(),
        format!("file://{}", warehouse.display()),
        "--table".into(),
        table.into(),
    ]
}

/// Read a table through an Iceberg REST catalog with a bearer token and a path prefix (the
/// warehouse's, as lakana-server wants it).
pub fn read_rest_table(uri: &str, token: &str, prefix: &str, table: &str) -> serde_json::Value {
    read_table(&[
        "--rest".into(),
        uri.into(),
        "--token".into(),
        token.into(),
        "--prefix".into(),
        prefix.into(),
        "--table".into(),
        table.into(),
    ])
}

/// Read several tables of a SQLite catalog in one reader process (one Python start).
pub fn read_sql_tables(
    catalog: &str,
    sqlite: &Path,
    warehouse: &Path,
    tables: &[&str],
) -> std::collections::HashMap<String, serde_json::Value> {
    let mut args = vec![
        "--catalog".to_owned(),
        catalog.to_owned(),
        "--uri".to_owned(),
        format!("sqlite:///{}", sqlite.display()),
        "--warehouse".to_owned(),
        format!("file://{}", warehouse.display()),
    ];
    for t in tables {
        args.push("--table".into());
        args.push((*t).to_owned());
    }
    let v = read_table(&args);
    if tables.len() == 1 {
        return std::collections::HashMap::from([(tables[0].to_owned(), v)]);
    }
    serde_json::from_value(v).expect("reader printed a map of tables")
}

/// The `id` of every row of a reader's answer (`{"rows": [{"id": …}, …]}`), sorted.
pub fn row_ids(read: &serde_json::Value) -> Vec<i64> {
    let mut ids: Vec<i64> = read["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("no rows in {read}"))
        .iter()
        .map(|r| {
            r["id"]
                .as_i64()
                .unwrap_or_else(|| panic!("row without an id: {r}"))
        })
        .collect();
    ids.sort();
    ids
}

/// How many times each id occurs in a list of ids (`[1, 2, 2]` → `{1: 1, 2: 2}`).
pub fn id_counts(values: &serde_json::Value) -> std::collections::BTreeMap<i64, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for v in values
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {values}"))
    {
        let id = v.as_i64().unwrap_or_else(|| panic!("not an id: {v}"));
        *counts.entry(id).or_default() += 1;
    }
    counts
}
