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
//! takes the columns it has by name (cast to its types); columns it lacks are left out, and a
//! required column the records lack fails the object.
//!
//! Kafka Connect's `iceberg.tables` naming several tables (with no `[[routes]]`) is the same
//! fan-out without a field: every record goes to each table.
//!
//! Each table gets its own writer in the batch (a slot), so its files are staged for its own
//! target and committed exactly once like any other table's. Such routes append: the
//! configuration refuses them with replaced or upserted rows.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow_array::{Array, RecordBatch, StringArray, UInt32Array, new_null_array};
use arrow_schema::{DataType, SchemaRef};
use floe_core::{Error, ObjectChange, Result};
use floe_iceberg::{TableWriter, parse_ident};

use super::read::{RowSink, unreadable};
use super::write::Slot;
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
        })
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
        self.slots
            .get_mut(&key)
            .ok_or_else(|| Error::unexpected(format!("slot {key} vanished")))
    }

    async fn write_batch(&mut self, batch: RecordBatch) -> Result<()> {
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
        let whole = groups.len() == 1;
        for (table, rows) in groups {
            let part = if whole {
                batch.clone()
            } else {
                arrow_select::take::take_record_batch(&batch, &UInt32Array::from(rows))
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
