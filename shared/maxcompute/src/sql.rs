//! The SQL statements the save modes issue, as plain strings.
//!
//! Names are written as pyodps writes them (`` project.`table` ``); partition specs as
//! `` PARTITION (`ds`='20250115') ``; string literals escape `\` and `'`.

use floe_tunnel_codec::Column;

use crate::meta::TableId;
use crate::partition::PartitionSpec;

/// A name in backquotes (a backquote inside is doubled).
pub fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// A string literal in single quotes.
pub fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// One column definition: `` `name` type [NOT NULL] [COMMENT '…'] ``.
pub fn column_definition(column: &Column, comment: Option<&str>) -> String {
    let mut s = format!("{} {}", quote_ident(&column.name), column.data_type);
    if !column.nullable {
        s.push_str(" NOT NULL");
    }
    if let Some(c) = comment.filter(|c| !c.is_empty()) {
        s.push_str(" COMMENT ");
        s.push_str(&quote_literal(c));
    }
    s
}

/// `DROP TABLE [IF EXISTS] …;`
pub fn drop_table(table: &TableId, if_exists: bool) -> String {
    format!(
        "DROP TABLE {}{};",
        if if_exists { "IF EXISTS " } else { "" },
        table.sql_name()
    )
}

/// `TRUNCATE TABLE … [PARTITION (…)];`
pub fn truncate(table: &TableId, partition: Option<&PartitionSpec>) -> String {
    match partition {
        Some(p) => format!(
            "TRUNCATE TABLE {} PARTITION ({});",
            table.sql_name(),
            p.to_sql()
        ),
        None => format!("TRUNCATE TABLE {};", table.sql_name()),
    }
}

/// `ALTER TABLE … ADD [IF NOT EXISTS] PARTITION (…);`
pub fn add_partition(table: &TableId, partition: &PartitionSpec, if_not_exists: bool) -> String {
    format!(
        "ALTER TABLE {} ADD {}PARTITION ({});",
        table.sql_name(),
        if if_not_exists { "IF NOT EXISTS " } else { "" },
        partition.to_sql()
    )
}

/// `ALTER TABLE … DROP [IF EXISTS] PARTITION (…);`
pub fn drop_partition(table: &TableId, partition: &PartitionSpec, if_exists: bool) -> String {
    format!(
        "ALTER TABLE {} DROP {}PARTITION ({});",
        table.sql_name(),
        if if_exists { "IF EXISTS " } else { "" },
        partition.to_sql()
    )
}

/// `SELECT COUNT(*) FROM … [WHERE <partition>];`
pub fn count_rows(table: &TableId, partition: Option<&PartitionSpec>) -> String {
    match partition {
        Some(p) => format!(
            "SELECT COUNT(*) FROM {} WHERE {};",
            table.sql_name(),
            p.to_sql_condition()
        ),
        None => format!("SELECT COUNT(*) FROM {};", table.sql_name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_tunnel_codec::DataType;

    #[test]
    fn statements_read_as_expected() {
        let t = TableId::new("p", "events");
        let ds: PartitionSpec = "ds='20250115'".parse().unwrap();
        assert_eq!(drop_table(&t, true), "DROP TABLE IF EXISTS p.`events`;");
        assert_eq!(
            truncate(&t, Some(&ds)),
            "TRUNCATE TABLE p.`events` PARTITION (`ds`='20250115');"
        );
        assert_eq!(
            add_partition(&t, &ds, true),
            "ALTER TABLE p.`events` ADD IF NOT EXISTS PARTITION (`ds`='20250115');"
        );
        assert_eq!(
            drop_partition(&t, &ds, false),
            "ALTER TABLE p.`events` DROP PARTITION (`ds`='20250115');"
        );
        assert_eq!(
            count_rows(&t, Some(&ds)),
            "SELECT COUNT(*) FROM p.`events` WHERE `ds`='20250115';"
        );
        let c = Column::new("na`me", DataType::decimal(10, 2).unwrap()).not_null();
        assert_eq!(
            column_definition(&c, Some("it's")),
            "`na``me` decimal(10,2) NOT NULL COMMENT 'it\\'s'"
        );
    }
}
