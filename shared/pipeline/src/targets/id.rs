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

/// The id of a MaxCompute table target:
/// `maxcompute:<project>[.<schema>].<table>[/<partition as the tunnel writes it, ds=1,hh=2>]`.
pub fn maxcompute_target(
    table: &floe_maxcompute::TableId,
    partition: Option<&floe_maxcompute::PartitionSpec>,
) -> String {
    match partition {
        Some(p) => format!("maxcompute:{table}/{}", p.to_tunnel()),
        None => format!("maxcompute:{table}"),
    }
}

/// Whether a target id is a MaxCompute table.
pub fn is_maxcompute(target: &str) -> bool {
    target.starts_with("maxcompute:")
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
        let t = floe_maxcompute::TableId::new("p", "t");
        let ds: floe_maxcompute::PartitionSpec = "ds='1',hh=2".parse().unwrap();
        assert_eq!(maxcompute_target(&t, Some(&ds)), "maxcompute:p.t/ds=1,hh=2");
        assert!(is_maxcompute(&maxcompute_target(&t, None)));
    }
}
