//! `[maxcompute]` (the SeaTunnel MaxCompute sink's options, names and defaults) and a route's
//! `targets`.
//!
//! ```toml
//! [maxcompute]
//! endpoint = "https://service.cn-hangzhou.maxcompute.aliyun.com/api"
//! project = "my_project"
//! table_name = "${table_name}_sink"       # placeholders as in a route's `table`
//! # accessId / accesskey / sts_token: leave them out to use ALIBABA_CLOUD_ACCESS_KEY_ID,
//! # ALIBABA_CLOUD_ACCESS_KEY_SECRET and ALIBABA_CLOUD_SECURITY_TOKEN (FC sets them), or
//! # take them from the environment here: accesskey = "${env:MC_ACCESS_KEY}"
//!
//! [[routes]]
//! prefix = "orders/"
//! table = "lake.orders"
//! targets = ["iceberg", "maxcompute"]     # default ["iceberg"]
//! maxcompute.table_name = "orders"        # this route's table (default: [maxcompute] table_name)
//! maxcompute.partition_spec = "ds='20250115'"
//! maxcompute.row-kind-field = "op"        # a field holding +I / -U / +U / -D per record
//! ```
//!
//! | option | default | meaning |
//! |---|---|---|
//! | `endpoint` | required | REST endpoint, `http(s)://…/api` |
//! | `project` | required | the project |
//! | `table_name` | required | the table; `${bucket}`, `${prefix}`, `${table_name}`, `${dir}` filled per object as in a route's `table` |
//! | `accessId`, `accesskey`, `sts_token` | the environment | credentials; `sts_token` needs the other two |
//! | `schema_name` | none | schema between project and table |
//! | `partition_spec` | none | the partition written, `ds='20250115'` |
//! | `overwrite` | false | the first commit into the table (partition) replaces its rows; later commits append. SeaTunnel overwrites once per job; floe's job is its checkpoint table, so a new checkpoint overwrites again |
//! | `schema_save_mode` | `CREATE_SCHEMA_WHEN_NOT_EXIST` | run once per table (and partition), before its first commit |
//! | `data_save_mode` | `APPEND_DATA` | idem; `DROP_DATA` therefore never removes rows floe landed |
//! | `custom_sql` | none | run for `data_save_mode = CUSTOM_PROCESSING` |
//! | `save_mode_create_template` | SeaTunnel's | DDL creating the table from the route's schema |
//! | `datetime_format` | `yyyy-MM-dd HH:mm:ss` | timestamps written into text columns |
//! | `tunnel_endpoint` | asked of the service | tunnel URL |
//! | `tunnel_name` | none | tunnel quota |
//! | `insert_strategy` | `upload` | `upsert` sends every row through an upsert session (primary key needed) |
//! | `tunnel_format` | `record` | floe's own: `arrow` sends upload blocks as Arrow record batches (what pyodps's and the Java SDK's Arrow writers send) instead of protobuf records; upsert sessions keep the record format. Tables with interval, `json`, complex or legacy/wide `decimal` columns are refused under `arrow` |
//! | `staging-location` | beside the checkpoint | floe's own: where routes whose only target is MaxCompute stage their Parquet files, see [`crate::targets::staging`] |
//! | `multi_table_sink_replica` | 1 | only 1: floe writes a table with one writer per batch and commits it from one committer at a time (its lease); parallel writers are function instances. Other values are refused |
//!
//! Which session a commit uses: an upsert session when `insert_strategy = upsert`, or when the
//! table has a primary key and the route's rows carry a kind (removals in metadata mode, a
//! `row-kind-field`); an upload session otherwise.

use floe_core::{Error, ErrorKind, Result};
use floe_maxcompute::partition::is_identifier;
use floe_maxcompute::{MaxComputeSinkConfig, PartitionSpec};
use serde::{Deserialize, Serialize};

use super::Mode;
use super::opts::Opts;

/// The placeholders a route can fill (see [`crate::route`]).
const PLACEHOLDERS: [&str; 4] = ["bucket", "prefix", "table_name", "dir"];

/// The namespace of the staging tables (see [`crate::targets::staging`]) that hold the staged
/// files of routes whose only target is MaxCompute (when the route names no `table`).
pub const STAGING_NAMESPACE: &str = "floe_staging";

/// A route's targets (`targets = ["iceberg", "maxcompute"]`; default `["iceberg"]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteTargets {
    /// Whether the route's table gets Iceberg snapshots.
    pub iceberg: bool,
    /// The route's MaxCompute target, when it has one.
    pub maxcompute: Option<RouteMaxCompute>,
}

impl Default for RouteTargets {
    fn default() -> Self {
        RouteTargets {
            iceberg: true,
            maxcompute: None,
        }
    }
}

/// A route's MaxCompute settings (options `maxcompute.*` of the route, defaults from
/// `[maxcompute]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteMaxCompute {
    /// `maxcompute.table_name`: the table, with placeholders (default: `[maxcompute] table_name`).
    pub table_name: String,
    /// `maxcompute.partition_spec`: the partition (default: `[maxcompute] partition_spec`).
    pub partition_spec: Option<String>,
    /// How a row's operation is known.
    pub row_kinds: RowKinds,
}

/// How the committer knows what a staged row does to a MaxCompute table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "field", rename_all = "snake_case")]
pub enum RowKinds {
    /// Every row is an insert (records mode, by default).
    Inserts,
    /// The metadata schema's `operation` column (metadata and content modes): `created` rows are
    /// upserts and `removed` rows deletes on a table with a primary key; on a table without one,
    /// every row is appended (a changelog).
    Changelog(String),
    /// `maxcompute.row-kind-field`: `+I`/`INSERT`, `+U`/`UPDATE_AFTER`, `-D`/`DELETE` (and
    /// `-U`/`UPDATE_BEFORE`, which is refused as a bad record). Updates and deletes need a table
    /// with a primary key; on one without, they are bad records.
    Cdc(String),
}

/// Parse `[maxcompute]` into the sink's options (validated; errors name `maxcompute.<option>`).
pub fn section(o: &Opts<'_>) -> Result<MaxComputeSinkConfig> {
    let mut m = serde_json::Map::new();
    for key in ["endpoint", "project", "table_name"] {
        m.insert(key.into(), o.required(key)?.into());
    }
    for key in [
        "accessId",
        "accesskey",
        "sts_token",
        "schema_name",
        "partition_spec",
        "schema_save_mode",
        "data_save_mode",
        "custom_sql",
        "save_mode_create_template",
        "datetime_format",
        "tunnel_endpoint",
        "tunnel_name",
        "insert_strategy",
        "tunnel_format",
    ] {
        if let Some(v) = o.string(key)? {
            m.insert(key.into(), v.into());
        }
    }
    m.insert("overwrite".into(), o.bool("overwrite", false)?.into());
    m.insert(
        "multi_table_sink_replica".into(),
        o.u64_in("multi_table_sink_replica", 1, 1..=1024)?.into(),
    );
    let config = MaxComputeSinkConfig::from_json(&serde_json::Value::Object(m).to_string())
        .map_err(|e| Error::config("maxcompute", e.message()))?;
    config.validate().map_err(in_section)?;
    check_placeholders("maxcompute.table_name", &config.table_name)?;
    Ok(config)
}

/// A sink option error (`invalid option `x`: …`) renamed to `maxcompute.x`.
fn in_section(e: Error) -> Error {
    if e.kind() != ErrorKind::Config {
        return e;
    }
    let option = e
        .context()
        .iter()
        .find(|(k, _)| *k == "option")
        .map(|(_, v)| v.clone());
    match option {
        Some(option) if !option.starts_with("maxcompute.") => {
            let prefix = format!("invalid option `{option}`: ");
            let problem = e.message().strip_prefix(&prefix).unwrap_or(e.message());
            Error::config(&format!("maxcompute.{option}"), problem)
        }
        _ => e,
    }
}

fn check_placeholders(option: &str, template: &str) -> Result<()> {
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| Error::config(option, format!("`{template}` has an unclosed `${{`")))?;
        let name = &after[..end];
        if !PLACEHOLDERS.contains(&name) {
            return Err(Error::config(
                option,
                format!(
                    "unknown placeholder `${{{name}}}` (known: {})",
                    PLACEHOLDERS.map(|p| format!("${{{p}}}")).join(", ")
                ),
            ));
        }
        rest = &after[end + 1..];
    }
    Ok(())
}

/// A route's `targets` and `maxcompute.*` options; `columns` are its metadata columns.
pub fn route_targets(
    o: &Opts<'_>,
    mode: Mode,
    columns: Option<&[String]>,
    section: Option<&MaxComputeSinkConfig>,
) -> Result<RouteTargets> {
    let names = if o.has("targets") {
        o.list("targets")?
    } else {
        vec!["iceberg".to_owned()]
    };
    if names.is_empty() {
        return Err(o.err(
            "targets",
            "names no target; expected iceberg and/or maxcompute",
        ));
    }
    let mut targets = RouteTargets {
        iceberg: false,
        maxcompute: None,
    };
    let mut maxcompute = false;
    for name in &names {
        match name.to_ascii_lowercase().as_str() {
            "iceberg" => targets.iceberg = true,
            "maxcompute" => maxcompute = true,
            other => {
                return Err(o.err(
                    "targets",
                    format!("unknown target `{other}`; expected iceberg or maxcompute"),
                ));
            }
        }
    }
    let table_name = o.string("maxcompute.table_name")?;
    let partition_spec = o.string("maxcompute.partition_spec")?;
    let row_kind_field = o.string("maxcompute.row-kind-field")?;
    if !maxcompute {
        if let Some(key) = [
            "maxcompute.table_name",
            "maxcompute.partition_spec",
            "maxcompute.row-kind-field",
        ]
        .into_iter()
        .find(|k| o.has(k))
        {
            return Err(o.err(key, "is set but `targets` does not name maxcompute"));
        }
        return Ok(targets);
    }
    let section = section.ok_or_else(|| {
        o.err(
            "targets",
            "names maxcompute, but the configuration has no [maxcompute] section",
        )
    })?;
    let table_name = match table_name {
        Some(t) => {
            check_placeholders(&o.full("maxcompute.table_name"), &t)?;
            if !t.contains("${") && !is_identifier(&t) {
                return Err(o.err(
                    "maxcompute.table_name",
                    format!("`{t}` is not a table name"),
                ));
            }
            t
        }
        None => section.table_name.clone(),
    };
    let partition_spec = match partition_spec {
        Some(p) if p.trim().is_empty() => None,
        Some(p) => {
            p.parse::<PartitionSpec>()
                .map_err(|e| o.err("maxcompute.partition_spec", e.message()))?;
            Some(p)
        }
        None => section.partition_spec.clone(),
    };
    let row_kinds = match (row_kind_field, mode) {
        (Some(f), _) if f.trim().is_empty() => {
            return Err(o.err("maxcompute.row-kind-field", "must name a field"));
        }
        (Some(f), _) => RowKinds::Cdc(f),
        (None, Mode::Records) => RowKinds::Inserts,
        (None, Mode::Metadata | Mode::Content) => {
            if let Some(cols) = columns
                && !cols.iter().any(|c| c.eq_ignore_ascii_case("operation"))
            {
                return Err(o.err(
                    "columns",
                    "a maxcompute target needs the `operation` column to tell removals from creations",
                ));
            }
            RowKinds::Changelog("operation".into())
        }
    };
    targets.maxcompute = Some(RouteMaxCompute {
        table_name,
        partition_spec,
        row_kinds,
    });
    Ok(targets)
}

/// The `table` of a route that names none: only a route without an Iceberg target may leave it
/// out. Its staged Parquet files still need a table to be written as (the writer stack, the
/// schema decided once on first use), so they go to the staging table
/// `floe_staging.<the MaxCompute table name>`, kept in the checkpoint table rather than any
/// Iceberg catalog (see [`crate::targets::staging`]); its files are deleted once MaxCompute has
/// them.
pub fn default_table(o: &Opts<'_>, targets: &RouteTargets) -> Result<String> {
    match &targets.maxcompute {
        Some(m) if !targets.iceberg => Ok(format!("{STAGING_NAMESPACE}.{}", m.table_name)),
        _ => Err(o.err("table", "is required")),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{FloeConfig, parse};
    use super::*;
    use std::path::Path;

    const SECTION: &str = "[maxcompute]\nendpoint = \"http://127.0.0.1:1/api\"\nproject = \"p\"\ntable_name = \"${table_name}_sink\"\n";

    fn load(text: &str) -> Result<FloeConfig> {
        let text = format!("[source]\nfolder = \"b\"\n{text}");
        FloeConfig::from_raw(parse(&text, false)?, Path::new("/cfg"))
    }

    #[test]
    fn section_defaults_and_route_targets() {
        let c = load(&format!(
            "{SECTION}[[routes]]\ntable = \"a.b\"\n\
             [[routes]]\ntargets = [\"maxcompute\"]\nmode = \"metadata\"\nmaxcompute.partition_spec = \"ds='1'\"\n\
             [[routes]]\ntable = \"a.c\"\ntargets = \"iceberg,maxcompute\"\nmaxcompute.table_name = \"c\"\nmaxcompute.row-kind-field = \"op\"\n"
        ))
        .unwrap();
        let mc = c.maxcompute.as_ref().unwrap();
        assert_eq!(mc.project, "p");
        assert_eq!(mc.multi_table_sink_replica, 1);
        assert!(!mc.overwrite);
        assert_eq!(c.routes[0].targets, RouteTargets::default());
        let r = &c.routes[1];
        assert_eq!(r.table, "floe_staging.${table_name}_sink");
        assert!(!r.targets.iceberg);
        let m = r.targets.maxcompute.as_ref().unwrap();
        assert_eq!(m.table_name, "${table_name}_sink");
        assert_eq!(m.partition_spec.as_deref(), Some("ds='1'"));
        assert_eq!(m.row_kinds, RowKinds::Changelog("operation".into()));
        let r = &c.routes[2];
        assert!(r.targets.iceberg);
        let m = r.targets.maxcompute.as_ref().unwrap();
        assert_eq!(m.table_name, "c");
        assert_eq!(m.row_kinds, RowKinds::Cdc("op".into()));
    }

    #[test]
    fn errors_name_the_option() {
        let cases = [
            (
                "[[routes]]\ntable = \"a.b\"\ntargets = [\"maxcompute\"]\n".to_owned(),
                "routes[0].targets",
            ),
            (
                format!("{SECTION}[[routes]]\ntable = \"a.b\"\ntargets = [\"hive\"]\n"),
                "routes[0].targets",
            ),
            (
                format!("{SECTION}[[routes]]\ntargets = [\"iceberg\", \"maxcompute\"]\n"),
                "routes[0].table",
            ),
            (
                format!("{SECTION}[[routes]]\ntable = \"a.b\"\nmaxcompute.table_name = \"x\"\n"),
                "routes[0].maxcompute.table_name",
            ),
            (
                format!(
                    "{SECTION}[[routes]]\ntargets = [\"maxcompute\"]\nmaxcompute.table_name = \"${{database}}\"\n"
                ),
                "routes[0].maxcompute.table_name",
            ),
            (
                format!(
                    "{SECTION}[[routes]]\ntargets = [\"maxcompute\"]\nmaxcompute.partition_spec = \"ds\"\n"
                ),
                "routes[0].maxcompute.partition_spec",
            ),
            (
                format!(
                    "{SECTION}[[routes]]\ntargets = [\"maxcompute\"]\nmode = \"metadata\"\ncolumns = [\"key\"]\n"
                ),
                "routes[0].columns",
            ),
            (
                format!("{SECTION}sts_token = \"t\"\n[[routes]]\ntable = \"a.b\"\n"),
                "maxcompute.sts_token",
            ),
            (
                format!("{SECTION}colour = \"blue\"\n[[routes]]\ntable = \"a.b\"\n"),
                "maxcompute.colour",
            ),
            (
                format!("{SECTION}overwrite = \"sometimes\"\n[[routes]]\ntable = \"a.b\"\n"),
                "maxcompute.overwrite",
            ),
            (
                "[maxcompute]\nproject = \"p\"\ntable_name = \"t\"\n[[routes]]\ntable = \"a.b\"\n"
                    .to_owned(),
                "maxcompute.endpoint",
            ),
            (
                format!(
                    "{SECTION}data_save_mode = \"CUSTOM_PROCESSING\"\n[[routes]]\ntable = \"a.b\"\n"
                ),
                "maxcompute.custom_sql",
            ),
        ];
        for (text, option) in cases {
            let err = load(&text).unwrap_err();
            assert!(
                err.to_string().contains(&format!("`{option}`")),
                "{option}: {err}"
            );
            assert_eq!(err.kind(), ErrorKind::Config, "{option}");
        }
    }

    #[test]
    fn secrets_stay_out_of_debug() {
        let c = load(&format!(
            "{SECTION}accessId = \"AKID\"\naccesskey = \"very-secret\"\n[[routes]]\ntable = \"a.b\"\n"
        ))
        .unwrap();
        let shown = format!("{c:?}");
        assert!(
            shown.contains("AKID") && !shown.contains("very-secret"),
            "{shown}"
        );
    }
}
