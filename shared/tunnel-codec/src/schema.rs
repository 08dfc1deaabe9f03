//! The record schema: the data columns of a table (or of an upsert session) in order.
//!
//! A column's position decides its protobuf field number (index + 1). Partition columns are not
//! part of the record and do not belong here.

use floe_core::{Error, Result};

use crate::types::DataType;

/// One column of a [`TableSchema`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Column {
    /// The column name.
    pub name: String,
    /// The column type.
    pub data_type: DataType,
    /// Whether the column accepts nulls (the encoder refuses a null for a non-nullable column).
    pub nullable: bool,
}

impl Column {
    /// A nullable column.
    pub fn new(name: impl Into<String>, data_type: DataType) -> Self {
        Column {
            name: name.into(),
            data_type,
            nullable: true,
        }
    }

    /// The same column, not nullable.
    pub fn not_null(mut self) -> Self {
        self.nullable = false;
        self
    }
}

/// The data columns of a table, in schema order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TableSchema {
    columns: Vec<Column>,
}

impl TableSchema {
    /// A schema of `columns`; names must be unique (case-insensitively, as in MaxCompute).
    pub fn new(columns: Vec<Column>) -> Result<Self> {
        for (i, c) in columns.iter().enumerate() {
            if c.name.is_empty() {
                return Err(Error::invalid_input(format!(
                    "column {i} has an empty name"
                )));
            }
            if columns[..i]
                .iter()
                .any(|o| o.name.eq_ignore_ascii_case(&c.name))
            {
                return Err(Error::invalid_input(format!(
                    "duplicate column `{}` in schema",
                    c.name
                )));
            }
        }
        Ok(TableSchema { columns })
    }

    /// A schema from `(name, type string)` pairs, all nullable.
    pub fn from_type_strings<'a>(
        columns: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self> {
        let columns = columns
            .into_iter()
            .map(|(name, t)| Ok(Column::new(name, t.parse()?)))
            .collect::<Result<Vec<_>>>()?;
        TableSchema::new(columns)
    }

    /// The columns in order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The number of columns.
    pub fn len(&self) -> usize {
        self.columns.len()
    }

    /// Whether there are no columns.
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// The index of the column called `name` (case-insensitive).
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    }

    /// The column called `name` (case-insensitive).
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.index_of(name).map(|i| &self.columns[i])
    }

    /// This schema with `more` columns appended.
    pub fn extended(&self, more: impl IntoIterator<Item = Column>) -> Result<Self> {
        let mut columns = self.columns.clone();
        columns.extend(more);
        TableSchema::new(columns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_are_case_insensitive_and_names_unique() {
        let s = TableSchema::from_type_strings([("id", "bigint"), ("Name", "string")]).unwrap();
        assert_eq!(s.index_of("name"), Some(1));
        assert_eq!(s.column("ID").unwrap().data_type, DataType::BigInt);
        let e = TableSchema::from_type_strings([("a", "int"), ("A", "int")]).unwrap_err();
        assert_eq!(e.to_string(), "duplicate column `A` in schema");
    }
}
