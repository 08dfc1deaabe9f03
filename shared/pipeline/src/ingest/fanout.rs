//! Records that choose their table: a route with `route-field` (Kafka Connect's
//! `iceberg.tables.dynamic-enabled` with `iceberg.tables.route-field`).
//!
//! The object is decoded to the schema of the route's own table (`table`, created as any
//! route's), and each decoded batch is split by the field's value:
//!
//! | the field's value | the record goes to |
//! |---|---|
//! | `ns.name` | that table |
//! | `name` (no dot) | `name` in the namespace of the route's table |
//! | null, empty, or no such column | the route's table |
//!
//! Values are lowercased, as Kafka Connect does. A table that does not exist is created with
//! the route's definition (schema, partitioning, properties), unless the route does not create
//! tables; then the object waits, as for any route. A table that exists with other columns
//! takes the columns it has by name (cast to its types); columns it lacks are left out (with
//! schema evolution on, each table the object's records reach first adds them, or widens its
//! own, as the route's own table does), and a required column the records lack fails the
//! object.
//!
//! Kafka Connect's `iceberg.tables` naming several tables (with no `[[routes]]`) is the same
//! fan-out without a field: every record goes to each table.
//!
//! Static routing (`route-regex.<table>` with `route-field`; Kafka Connect's
//! `iceberg.tables.route-field` with `iceberg.table.<table>.route-regex`): a record goes to
//! every table whose regex matches the whole of its field's value (as text; null matches
//! nothing). A record matching none goes to the route's table when that table has no regex
//! of its own; otherwise it is handed back to the reader as a bad record naming the value,
//! and the route's `on-error` decides (dead-lettered by default: Kafka Connect drops such
//! records silently, floe does not).
//!
//! Each table gets its own writer in the batch (a slot), so its files are staged for its own
//! target and committed exactly once like any other table's. Such routes append: the
//! configuration refuses them with replaced or upserted rows.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow_array::{Array, RecordBatch, StringArray, UInt32Array, new_null_array};
use arrow_schema::{DataType, SchemaRef};
use floe_core::{Error, ObjectChange, Result};
use floe_decode::decode::BadRecord;
use floe_iceberg::{TableWriter, parse_ident};

use super::read::{RowSink, unreadable};
use super::write::Slot;
use crate::config::RouteRegex;
use crate::pipeline::Pipeline;

/// The sink of a route with `route-field`; see the module doc.
pub(super) struct Fanout<'a> {
    pipeline: &'a Pipeline,
    slots: &'a mut HashMap<String, Slot>,
    /// The slot key of the route's own table.
    fallback_key: String,
    /// The route's own table, `namespace.table`.
    fallback: String,
    store: &'a Arc<dyn floe_storage::ObjectStore>,
    change: &'a ObjectChange,
    route: usize,
    batch: &'a str,
    /// The schema rows are decoded to (the route's own table's).
    schema: SchemaRef,
    /// The route field's column in it, if it has one.
    field: Option<usize>,
    /// Every table that takes every record (the route's own first), when the route names
    /// several tables; empty otherwise.
    every: Vec<String>,
    /// Static routing: each table with its regex (empty: the field names the table).
    regexes: Vec<(String, RouteRegex)>,
    /// Whether a record matching no regex goes to the route's table (it has no regex).
    unmatched_to_fallback: bool,
    /// Records matching no table, for the reader (see [`RowSink::rejected`]).
    rejected: Vec<BadRecord>,
    /// Decoded rows of the object seen so far (a rejected record's row number counts them).
    seen: u64,
    /// With schema evolution, the fields the object brings: each table the records reach
    /// takes the ones it lacks (or widens) before it takes rows of this object.
    evolve: Option<Vec<floe_decode::Field>>,
    /// The slots evolved for this object already.
    evolved: std::collections::BTreeSet<String>,
}

impl<'a> Fanout<'a> {
    pub(super) fn new(
        pipeline: &'a Pipeline,
        slots: &'a mut HashMap<String, Slot>,
        fallback_key: &str,
        store: &'a Arc<dyn floe_storage::ObjectStore>,
        change: &'a ObjectChange,
        route: usize,
        batch: &'a str,
    ) -> Result<Self> {
        let slot = slots
            .get(fallback_key)
            .ok_or_else(|| Error::unexpected(format!("slot {fallback_key} missing")))?;
        let schema = slot.writer.arrow_schema().clone();
        let fallback = slot.table_name.clone();
        let config = pipeline.router.config(route);
        let every = match config.also_tables.as_slice() {
            [] => Vec::new(),
            also => std::iter::once(fallback.clone())
                .chain(also.iter().cloned())
                .collect(),
        };
        let field = config.route_field.as_ref().and_then(|n| {
            (schema.fields().iter()).position(|f| f.name() == n || f.name().eq_ignore_ascii_case(n))
        });
        let regexes = config.route_regex.clone();
        let unmatched_to_fallback = !regexes.iter().any(|(t, _)| *t == fallback);
        Ok(Fanout {
            pipeline,
            slots,
            fallback_key: fallback_key.to_owned(),
            fallback,
            store,
            change,
            route,
            batch,
            schema,
            field,
            every,
            regexes,
            unmatched_to_fallback,
            rejected: Vec::new(),
            seen: 0,
            evolve: None,
            evolved: std::collections::BTreeSet::from([fallback_key.to_owned()]),
        })
    }

    /// With schema evolution: `fields`, the fields the object brings, which each table its
    /// records reach takes before its rows (the route's own table has taken them already).
    pub(super) fn evolving(mut self, fields: Option<Vec<floe_decode::Field>>) -> Self {
        self.evolve = fields;
        self
    }

    /// The table a field value names (see the module doc).
    fn table_of(&self, value: Option<&str>) -> Result<String> {
        let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
            return Ok(self.fallback.clone());
        };
        let v = v.to_lowercase();
        let name = if v.contains('.') {
            v
        } else {
            let ns = (self.fallback.rsplit_once('.')).map_or("default", |(ns, _)| ns);
            format!("{ns}.{v}")
        };
        parse_ident(&name).map_err(|e| {
            unreadable(Error::invalid_input(format!(
                "a record names table `{name}` in its route field: {e}"
            )))
        })?;
        Ok(name)
    }

    /// The slot of `table`, its table created and its writer opened on first use.
    async fn slot(&mut self, table: &str) -> Result<&mut Slot> {
        let key = if table == self.fallback {
            self.fallback_key.clone()
        } else {
            format!("{table}\u{1f}route{}", self.route)
        };
        if !self.slots.contains_key(&key) {
            let route = self.pipeline.router.config(self.route);
            let t = (self.pipeline)
                .table_for(self.store, self.change, route, table)
                .await?;
            let prefix = format!("{}-{}", self.batch, self.slots.len());
            let writer =
                TableWriter::new(&t, &self.pipeline.writer_options(&prefix, route)).await?;
            let slot = Slot {
                table: t,
                writer,
                table_name: table.to_owned(),
                route: self.route,
                maxcompute: None,
                closed: Vec::new(),
                prefix,
                generation: 0,
                replacing: Vec::new(),
                rows_of: BTreeMap::new(),
            };
            self.slots.insert(key.clone(), slot);
        }
        let slot = (self.slots.get_mut(&key))
            .ok_or_else(|| Error::unexpected(format!("slot {key} vanished")))?;
        if let Some(fields) = &self.evolve
            && self.evolved.insert(key)
        {
            let route = self.pipeline.router.config(self.route);
            (self.pipeline.evolve_to(slot, fields, route).await)
                .map_err(|e| unreadable(e.while_doing(format!("evolving table {table}"))))?;
        }
        Ok(slot)
    }

    async fn write_batch(&mut self, batch: RecordBatch) -> Result<()> {
        let first = self.seen;
        self.seen += batch.num_rows() as u64;
        if !self.regexes.is_empty() {
            return self.write_matching(batch, first).await;
        }
        if !self.every.is_empty() {
            for i in 0..self.every.len() {
                let table = self.every[i].clone();
                let slot = self.slot(&table).await?;
                let part = conform(batch.clone(), slot.writer.arrow_schema())
                    .map_err(|e| e.while_doing(format!("rows for table {table}")))?;
                slot.writer.write(part).await?;
            }
            return Ok(());
        }
        let mut groups: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        match self.field {
            None => {
                groups.insert(self.fallback.clone(), Vec::new());
            }
            Some(i) => {
                let values = arrow_cast::cast(batch.column(i), &DataType::Utf8)
                    .map_err(|e| Error::invalid_input(format!("route field: {e}")))?;
                let values = (values.as_any().downcast_ref::<StringArray>())
                    .ok_or_else(|| Error::unexpected("route field did not cast to text"))?;
                for row in 0..batch.num_rows() {
                    let v = (!values.is_null(row)).then(|| values.value(row));
                    groups
                        .entry(self.table_of(v)?)
                        .or_default()
                        .push(row as u32);
                }
            }
        }
        self.write_groups(&batch, groups).await
    }

    /// Static routing: each row to every table whose regex matches its field's value; `first`
    /// is the number of the object's rows before the batch.
    async fn write_matching(&mut self, batch: RecordBatch, first: u64) -> Result<()> {
        let values = match self.field {
            Some(i) => Some(
                arrow_cast::cast(batch.column(i), &DataType::Utf8)
                    .map_err(|e| Error::invalid_input(format!("route field: {e}")))?,
            ),
            None => None,
        };
        let values = values
            .as_ref()
            .and_then(|v| v.as_any().downcast_ref::<StringArray>());
        let mut groups: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        let mut unmatched = Vec::new();
        for row in 0..batch.num_rows() {
            let value = values.filter(|v| !v.is_null(row)).map(|v| v.value(row));
            let mut matched = false;
            for (table, regex) in &self.regexes {
                if value.is_some_and(|v| regex.matches(v)) {
                    groups.entry(table.clone()).or_default().push(row as u32);
                    matched = true;
                }
            }
            if matched {
                continue;
            }
            if self.unmatched_to_fallback {
                (groups.entry(self.fallback.clone()).or_default()).push(row as u32);
            } else {
                unmatched.push(row);
            }
        }
        for row in unmatched {
            let name = self.pipeline.router.config(self.route).route_field.clone();
            let value = values
                .filter(|v| !v.is_null(row))
                .map(|v| format!("`{}`", v.value(row)))
                .unwrap_or_else(|| "null (or no such field)".into());
            // The record's row among those the object decoded to (its line when every line
            // of the object is a good record).
            self.rejected.push(BadRecord {
                line: Some(first + row as u64 + 1),
                raw: row_json(&batch, row),
                reason: format!(
                    "route field {} is {value}, which matches no table's route-regex ({})",
                    name.unwrap_or_default(),
                    (self.regexes.iter())
                        .map(|(t, r)| format!("{t}: {}", r.text))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        if groups.is_empty() {
            return Ok(());
        }
        self.write_groups(&batch, groups).await
    }

    /// Write the rows of each group (by index in `batch`) to the group's table.
    async fn write_groups(
        &mut self,
        batch: &RecordBatch,
        groups: BTreeMap<String, Vec<u32>>,
    ) -> Result<()> {
        let whole = groups.len() == 1
            && (groups.values().next())
                .is_some_and(|r| r.is_empty() || r.len() == batch.num_rows());
        for (table, rows) in groups {
            let part = if whole {
                batch.clone()
            } else {
                arrow_select::take::take_record_batch(batch, &UInt32Array::from(rows))
                    .map_err(|e| Error::unexpected(format!("splitting rows by table: {e}")))?
            };
            let slot = self.slot(&table).await?;
            let part = conform(part, slot.writer.arrow_schema())
                .map_err(|e| e.while_doing(format!("rows for table {table}")))?;
            slot.writer.write(part).await?;
        }
        Ok(())
    }
}

impl RowSink for Fanout<'_> {
    fn arrow_schema(&self) -> &SchemaRef {
        &self.schema
    }
    fn write(&mut self, batch: RecordBatch) -> impl Future<Output = Result<()>> + Send {
        self.write_batch(batch)
    }
    fn rejected(&mut self) -> Vec<BadRecord> {
        std::mem::take(&mut self.rejected)
    }
}

/// Row `row` of `batch` as a JSON object, for a bad record's text.
fn row_json(batch: &RecordBatch, row: usize) -> String {
    let one = batch.slice(row, 1);
    let mut out = Vec::new();
    let mut writer = arrow_json::LineDelimitedWriter::new(&mut out);
    match writer.write(&one).and_then(|()| writer.finish()) {
        Ok(()) => String::from_utf8_lossy(&out).trim_end().to_owned(),
        Err(e) => format!("(row {row}: {e})"),
    }
}

/// `batch` with `target`'s columns: found by name and cast where the types differ, null where
/// the batch has none (an error for a required column).
fn conform(batch: RecordBatch, target: &SchemaRef) -> Result<RecordBatch> {
    if batch.schema().fields() == target.fields() {
        return RecordBatch::try_new(target.clone(), batch.columns().to_vec())
            .map_err(|e| Error::unexpected(e.to_string()));
    }
    let schema = batch.schema();
    let columns = (target.fields().iter())
        .map(|f| match schema.index_of(f.name()) {
            Ok(i) if batch.column(i).data_type() == f.data_type() => Ok(batch.column(i).clone()),
            Ok(i) => arrow_cast::cast(batch.column(i), f.data_type())
                .map_err(|e| unreadable(Error::invalid_input(format!("column {}: {e}", f.name())))),
            Err(_) if f.is_nullable() => Ok(new_null_array(f.data_type(), batch.num_rows())),
            Err(_) => Err(unreadable(Error::invalid_input(format!(
                "the table's required column {} is not in the records",
                f.name()
            )))),
        })
        .collect::<Result<Vec<_>>>()?;
    RecordBatch::try_new(target.clone(), columns)
        .map_err(|e| unreadable(Error::invalid_input(e.to_string())))
}
