//! Target ids: the name under which a table's staged files and commits are kept.

/// The id of an Iceberg table target: `iceberg:<catalog>:<namespace.table>`.
pub fn iceberg_target(catalog: &str, table: &str) -> String {
    format!("iceberg:{catalog}:{table}")
}

/// The table of an Iceberg target id, if it is one.
pub fn iceberg_table(target: &str) -> Option<&str> {
    let rest = target.strip_prefix("iceberg:")?;
    rest.split_once(':').map(|(_, t)| t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let t = iceberg_target("floe", "demo.events");
        assert_eq!(t, "iceberg:floe:demo.events");
        assert_eq!(iceberg_table(&t), Some("demo.events"));
        assert_eq!(iceberg_table("maxcompute:p.t"), None);
    }
}
