//! Reading Iceberg tables back with DuckDB's iceberg extension, the second independent reader
//! (`tests/py/duckdb_read.py`): it reads position and equality deletes.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::venv::{python_with, run_python};

/// The venv's python, checked once to have DuckDB and both extensions.
fn python() -> PathBuf {
    static CHECKED: OnceLock<PathBuf> = OnceLock::new();
    CHECKED
        .get_or_init(|| {
            python_with(&[
                ("duckdb", "duckdb==1.5.5"),
                (
                    "duckdb_extension_iceberg",
                    "duckdb-extension-iceberg==1.5.5",
                ),
                ("duckdb_extension_avro", "duckdb-extension-avro==1.5.5"),
            ])
            .unwrap_or_else(|e| panic!("{e}"))
        })
        .clone()
}

/// Read the table whose current metadata file is `metadata` (a path or `file://` URL), rows
/// ordered by `order_by` when given: `{"count": N, "rows": [...]}`.
pub fn read_metadata(metadata: &str, order_by: Option<&str>) -> serde_json::Value {
    read(&["--metadata", metadata], order_by)
}

/// Read `table` (`namespace.name`) of the SQL catalog `floe` in the SQLite file `db`, as
/// [`read_metadata`] does.
pub fn read_sql_table(db: &Path, table: &str, order_by: Option<&str>) -> serde_json::Value {
    let db = db.display().to_string();
    read(&["--catalog-db", &db, "--table", table], order_by)
}

fn read(args: &[&str], order_by: Option<&str>) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/py/duckdb_read.py");
    let mut args = args.to_vec();
    if let Some(column) = order_by {
        args.extend(["--order-by", column]);
    }
    let out =
        run_python(&python(), &script, &args).unwrap_or_else(|e| panic!("duckdb read failed: {e}"));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("duckdb printed invalid json: {e}"))
}
