//! `save_mode_create_template`: the DDL a sink runs to create its table, with placeholders
//! filled from the upstream schema.
//!
//! | placeholder | value |
//! |---|---|
//! | `${database}` | the upstream database (namespace) name |
//! | `${table_name}` | the upstream table name |
//! | `${table}` | the target table name |
//! | `${rowtype_fields}` | every upstream field as a column definition (`` `name` type [NOT NULL] [COMMENT '…'] ``), one per line |
//! | `${rowtype_primary_key}` | the primary key columns, `` `a`,`b` `` |
//! | `${rowtype_unique_key}` | the unique key columns, `` `a`,`b` `` |
//! | `${comment}` | the upstream table comment (quotes escaped) |
//!
//! A field named in the template's column list takes that field out of `${rowtype_fields}`: a
//! bare name (`id,` on its own line) is filled with its type from the upstream schema; a full
//! definition (`id BIGINT NOT NULL COMMENT 'key',`) is kept as written. Partition columns are
//! never data columns: when a partition spec is set they are left out of `${rowtype_fields}`,
//! and a template without `PARTITIONED BY` gets `` PARTITIONED BY (`ds` STRING, …) `` after its
//! column list (and its `COMMENT`).

use floe_core::{Error, Result};
use floe_decode::TableSchema as IcebergSchema;

use crate::partition::PartitionSpec;
use crate::sql::{column_definition, quote_ident};
use crate::types::maxcompute_columns;

/// The default template (SeaTunnel's).
pub const DEFAULT_CREATE_TEMPLATE: &str =
    "CREATE TABLE IF NOT EXISTS `${table}` (\n${rowtype_fields}\n) COMMENT '${comment}';";

const PLACEHOLDERS: [&str; 7] = [
    "database",
    "table_name",
    "table",
    "rowtype_fields",
    "rowtype_primary_key",
    "rowtype_unique_key",
    "comment",
];

/// What the template is filled from: the upstream table.
#[derive(Clone, Debug, Default)]
pub struct UpstreamTable {
    /// Database (namespace) name.
    pub database: String,
    /// Table name.
    pub table_name: String,
    /// Fields, and the primary key as `identifier_fields`.
    pub schema: IcebergSchema,
    /// Unique key columns.
    pub unique_keys: Vec<String>,
    /// Table comment.
    pub comment: String,
}

/// Check that `template` uses only known placeholders (an error names the option).
pub fn check_template(template: &str) -> Result<()> {
    for name in placeholders(template) {
        if !PLACEHOLDERS.contains(&name.as_str()) {
            return Err(Error::config(
                "save_mode_create_template",
                format!(
                    "unknown placeholder `${{{name}}}` (known: {})",
                    PLACEHOLDERS.map(|p| format!("${{{p}}}")).join(", ")
                ),
            ));
        }
    }
    Ok(())
}

fn placeholders(template: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) => {
                out.push(after[..end].to_owned());
                rest = &after[end + 1..];
            }
            None => break,
        }
    }
    out
}

/// Render the DDL creating `table` from `template` and `upstream`; see the module doc.
pub fn render_create_table(
    template: &str,
    table: &str,
    upstream: &UpstreamTable,
    partition: Option<&PartitionSpec>,
) -> Result<String> {
    check_template(template)?;
    let partition_keys: Vec<&str> = partition
        .map(|p| p.parts().iter().map(|(k, _)| k.as_str()).collect())
        .unwrap_or_default();
    let columns = maxcompute_columns(&upstream.schema, &partition_keys)?;
    let doc_of = |name: &str| {
        upstream
            .schema
            .fields
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))
            .and_then(|f| f.doc.clone())
    };
    let definition = |name: &str| {
        columns
            .columns()
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(name))
            .map(|c| column_definition(c, doc_of(&c.name).as_deref()))
    };

    // Custom fields in the column list.
    let mut text = template.to_owned();
    let mut custom: Vec<String> = Vec::new();
    if let Some((open, close)) = column_list(&text) {
        let inner = text[open + 1..close].to_owned();
        let mut rebuilt = String::new();
        for (i, item) in split_top_level(&inner).into_iter().enumerate() {
            if i > 0 {
                rebuilt.push(',');
            }
            let trimmed = item.trim();
            let first = trimmed
                .split(|c: char| c.is_whitespace())
                .next()
                .unwrap_or("")
                .trim_matches('`');
            if !trimmed.contains("${") && definition(first).is_some() {
                custom.push(first.to_ascii_lowercase());
                if trimmed.trim_matches('`') == first {
                    let lead = &item[..item.len() - item.trim_start().len()];
                    let tail = &item[item.trim_end().len()..];
                    rebuilt.push_str(lead);
                    rebuilt.push_str(&definition(first).unwrap_or_default());
                    rebuilt.push_str(tail);
                    continue;
                }
            }
            rebuilt.push_str(item);
        }
        text.replace_range(open + 1..close, &rebuilt);
    }

    let fields: Vec<String> = columns
        .columns()
        .iter()
        .filter(|c| !custom.contains(&c.name.to_ascii_lowercase()))
        .filter_map(|c| definition(&c.name))
        .collect();
    if fields.is_empty() {
        // Nothing left for the placeholder: drop it and the comma before it.
        if let Some(at) = text.find("${rowtype_fields}") {
            let before = text[..at].trim_end();
            let cut = before.strip_suffix(',').map_or(at, str::len);
            text.replace_range(cut..at + "${rowtype_fields}".len(), "");
        }
    }
    let keys = |names: &[String]| {
        names
            .iter()
            .map(|n| quote_ident(n))
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut out = text
        .replace("${rowtype_fields}", &fields.join(",\n"))
        .replace(
            "${rowtype_primary_key}",
            &keys(&upstream.schema.identifier_fields),
        )
        .replace("${rowtype_unique_key}", &keys(&upstream.unique_keys))
        .replace(
            "${comment}",
            &upstream.comment.replace('\\', "\\\\").replace('\'', "\\'"),
        )
        .replace("${database}", &upstream.database)
        .replace("${table_name}", &upstream.table_name)
        .replace("${table}", table);

    if !partition_keys.is_empty() && !out.to_ascii_uppercase().contains("PARTITIONED BY") {
        let clause = format!(
            " PARTITIONED BY ({})",
            partition_keys
                .iter()
                .map(|k| format!("{} STRING", quote_ident(k)))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let at = match column_list(&out) {
            Some((_, close)) => after_comment(&out, close + 1),
            None => out.trim_end().trim_end_matches(';').len(),
        };
        out.insert_str(at, &clause);
    }
    Ok(out)
}

/// The byte positions of the first top-level `(` and its matching `)`, outside quotes.
fn column_list(text: &str) -> Option<(usize, usize)> {
    let mut depth = 0usize;
    let mut open = None;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' | '`' => quote = Some(c),
            '(' => {
                if depth == 0 && open.is_none() {
                    open = Some(i);
                }
                depth += 1;
            }
            ')' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return open.map(|o| (o, i));
                }
            }
            _ => {}
        }
    }
    None
}

/// Split on commas outside parentheses, angle brackets and quotes.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if let Some(q) = quote {
            if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' | '`' => quote = Some(c),
            '(' | '<' => depth += 1,
            ')' | '>' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// The position after an optional `COMMENT '…'` starting at `from`.
fn after_comment(text: &str, from: usize) -> usize {
    let rest = &text[from..];
    let skipped = rest.len() - rest.trim_start().len();
    let body = rest.trim_start();
    if !body.to_ascii_uppercase().starts_with("COMMENT") {
        return from;
    }
    let after_kw = &body["COMMENT".len()..];
    let ws = after_kw.len() - after_kw.trim_start().len();
    let lit = after_kw.trim_start();
    if !lit.starts_with('\'') {
        return from;
    }
    let mut escaped = false;
    for (i, c) in lit.char_indices().skip(1) {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '\'' {
            return from + skipped + "COMMENT".len() + ws + i + 1;
        }
    }
    from
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_decode::{Field, IcebergType};

    fn upstream() -> UpstreamTable {
        let mut schema = IcebergSchema::new(vec![
            Field::required("id", IcebergType::Long),
            Field {
                doc: Some("who".into()),
                ..Field::optional("name", IcebergType::String)
            },
            Field::optional(
                "amount",
                IcebergType::Decimal {
                    precision: 10,
                    scale: 2,
                },
            ),
            Field::optional("ds", IcebergType::String),
        ]);
        schema.identifier_fields = vec!["id".into()];
        UpstreamTable {
            database: "shop".into(),
            table_name: "orders".into(),
            schema,
            unique_keys: vec!["name".into()],
            comment: "it's orders".into(),
        }
    }

    #[test]
    fn default_template_lists_every_field() {
        let sql =
            render_create_table(DEFAULT_CREATE_TEMPLATE, "orders_sink", &upstream(), None).unwrap();
        assert_eq!(
            sql,
            "CREATE TABLE IF NOT EXISTS `orders_sink` (\n\
             `id` bigint NOT NULL,\n\
             `name` string COMMENT 'who',\n\
             `amount` decimal(10,2),\n\
             `ds` string\n\
             ) COMMENT 'it\\'s orders';"
        );
    }

    #[test]
    fn custom_fields_take_their_type_or_keep_their_definition() {
        let template = "CREATE TABLE IF NOT EXISTS `${table}`\n(\n    id,\n    amount DECIMAL(20,4) COMMENT 'x,y',\n    ${rowtype_fields},\n    PRIMARY KEY (${rowtype_primary_key})\n) COMMENT '${database}.${table_name}' TBLPROPERTIES (\"transactional\"=\"true\");";
        let ds: PartitionSpec = "ds='20250115'".parse().unwrap();
        let sql = render_create_table(template, "t", &upstream(), Some(&ds)).unwrap();
        assert_eq!(
            sql,
            "CREATE TABLE IF NOT EXISTS `t`\n(\n    `id` bigint NOT NULL,\n    amount DECIMAL(20,4) COMMENT 'x,y',\n    \
             `name` string COMMENT 'who',\n    PRIMARY KEY (`id`)\n) COMMENT 'shop.orders' PARTITIONED BY (`ds` STRING) \
             TBLPROPERTIES (\"transactional\"=\"true\");"
        );
    }

    #[test]
    fn all_fields_custom_leaves_no_dangling_comma_and_unknown_placeholders_fail() {
        let mut up = upstream();
        up.schema.fields.truncate(1);
        let sql = render_create_table(
            "CREATE TABLE `${table}` (\n  id,\n  ${rowtype_fields}\n);",
            "t",
            &up,
            None,
        )
        .unwrap();
        assert_eq!(sql, "CREATE TABLE `t` (\n  `id` bigint NOT NULL\n);");
        let e = check_template("CREATE TABLE ${tabel} (${rowtype_fields})").unwrap_err();
        assert!(e.to_string().contains("`${tabel}`"), "{e}");
        assert!(e.to_string().contains("save_mode_create_template"), "{e}");
    }
}
