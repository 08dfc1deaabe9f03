//! The upsert session's record layout: the table columns plus five hidden columns.
//!
//! | column | type | value floe writes |
//! |---|---|---|
//! | `__version` | bigint | null |
//! | `__app_version` | bigint | null |
//! | `__operation` | tinyint | 85 (`'U'`, upsert) or 68 (`'D'`, delete) |
//! | `__key_cols` | `array<bigint>` | null |
//! | `__value_cols` | `array<bigint>` | `[]`, or the indexes of the columns a partial update sets |
//!
//! Records are then encoded with [`crate::BlockEncoder`] over [`upsert_schema`], one block per
//! bucket ([`crate::RecordHasher`] picks it).

use floe_core::Result;

use crate::schema::{Column, TableSchema};
use crate::types::DataType;
use crate::value::Value;

/// Hidden column: version (left null).
pub const VERSION_COLUMN: &str = "__version";
/// Hidden column: application version (left null).
pub const APP_VERSION_COLUMN: &str = "__app_version";
/// Hidden column: the operation code.
pub const OPERATION_COLUMN: &str = "__operation";
/// Hidden column: key columns (left null).
pub const KEY_COLS_COLUMN: &str = "__key_cols";
/// Hidden column: the columns a partial update sets.
pub const VALUE_COLS_COLUMN: &str = "__value_cols";

/// What an upsert record does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UpsertOperation {
    /// Insert or replace the row with this key.
    Upsert,
    /// Delete the row with this key.
    Delete,
}

impl UpsertOperation {
    /// The `__operation` code: `'U'` or `'D'`.
    pub fn code(self) -> i8 {
        match self {
            UpsertOperation::Upsert => b'U' as i8,
            UpsertOperation::Delete => b'D' as i8,
        }
    }
}

/// The record schema of an upsert session over `table`: its columns, then the hidden ones.
pub fn upsert_schema(table: &TableSchema) -> Result<TableSchema> {
    table.extended([
        Column::new(VERSION_COLUMN, DataType::BigInt),
        Column::new(APP_VERSION_COLUMN, DataType::BigInt),
        Column::new(OPERATION_COLUMN, DataType::TinyInt),
        Column::new(KEY_COLS_COLUMN, DataType::array(DataType::BigInt)),
        Column::new(VALUE_COLS_COLUMN, DataType::array(DataType::BigInt)),
    ])
}

/// Append the hidden values to a table row: `op`, and `value_columns` (the indexes a partial update
/// sets; `None` for a full row, written as `[]`).
pub fn push_hidden_values(
    row: &mut Vec<Value>,
    op: UpsertOperation,
    value_columns: Option<&[usize]>,
) {
    let value_cols = value_columns
        .unwrap_or(&[])
        .iter()
        .map(|&i| Value::BigInt(i as i64))
        .collect();
    row.extend([
        Value::Null,
        Value::Null,
        Value::TinyInt(op.code()),
        Value::Null,
        Value::Array(value_cols),
    ]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_columns_follow_the_table_columns() {
        let t = TableSchema::from_type_strings([("id", "bigint")]).unwrap();
        let u = upsert_schema(&t).unwrap();
        let names: Vec<_> = u.columns().iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "id",
                "__version",
                "__app_version",
                "__operation",
                "__key_cols",
                "__value_cols"
            ]
        );
        assert_eq!(u.columns()[3].data_type.to_string(), "tinyint");
        assert_eq!(u.columns()[5].data_type.to_string(), "array<bigint>");
        assert!(upsert_schema(&u).is_err(), "hidden columns twice");
        let mut row = vec![Value::BigInt(1)];
        push_hidden_values(&mut row, UpsertOperation::Delete, Some(&[0]));
        assert_eq!(row[3], Value::TinyInt(68));
        assert_eq!(row[5], Value::Array(vec![Value::BigInt(0)]));
        assert_eq!(UpsertOperation::Upsert.code(), 85);
    }
}
