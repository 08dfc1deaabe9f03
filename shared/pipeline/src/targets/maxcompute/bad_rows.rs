//! Rows MaxCompute cannot take: found while a commit converts its staged rows, set aside under
//! the route's `on-error` (dead letters named by commit, file and row group, so a redo after a
//! crash writes the same letters once).

use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch};
use floe_core::{Error, Result};
use floe_maxcompute::RowKind;

use super::Part;
use crate::config::RowKinds;
use crate::deadletter::{DeadLetter, DeadLetterWriter};
use crate::protocol::records::CommitRecord;
use crate::targets::Committer;

/// A dead letter's `raw` is cut at this many characters.
const RAW_MAX_CHARS: usize = 4096;

/// A row MaxCompute cannot take.
pub(super) struct BadRow {
    line: u64,
    reason: String,
    raw: String,
    bucket: String,
    key: String,
}

impl Committer<'_> {
    /// Apply the route's `on-error` to the bad rows of one row group of one file.
    pub(super) async fn set_aside(
        &self,
        rec: &CommitRecord,
        part: &Part<'_>,
        file_index: usize,
        row_group: usize,
        bad: Vec<BadRow>,
    ) -> Result<u64> {
        let Some(firstbad) = bad.first() else {
            return Ok(0);
        };
        let n = bad.len() as u64;
        let table = &part.detail.table;
        match part.detail.on_error.as_str() {
            "fail" => Err(Error::invalid_input(format!(
                "{} row {}: maxcompute table {table} cannot take it: {} (on-error = fail)",
                part.file.path, firstbad.line, firstbad.reason
            ))
            .with_retryable(false)),
            "skip" => {
                tracing::warn!(table = %table, file = %part.file.path, rows = n, reason = %firstbad.reason, "rows maxcompute cannot take were skipped");
                Ok(n)
            }
            _ => {
                // Named by commit, file and row group, filed under the commit's day: a redo
                // after a crash finds the part already written (same letters: done).
                let name = format!("{}-{file_index}-{row_group}", rec.id);
                let day = chrono::DateTime::from_timestamp_millis(rec.created_ms)
                    .unwrap_or_else(chrono::Utc::now)
                    .format("%Y-%m-%d")
                    .to_string();
                let mut w = DeadLetterWriter::new(self.dead_letters.clone(), &name).on_day(day);
                for b in bad {
                    w.add(&DeadLetter {
                        time: chrono::Utc::now().to_rfc3339(),
                        batch: part.batch.to_owned(),
                        route: part.detail.route.clone(),
                        bucket: b.bucket,
                        key: b.key,
                        url: part.file.path.clone(),
                        line: Some(b.line),
                        reason: format!("maxcompute table {table}: {}", b.reason),
                        raw: b.raw,
                    })
                    .await?;
                }
                w.flush().await?;
                tracing::warn!(table = %table, file = %part.file.path, rows = n, "message dead-lettered");
                Ok(n)
            }
        }
    }
}

pub(super) fn row_error_reason(e: &floe_maxcompute::RowError) -> String {
    match &e.column {
        Some(c) => format!("column `{c}`: {}", e.message),
        None => e.message.clone(),
    }
}

/// A bad row with what a dead letter shows of it: the row as JSON, and its object's bucket and
/// key when the row carries them (metadata rows do).
pub(super) fn bad_row(batch: &RecordBatch, i: usize, line: u64, reason: String) -> BadRow {
    let text = |name: &str| {
        batch
            .column_by_name(name)
            .and_then(|c| c.as_string_opt::<i32>())
            .filter(|c| c.is_valid(i))
            .map(|c| c.value(i).to_owned())
            .unwrap_or_default()
    };
    BadRow {
        line: line + 1,
        reason,
        raw: row_json(batch, i),
        bucket: text("bucket"),
        key: text("key"),
    }
}

fn row_json(batch: &RecordBatch, i: usize) -> String {
    let mut out = Vec::new();
    let mut w = arrow_json::LineDelimitedWriter::new(&mut out);
    if w.write(&batch.slice(i, 1))
        .and_then(|()| w.finish())
        .is_err()
    {
        return String::new();
    }
    drop(w);
    let text = String::from_utf8_lossy(&out).trim_end().to_owned();
    if text.chars().count() > RAW_MAX_CHARS {
        text.chars().take(RAW_MAX_CHARS).collect()
    } else {
        text
    }
}

/// The row-kind column of a batch, if the route has one.
pub(super) struct KindColumn {
    field: Option<String>,
    values: Option<arrow_array::StringArray>,
    /// `operation` of metadata rows: removals are deletes only where upserts are used.
    pub(super) changelog: bool,
}

impl KindColumn {
    pub(super) fn new(kinds: &RowKinds, batch: &RecordBatch) -> Result<Self> {
        let (field, changelog) = match kinds {
            RowKinds::Inserts => {
                return Ok(KindColumn {
                    field: None,
                    values: None,
                    changelog: false,
                });
            }
            RowKinds::Changelog(f) => (f, true),
            RowKinds::Cdc(f) => (f, false),
        };
        let schema = batch.schema();
        let index = schema
            .fields()
            .iter()
            .position(|x| x.name().eq_ignore_ascii_case(field))
            .ok_or_else(|| {
                Error::config(
                    "maxcompute.row-kind-field",
                    format!("the staged rows have no field `{field}`"),
                )
            })?;
        let values = arrow_cast::cast(batch.column(index), &arrow_schema::DataType::Utf8)
            .map_err(|e| {
                Error::config(
                    "maxcompute.row-kind-field",
                    format!("field `{field}` cannot be read as text: {e}"),
                )
            })?
            .as_string::<i32>()
            .clone();
        Ok(KindColumn {
            field: Some(schema.field(index).name().clone()),
            values: Some(values),
            changelog,
        })
    }

    pub(super) fn kind(&self, i: usize) -> Result<RowKind> {
        match (&self.values, &self.field) {
            (Some(v), Some(f)) if v.is_valid(i) => RowKind::parse(v.value(i))
                .map_err(|e| e.while_doing(format!("row kind field `{f}`"))),
            (Some(_), Some(f)) => Err(Error::invalid_input(format!(
                "row kind field `{f}` is null"
            ))),
            _ => Ok(RowKind::Insert),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow_array::{Int64Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};

    fn batch(ops: Vec<Option<&str>>) -> RecordBatch {
        let n = ops.len() as i64;
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Int64, false),
                Field::new("op", DataType::Utf8, true),
                Field::new("key", DataType::Utf8, true),
            ])),
            vec![
                Arc::new(Int64Array::from((1..=n).collect::<Vec<_>>())),
                Arc::new(StringArray::from(ops)),
                Arc::new(StringArray::from(vec![Some("a/b.json"); n as usize])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn row_kinds_come_from_the_field() {
        let b = batch(vec![
            Some("+I"),
            Some("-U"),
            Some("+U"),
            Some("-D"),
            None,
            Some("?"),
        ]);
        let k = KindColumn::new(&RowKinds::Cdc("OP".into()), &b).unwrap();
        let got: Vec<String> = (0..6)
            .map(|i| match k.kind(i) {
                Ok(kind) => format!("{kind:?}"),
                Err(e) => e.to_string(),
            })
            .collect();
        assert_eq!(
            &got[..4],
            ["Insert", "UpdateBefore", "UpdateAfter", "Delete"]
        );
        assert!(got[4].contains("`op` is null"), "{}", got[4]);
        assert!(got[5].contains("unknown row kind"), "{}", got[5]);
        let k = KindColumn::new(&RowKinds::Inserts, &b).unwrap();
        assert_eq!(k.kind(1).unwrap(), RowKind::Insert);
        let e = KindColumn::new(&RowKinds::Cdc("kind".into()), &b)
            .err()
            .unwrap();
        assert!(e.to_string().contains("row-kind-field"), "{e}");
    }

    #[test]
    fn bad_rows_carry_the_row_and_its_key() {
        let b = batch(vec![Some("+I"), Some("-U")]);
        let r = bad_row(&b, 1, 41, "why".into());
        assert_eq!(r.line, 42);
        assert_eq!(r.key, "a/b.json");
        assert_eq!(r.bucket, "");
        assert_eq!(r.raw, r#"{"id":2,"op":"-U","key":"a/b.json"}"#);
    }
}
