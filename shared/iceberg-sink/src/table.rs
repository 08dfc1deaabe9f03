//! Finding or creating the tables floe writes to.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use floe_core::retry::{Retry, RetryPolicy};
use floe_core::{Error, ErrorKind, Result};
use floe_decode::partition::PartitionField;
use floe_decode::{Names, TableSchema};
use iceberg::spec::{FormatVersion, PrimitiveType, Type};
use iceberg::table::Table;
use iceberg::{Catalog, NamespaceIdent, TableCreation, TableIdent};

use crate::catalog::from_iceberg;
use crate::schema::{to_iceberg_schema, to_iceberg_type, to_partition_spec};

/// Table properties floe sets on tables it creates.
pub fn default_table_properties() -> HashMap<String, String> {
    HashMap::from([
        ("write.format.default".into(), "parquet".into()),
        ("write.parquet.compression-codec".into(), "zstd".into()),
        (
            "created-by".into(),
            format!("floe {}", env!("CARGO_PKG_VERSION")),
        ),
    ])
}

/// Parse `ns.table` or `a.b.table` (the last part is the table).
pub fn parse_ident(name: &str) -> Result<TableIdent> {
    let parts: Vec<&str> = name.split('.').collect();
    if parts.len() < 2 || parts.iter().any(|p| p.trim().is_empty()) {
        return Err(Error::config(
            "table",
            format!("`{name}` is not `namespace.table`"),
        ));
    }
    TableIdent::from_strs(parts).map_err(|e| Error::config("table", e))
}

/// What to create when the table does not exist.
#[derive(Clone, Debug)]
pub struct TableDefinition {
    /// The schema.
    pub schema: TableSchema,
    /// The partition fields.
    pub partition_by: Vec<PartitionField>,
    /// Extra table properties (on top of [`default_table_properties`]).
    pub properties: HashMap<String, String>,
}

/// Load the table, or `None` when it does not exist.
pub async fn load_table(catalog: &dyn Catalog, ident: &TableIdent) -> Result<Option<Table>> {
    match catalog.load_table(ident).await {
        Ok(t) => Ok(Some(t)),
        Err(e)
            if matches!(
                e.kind(),
                iceberg::ErrorKind::TableNotFound | iceberg::ErrorKind::NamespaceNotFound
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(from_iceberg(e).while_doing(format!("failed to load table {ident}"))),
    }
}

/// Load the table, creating its namespace and the table from `definition` if needed. Safe to
/// race: losing a create race loads what the winner made.
pub async fn ensure_table(
    catalog: &dyn Catalog,
    ident: &TableIdent,
    definition: &TableDefinition,
) -> Result<Table> {
    if let Some(t) = load_table(catalog, ident).await? {
        return Ok(t);
    }
    let ns: &NamespaceIdent = ident.namespace();
    match catalog.create_namespace(ns, HashMap::new()).await {
        Ok(_) => {}
        Err(e) if e.kind() == iceberg::ErrorKind::NamespaceAlreadyExists => {}
        Err(e) => {
            return Err(
                from_iceberg(e).while_doing(format!("failed to create namespace {}", ns.join(".")))
            );
        }
    }
    let schema = to_iceberg_schema(&definition.schema)?;
    let spec = to_partition_spec(&definition.partition_by, &schema)?;
    let mut props = default_table_properties();
    props.extend(definition.properties.clone());
    // `format-version` is not a property iceberg keeps but the version to create.
    let format_version = match props.remove("format-version").as_deref().map(str::trim) {
        None | Some("2") => FormatVersion::V2,
        Some("3") => FormatVersion::V3,
        Some(other) => {
            return Err(Error::config(
                "tables.auto-create-props.format-version",
                format!("floe creates format v2 or v3 tables, not `{other}`"),
            ));
        }
    };
    let creation = TableCreation::builder()
        .name(ident.name().to_owned())
        .schema(schema)
        .partition_spec(spec)
        .properties(props)
        .format_version(format_version)
        .build();
    match catalog.create_table(ns, creation).await {
        Ok(t) => {
            tracing::info!(table = %ident, "table created");
            Ok(t)
        }
        Err(e) if e.kind() == iceberg::ErrorKind::TableAlreadyExists => {
            load_table(catalog, ident).await?.ok_or_else(|| {
                Error::new(
                    ErrorKind::Conflict,
                    format!("table {ident} vanished while being created"),
                )
            })
        }
        Err(e) => Err(from_iceberg(e).while_doing(format!("failed to create table {ident}"))),
    }
}

/// The fields of `wanted` the table's current schema lacks (top level, names compared as
/// `names` says).
pub fn missing_fields<'a>(
    table: &Table,
    wanted: &'a [floe_decode::Field],
    names: Names,
) -> Vec<&'a floe_decode::Field> {
    let schema = table.metadata().current_schema();
    wanted
        .iter()
        .filter(|f| {
            !schema
                .as_struct()
                .fields()
                .iter()
                .any(|have| names.same(&have.name, &f.name))
        })
        .collect()
}

/// The field of `fields` named `name` (an exact name first, as `names` says).
fn find<'a>(
    fields: &'a [floe_decode::Field],
    name: &str,
    names: Names,
) -> Option<&'a floe_decode::Field> {
    let at = names.position(fields.iter().map(|f| f.name.as_str()), name)?;
    Some(&fields[at])
}

/// The fields of `wanted` missing inside the table's struct columns, at any depth (through a
/// list's element and a map's value too), each with the path of the struct it belongs in, as
/// iceberg names it (`addr`, `items.element`, `attrs.value.geo`). A struct column the table
/// lacks altogether is [`missing_fields`]'s. Names are compared as `names` says.
pub fn missing_nested_fields<'a>(
    table: &Table,
    wanted: &'a [floe_decode::Field],
    names: Names,
) -> Vec<(String, &'a floe_decode::Field)> {
    let mut out = Vec::new();
    let schema = table.metadata().current_schema();
    for have in schema.as_struct().fields() {
        if let Some(f) = find(wanted, &have.name, names) {
            nested_missing(&have.field_type, &f.ty, &have.name, names, &mut out);
        }
    }
    out
}

fn nested_missing<'a>(
    have: &Type,
    want: &'a floe_decode::IcebergType,
    path: &str,
    names: Names,
    out: &mut Vec<(String, &'a floe_decode::Field)>,
) {
    use floe_decode::IcebergType;
    match (have, want) {
        (Type::Struct(s), IcebergType::Struct(fields)) => {
            for f in fields {
                match (s.fields().iter()).find(|h| names.same(&h.name, &f.name)) {
                    None => out.push((path.to_owned(), f)),
                    Some(h) => {
                        let path = format!("{path}.{}", h.name);
                        nested_missing(&h.field_type, &f.ty, &path, names, out)
                    }
                }
            }
        }
        (Type::List(l), IcebergType::List(e)) => nested_missing(
            &l.element_field.field_type,
            &e.ty,
            &format!("{path}.element"),
            names,
            out,
        ),
        (Type::Map(m), IcebergType::Map { value, .. }) => nested_missing(
            &m.value_field.field_type,
            &value.ty,
            &format!("{path}.value"),
            names,
            out,
        ),
        _ => {}
    }
}

/// A schema commit in flight, borrowing the catalog.
type SchemaCommit<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = iceberg::Result<Table>> + Send + 'a>>;

/// Load the table and let `plan` make its schema change (`None`: nothing left to change, with
/// the names it touches for the log), retrying the whole when another writer changed the table
/// meanwhile. `what` names the change in errors (`add columns to`). Returns the table as it is
/// afterwards.
async fn change_schema<'a>(
    catalog: &'a dyn Catalog,
    ident: &'a TableIdent,
    what: &str,
    mut plan: impl FnMut(&Table) -> Result<Option<(Vec<String>, SchemaCommit<'a>)>>,
) -> Result<Table> {
    let conflict_or_retryable = |e: &Error| e.is_retryable() || e.kind() == ErrorKind::Conflict;
    let mut retry = Retry::new(SCHEMA_RETRY).retry_if(conflict_or_retryable);
    loop {
        let table = load_table(catalog, ident).await?.ok_or_else(|| {
            Error::new(ErrorKind::NotFound, format!("table {ident} does not exist"))
        })?;
        let Some((columns, commit)) = plan(&table)? else {
            return Ok(table);
        };
        match commit.await {
            Ok(t) => {
                tracing::info!(table = %ident, change = what, ?columns, "schema evolved");
                return Ok(t);
            }
            Err(e) => {
                let e = from_iceberg(e);
                if !conflict_or_retryable(&e) {
                    return Err(e.while_doing(format!("failed to {what} {ident}")));
                }
                if let Err(e) = retry.backoff(e).await {
                    return Err(Error::new(
                        ErrorKind::Conflict,
                        format!("gave up trying to {what} {ident}: the table kept changing"),
                    )
                    .with_source(e));
                }
            }
        }
    }
}

/// Add each of `fields` the table lacks as an optional column (schema evolution), retrying when
/// another writer changed the table meanwhile. Returns the table as it is afterwards.
pub async fn add_missing_columns(
    catalog: &dyn Catalog,
    ident: &TableIdent,
    fields: &[floe_decode::Field],
    names: Names,
) -> Result<Table> {
    use iceberg::transaction::{AddColumn, ApplyTransactionAction, Transaction};
    change_schema(catalog, ident, "add columns to", |table| {
        let missing = missing_fields(table, fields, names);
        let nested = missing_nested_fields(table, fields, names);
        if missing.is_empty() && nested.is_empty() {
            return Ok(None);
        }
        let tx = Transaction::new(table);
        let mut action = tx.update_schema();
        // An optional column (`parent`: the struct it goes in, `None`: the table).
        let column = |parent: Option<&String>, f: &floe_decode::Field| {
            let b = AddColumn::builder();
            let (name, ty) = (f.name.clone(), to_iceberg_type(&f.ty));
            match (parent, &f.doc) {
                (None, None) => b.name(name).field_type(ty).build(),
                (None, Some(d)) => b.name(name).field_type(ty).doc(d.clone()).build(),
                (Some(p), None) => b.parent(p.clone()).name(name).field_type(ty).build(),
                (Some(p), Some(d)) => (b.parent(p.clone()).name(name).field_type(ty))
                    .doc(d.clone())
                    .build(),
            }
        };
        for f in &missing {
            action = action.add_column(column(None, f));
        }
        for (parent, f) in &nested {
            action = action.add_column(column(Some(parent), f));
        }
        let tx = action.apply(tx).map_err(from_iceberg)?;
        let names = (missing.iter().map(|f| f.name.clone()))
            .chain(nested.iter().map(|(p, f)| format!("{p}.{}", f.name)))
            .collect();
        Ok(Some((
            names,
            Box::pin(tx.commit(catalog)) as SchemaCommit<'_>,
        )))
    })
    .await
}

/// The table's top-level columns that `fields` (same names, compared as `names` says)
/// widen as the Iceberg spec allows a type to be promoted: `int` → `long`, `float` → `double`,
/// `decimal(P,S)` → `decimal(P',S)` with P' > P; at the top level or anywhere inside the
/// column (a struct's fields, a list's element, a map's value). Each with the column's type
/// after the change (field ids kept) and the paths of the fields widened, for the log.
pub fn widened_fields(
    table: &Table,
    fields: &[floe_decode::Field],
    names: Names,
) -> Vec<(String, Type)> {
    widened_columns(table, fields, names)
        .into_iter()
        .map(|(name, ty, _)| (name, ty))
        .collect()
}

/// [`widened_fields`], with the paths of the fields widened in each column.
fn widened_columns(
    table: &Table,
    fields: &[floe_decode::Field],
    names: Names,
) -> Vec<(String, Type, Vec<String>)> {
    let schema = table.metadata().current_schema();
    let mut out = Vec::new();
    for have in schema.as_struct().fields() {
        let Some(f) = find(fields, &have.name, names) else {
            continue;
        };
        let mut paths = Vec::new();
        if let Some(t) = widened(&have.field_type, &f.ty, &have.name, names, &mut paths) {
            out.push((have.name.clone(), t, paths));
        }
    }
    out
}

/// `have` with what `want` widens in it (see [`widened_fields`]); `None` when nothing is.
/// Adds the path of each field widened to `paths`.
fn widened(
    have: &Type,
    want: &floe_decode::IcebergType,
    path: &str,
    names: Names,
    paths: &mut Vec<String>,
) -> Option<Type> {
    use floe_decode::IcebergType;
    use iceberg::spec::{ListType, MapType, NestedField, StructType};
    match (have, want) {
        (Type::Primitive(old), _) => {
            let Type::Primitive(new) = to_iceberg_type(want) else {
                return None;
            };
            let wider = match (old, &new) {
                (PrimitiveType::Int, PrimitiveType::Long)
                | (PrimitiveType::Float, PrimitiveType::Double) => true,
                (
                    PrimitiveType::Decimal {
                        precision: p,
                        scale: s,
                    },
                    PrimitiveType::Decimal {
                        precision: q,
                        scale: t,
                    },
                ) => s == t && q > p,
                _ => false,
            };
            wider.then(|| {
                paths.push(path.to_owned());
                Type::Primitive(new)
            })
        }
        (Type::Struct(s), IcebergType::Struct(wanted)) => {
            let mut changed = false;
            let fields: Vec<Arc<NestedField>> = (s.fields().iter())
                .map(|h| {
                    let inner = find(wanted, &h.name, names).and_then(|f| {
                        let path = format!("{path}.{}", h.name);
                        widened(&h.field_type, &f.ty, &path, names, paths)
                    });
                    match inner {
                        Some(t) => {
                            changed = true;
                            Arc::new(NestedField {
                                field_type: Box::new(t),
                                ..h.as_ref().clone()
                            })
                        }
                        None => Arc::clone(h),
                    }
                })
                .collect();
            changed.then(|| Type::Struct(StructType::new(fields)))
        }
        (Type::List(l), IcebergType::List(e)) => {
            let t = widened(
                &l.element_field.field_type,
                &e.ty,
                &format!("{path}.element"),
                names,
                paths,
            )?;
            Some(Type::List(ListType {
                element_field: Arc::new(NestedField {
                    field_type: Box::new(t),
                    ..l.element_field.as_ref().clone()
                }),
            }))
        }
        (Type::Map(m), IcebergType::Map { value, .. }) => {
            let t = widened(
                &m.value_field.field_type,
                &value.ty,
                &format!("{path}.value"),
                names,
                paths,
            )?;
            Some(Type::Map(MapType {
                key_field: Arc::clone(&m.key_field),
                value_field: Arc::new(NestedField {
                    field_type: Box::new(t),
                    ..m.value_field.as_ref().clone()
                }),
            }))
        }
        _ => None,
    }
}

/// Schema evolution: add the columns `fields` bring that the table lacks
/// ([`add_missing_columns`]), then widen the columns they widen ([`widened_fields`]) in one new
/// schema, committed on the condition that the current schema is still the one it was made
/// from (retried when another writer changed it). Returns the table as it is afterwards.
pub async fn evolve_columns(
    catalog: &dyn crate::FloeCatalog,
    ident: &TableIdent,
    fields: &[floe_decode::Field],
    names: Names,
) -> Result<Table> {
    use iceberg::spec::{NestedField, Schema};
    use iceberg::{TableRequirement, TableUpdate};
    add_missing_columns(catalog, ident, fields, names).await?;
    change_schema(catalog, ident, "widen columns of", |table| {
        let widened = widened_columns(table, fields, names);
        if widened.is_empty() {
            return Ok(None);
        }
        let current = table.metadata().current_schema();
        let columns = current.as_struct().fields().iter().map(|f| {
            match widened.iter().find(|(name, _, _)| *name == f.name) {
                Some((_, t, _)) => Arc::new(NestedField {
                    field_type: Box::new(t.clone()),
                    ..f.as_ref().clone()
                }),
                None => Arc::clone(f),
            }
        });
        let next_id = (table.metadata().schemas_iter())
            .map(|s| s.schema_id())
            .max()
            .unwrap_or(0)
            + 1;
        let schema = Schema::builder()
            .with_schema_id(next_id)
            .with_fields(columns)
            .with_identifier_field_ids(current.identifier_field_ids())
            .build()
            .map_err(from_iceberg)?;
        let requirements = vec![TableRequirement::CurrentSchemaIdMatch {
            current_schema_id: current.schema_id(),
        }];
        let updates = vec![
            TableUpdate::AddSchema { schema },
            TableUpdate::SetCurrentSchema { schema_id: -1 },
        ];
        let names = (widened.iter())
            .flat_map(|(_, _, paths)| paths.iter().cloned())
            .collect();
        let commit = catalog.commit_updates(ident, requirements, updates);
        Ok(Some((names, Box::pin(commit) as SchemaCommit<'_>)))
    })
    .await
}

/// Schema evolution retries: 10 attempts, waiting 50 ms doubling to 400 ms between them.
const SCHEMA_RETRY: RetryPolicy =
    RetryPolicy::new(Duration::from_millis(50), Duration::from_millis(400)).with_max_attempts(10);

/// Every table of every namespace.
pub async fn all_tables(catalog: &dyn iceberg::Catalog) -> Result<Vec<TableIdent>> {
    let mut out = Vec::new();
    let mut stack: Vec<Option<iceberg::NamespaceIdent>> = vec![None];
    while let Some(parent) = stack.pop() {
        let namespaces = catalog
            .list_namespaces(parent.as_ref())
            .await
            .map_err(crate::catalog::from_iceberg)?;
        for ns in namespaces {
            out.extend(
                catalog
                    .list_tables(&ns)
                    .await
                    .map_err(crate::catalog::from_iceberg)?,
            );
            stack.push(Some(ns));
        }
    }
    out.sort_by_key(|t| t.to_string());
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_decode::{Field, IcebergType};

    fn st(fields: Vec<Field>) -> IcebergType {
        IcebergType::Struct(fields)
    }

    #[test]
    fn nested_fields_missing_in_structs_list_elements_and_map_values_are_found() {
        let s = IcebergType::String;
        let have = |extra: Vec<Field>| {
            let mut city = vec![Field::optional("city", s.clone())];
            city.extend(extra);
            st(vec![
                Field::optional("addr", st(city)),
                Field::optional(
                    "items",
                    IcebergType::List(Box::new(Field::optional(
                        "element",
                        st(vec![Field::optional("sku", s.clone())]),
                    ))),
                ),
                Field::optional(
                    "attrs",
                    IcebergType::Map {
                        key: Box::new(Field::required("key", s.clone())),
                        value: Box::new(Field::optional(
                            "value",
                            st(vec![Field::optional("v", IcebergType::Long)]),
                        )),
                    },
                ),
            ])
        };
        let table = to_iceberg_type(&have(vec![]));
        let IcebergType::Struct(mut want) = have(vec![Field::optional("ZIP", s.clone())]) else {
            unreachable!()
        };
        // items' element struct gains qty, attrs' value struct gains note.
        if let IcebergType::List(e) = &mut want[1].ty
            && let IcebergType::Struct(f) = &mut e.ty
        {
            f.push(Field::optional("qty", IcebergType::Long));
        }
        if let IcebergType::Map { value, .. } = &mut want[2].ty
            && let IcebergType::Struct(f) = &mut value.ty
        {
            f.push(Field::optional("note", s.clone()));
            f.push(Field::optional("V", IcebergType::Long));
        }
        let Type::Struct(table) = table else {
            unreachable!()
        };
        let found = |names: Names| {
            let mut out = Vec::new();
            for have in table.fields() {
                let f = want.iter().find(|f| f.name == have.name).unwrap();
                nested_missing(&have.field_type, &f.ty, &have.name, names, &mut out);
            }
            (out.iter())
                .map(|(p, f)| (p.clone(), f.name.clone()))
                .collect::<Vec<_>>()
        };
        let field = |p: &str, n: &str| (p.to_owned(), n.to_owned());
        assert_eq!(
            found(Names::CaseInsensitive),
            vec![
                field("addr", "ZIP"),
                field("items.element", "qty"),
                field("attrs.value", "note"),
            ]
        );
        // Matched byte for byte, `V` is not the field `v`.
        assert_eq!(
            found(Names::Exact),
            vec![
                field("addr", "ZIP"),
                field("items.element", "qty"),
                field("attrs.value", "note"),
                field("attrs.value", "V"),
            ]
        );
    }
}
