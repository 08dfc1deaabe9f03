//! floe's configuration: one file, sections for the source, the Iceberg catalog (Kafka Connect
//! property names), the checkpoint table, ingest and commit policies, dead letters, and routes.
//!
//! ```toml
//! [source]
//! type = "local"              # a folder treated as a bucket
//! folder = "bucket"           # relative to this file
//! bucket = "demo"             # the bucket name rows carry (default: the folder's name)
//! path = "events/,logs/"      # prefixes to scan (default: everything)
//!
//! [iceberg]                   # any iceberg.catalog.* property of the Kafka Connect sink
//! catalog.type = "sql"
//! catalog.uri = "catalog.db"
//! catalog.warehouse = "warehouse"
//!
//! [checkpoint]
//! type = "sqlite"
//! path = "checkpoint.db"
//!
//! [[routes]]
//! name = "events"
//! prefix = "events/"
//! mode = "records"            # records | metadata | content
//! table = "demo.events"       # may use ${bucket} ${prefix} ${table_name} ${dir}
//! schema = "events.schema.json"
//! partition-by = ["day(ts)"]
//! on-error = "dead-letter"    # fail | skip | dead-letter
//! on-change = "replace"       # replace | append (records mode's default: replace)
//! targets = ["iceberg"]       # and/or "maxcompute" (section [maxcompute], see `maxcompute`)
//! # route-field = "kind"      # each record to the table its field names (appends; see
//!                             # RouteConfig::route_field), or with route-regex to the tables
//! # route-regex = { "demo.clicks" = "click.*" }   # whose regex matches it (RouteConfig::route_regex)
//! # write-props = { "write.parquet.compression-codec" = "snappy" }  # over [iceberg] tables.write-props
//!
//! [dead-letter]
//! path = "dead-letter"        # a folder (relative to this file), or s3://bucket/prefix/,
//!                             # oss://bucket/prefix/ (see DeadLetterConfig)
//! ```
//!
//! Every option is documented on its field below with its default. Unknown options are errors
//! that name the option; so are values out of range.
//!
//! Bucket and queue sources (`type = "s3" | "oss" | "mns" | "sqs"`, with the OSS CDC
//! connector's option names), the exact meaning of each startup mode as floe wires it, and the
//! object-store checkpoint table (`[checkpoint] type = "object-store"`) are documented in
//! [`source`].

mod load;
pub mod maxcompute;
mod opts;
pub mod source;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use floe_core::{Error, Result};
use floe_decode::TableSchema;
use floe_decode::decode::{CsvOptions, Format};
use floe_decode::partition::PartitionField;
use floe_iceberg::CatalogConfig;
use floe_maxcompute::MaxComputeSinkConfig;

pub use load::{RawConfig, as_string, parse};
pub use maxcompute::{RouteMaxCompute, RouteTargets, RowKinds};
pub use opts::Opts;
pub use source::{CloudSourceConfig, ListingConfig, QueueConfig, StoreSettings};

/// The environment variable naming a deployed function's config file.
pub const CONFIG_PATH_ENV: &str = "FLOE_CONFIG";
/// The environment variable holding a deployed function's config as TOML text.
pub const CONFIG_TEXT_ENV: &str = "FLOE_CONFIG_TOML";

/// The whole configuration.
#[derive(Clone, Debug)]
pub struct FloeConfig {
    /// The folder relative paths are taken from (the file's folder).
    pub base_dir: PathBuf,
    /// Where object changes come from.
    pub source: SourceConfig,
    /// The Iceberg catalog (section `[iceberg]`, `catalog.*` options).
    pub catalog: CatalogConfig,
    /// The checkpoint table.
    pub checkpoint: CheckpointConfig,
    /// How staged files are committed.
    pub commit: CommitConfig,
    /// How objects are read and staged.
    pub ingest: IngestConfig,
    /// Where bad records and unreadable objects go.
    pub dead_letter: DeadLetterConfig,
    /// Routes, tried in order; the first that matches an object takes it.
    pub routes: Vec<RouteConfig>,
    /// `[maxcompute]`: the MaxCompute target's options (see [`maxcompute`]).
    pub maxcompute: Option<MaxComputeSinkConfig>,
    /// `[maxcompute] staging-location`: where routes whose only target is MaxCompute stage
    /// their files (default: see [`crate::targets::staging`]).
    pub staging_location: Option<String>,
    /// Which branch each Iceberg table's commits go on.
    pub commit_branches: CommitBranches,
}

/// Kafka Connect's `iceberg.tables.default-commit-branch` and
/// `iceberg.table.<table>.commit-branch`: the branch a table's snapshots go on (default
/// `main`). A branch that does not exist is made at the first commit, from `main`'s current
/// snapshot. Routes that replace or upsert rows commit to `main` only (their table may not be
/// on another branch).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommitBranches {
    /// `tables.default-commit-branch`.
    pub default: Option<String>,
    /// `table.<table>.commit-branch`, by table.
    pub tables: HashMap<String, String>,
}

impl CommitBranches {
    /// The branch `table` commits to, `None` for `main`.
    pub fn of(&self, table: &str) -> Option<&str> {
        let b = self.tables.get(table).or(self.default.as_ref())?;
        (b != "main").then_some(b.as_str())
    }
}

/// A branch name as the option `key` gives it.
fn branch_name(key: &str, value: &str) -> Result<String> {
    let b = value.trim();
    if b.is_empty() || b.contains(char::is_whitespace) {
        return Err(Error::config(
            key,
            format!("`{value}` is not a branch name"),
        ));
    }
    Ok(b.to_owned())
}

/// `[source]`.
#[derive(Clone, Debug)]
pub enum SourceConfig {
    /// `type = "local"`: a folder treated as a bucket; each run lands what was created, changed
    /// or removed since the last run (everything on the first).
    Local {
        /// `folder`: the folder (required).
        folder: PathBuf,
        /// `bucket`: the bucket name rows carry (default: the folder's name).
        bucket: String,
        /// `path`: comma-separated key prefixes to scan (default: all).
        prefixes: Vec<String>,
        /// `poll-interval-ms`: how often `--watch` rescans (default 2000).
        poll_interval_ms: u64,
    },
    /// `type = "s3" | "oss" | "mns" | "sqs"`: a bucket listing and/or a queue of bucket
    /// notifications; see [`source`].
    Cloud(Box<CloudSourceConfig>),
}

/// `[checkpoint]`.
#[derive(Clone, Debug)]
pub enum CheckpointConfig {
    /// `type = "sqlite"`, `path` (default `checkpoint.db`).
    Sqlite {
        /// The database file.
        path: PathBuf,
    },
    /// `type = "object-store"`: one object per entry under `prefix` in `bucket`, written with
    /// conditional requests, shared by instances on either cloud; see [`source`].
    ObjectStore {
        /// `provider`: s3 or oss.
        provider: floe_core::Provider,
        /// `bucket`.
        bucket: String,
        /// `prefix` (default `floe/checkpoint/`).
        prefix: String,
        /// How to reach the bucket.
        store: StoreSettings,
    },
}

/// `[commit]` (also read from the Kafka Connect names `iceberg.control.commit.*`).
#[derive(Clone, Debug)]
pub struct CommitConfig {
    /// `interval-ms`: commit staged files at least this often when running continuously
    /// (default 60 000).
    pub interval_ms: u64,
    /// `max-files`: commit early once this many files are staged for a table (default 1000).
    pub max_files: u64,
    /// `max-bytes`: commit early once this many bytes are staged for a table (default 1 GiB).
    pub max_bytes: u64,
    /// `timeout-ms`: give up retrying one commit after this long (default 300 000).
    pub timeout_ms: u64,
    /// `lease-ms`: how long a committer's lease on a table lasts without renewal (default 120 000).
    pub lease_ms: u64,
}

/// `[ingest]`.
#[derive(Clone, Debug)]
pub struct IngestConfig {
    /// `batch-objects`: objects per ingest batch (default 1000).
    pub batch_objects: usize,
    /// `batch-bytes`: object bytes per ingest batch (default 1 GiB).
    pub batch_bytes: u64,
    /// `batch-rows`: rows per decoded Arrow batch (default 8192).
    pub batch_rows: usize,
    /// `target-file-size-bytes`: roll data files past this size (default 128 MiB).
    pub target_file_size_bytes: u64,
    /// `row-group-rows`: Parquet row group size in rows (default 131 072).
    pub row_group_rows: usize,
    /// `claim-timeout-ms`: a claim older than this is taken over (its batch died) (default 300 000).
    pub claim_timeout_ms: u64,
    /// `object-timeout-ms`: one object's read that takes longer is given up and the object given
    /// back for a later delivery (its message counts toward `max-deliveries`), while the rest of
    /// its batch lands (default 600 000; 0: no limit). A function's stop time cuts a read short
    /// the same way.
    pub object_timeout_ms: u64,
    /// `max-object-bytes`: an object whose change says it is larger is set aside unread, as a bad
    /// object (dead-lettered under the route's `on-error`), instead of being read (default 0: no
    /// limit).
    pub max_object_bytes: u64,
    /// `dedupe-ttl-hours`: how long object identities are remembered for deduplication of queue
    /// deliveries; longer than any queue's retention (default 360 = 15 days). The local folder
    /// source keeps them forever (they are the folder's state).
    pub dedupe_ttl_hours: u64,
}

/// `[dead-letter]`: where bad records and unreadable objects go, as NDJSON files
/// `<day>/<batch>-<part>.ndjson` (see [`crate::deadletter`]).
///
/// ```toml
/// [dead-letter]
/// path = "dead-letter"                          # a folder, relative to this file (the default)
/// # path = "s3://state-bucket/floe/dead-letter/" # or a prefix of an S3 bucket
/// # path = "oss://state-bucket/floe/dead-letter/" # or of an OSS bucket
/// # endpoint, region, path-style-access, access-key-id, secret-access-key, session-token:
/// # the bucket's connection, default the source's object-store settings (as for
/// # `[checkpoint] type = "object-store"`, see [`source`]); an oss:// bucket with no endpoint
/// # gets `https://oss-<region>.aliyuncs.com`.
/// ```
///
/// A deployed function has no disk that outlives it: give it a bucket path. Errors name
/// `dead-letter.path` (or the connection option at fault).
#[derive(Clone, Debug, PartialEq)]
pub enum DeadLetterConfig {
    /// A folder.
    Local {
        /// The folder, absolute.
        path: PathBuf,
    },
    /// A key prefix in a bucket.
    ObjectStore {
        /// `s3` or `oss`, from the scheme.
        provider: floe_core::Provider,
        /// The bucket.
        bucket: String,
        /// The key prefix: empty (the whole bucket) or ending in `/`.
        prefix: String,
        /// How to reach the bucket.
        store: StoreSettings,
    },
}

impl DeadLetterConfig {
    /// Where the dead letters go, for messages: the folder, or `s3://bucket/prefix`.
    pub fn location(&self) -> String {
        match self {
            DeadLetterConfig::Local { path } => path.display().to_string(),
            DeadLetterConfig::ObjectStore {
                provider,
                bucket,
                prefix,
                ..
            } => {
                let scheme = match provider {
                    floe_core::Provider::Oss => "oss",
                    _ => "s3",
                };
                format!("{scheme}://{bucket}/{prefix}")
            }
        }
    }
}

/// What a route makes of an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One row per object change, in the fixed metadata schema.
    Metadata,
    /// The object's records (NDJSON, JSON, CSV, Parquet).
    Records,
    /// The metadata row plus the object's bytes.
    Content,
}

/// What to do with a bad record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnError {
    /// Fail the object: nothing of it lands, and it is retried (queue) or reported (local).
    Fail,
    /// Drop the record, count it, log it.
    Skip,
    /// Write it to the dead-letter destination with the reason, and count it.
    DeadLetter,
}

/// `on-change`: how an object's later versions and its removal reach the rows it landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnChange {
    /// The table mirrors the objects: a new version's rows replace the earlier version's (the
    /// old rows deleted by position in the snapshot that adds the new ones), and a removed
    /// object's rows are deleted. In metadata and content modes: one row per live object.
    Replace,
    /// Every version adds its rows beside the earlier ones; removals change nothing (records
    /// mode) or add a changelog row (metadata and content modes).
    Append,
}

/// A `[[routes]]` entry.
#[derive(Clone, Debug)]
pub struct RouteConfig {
    /// `name`: the route's name (default `route<N>`).
    pub name: String,
    /// `bucket`: only objects of this bucket (default any).
    pub bucket: Option<String>,
    /// `prefix`: key prefixes (string or list; default any).
    pub prefixes: Vec<String>,
    /// `suffix`: key suffixes (string or list; default any).
    pub suffixes: Vec<String>,
    /// `glob`: a key glob (`*` within a path segment, `**` across segments).
    pub glob: Option<String>,
    /// `mode`: records | metadata | content (default records).
    pub mode: Mode,
    /// `format`: ndjson | json | csv | tsv | parquet (default: from the key's extension).
    pub format: Option<Format>,
    /// `csv.header` (true), `csv.delimiter` (`,`), `csv.quote` (`"`), `csv.escape` (none).
    pub csv: CsvOptions,
    /// `table`: the target table `namespace.table`, with placeholders (required).
    pub table: String,
    /// `schema`: a schema JSON file (or inline JSON) used when the table is created.
    pub schema: Option<TableSchema>,
    /// `columns`: for metadata/content modes, the metadata columns (must include `key`).
    pub columns: Option<Vec<String>>,
    /// `partition-by`: partition fields for a table floe creates, e.g. `["day(ts)"]`.
    pub partition_by: Vec<PartitionField>,
    /// `on-error`: fail | skip | dead-letter (default dead-letter).
    pub on_error: OnError,
    /// `content.max-bytes`: objects larger than this carry no content, only their url
    /// (default 16 MiB).
    pub content_max_bytes: u64,
    /// `infer.max-records`: records sampled to infer a schema (default 1000).
    pub infer_max_records: usize,
    /// `schema.evolution`: add a column to the table for each new top-level field an object
    /// brings (records mode; the new columns are optional), and widen a column whose values grow
    /// as the Iceberg spec allows (`int` → `long`, `float` → `double`, a decimal's precision).
    /// Default: `[iceberg]`
    /// `tables.evolve-schema-enabled` (Kafka Connect's name), itself default false, in which case
    /// fields the table does not have are ignored.
    pub evolve: bool,
    /// `auto-create`: create the route's Iceberg table when it does not exist. Default:
    /// `[iceberg]` `tables.auto-create-enabled` (Kafka Connect's name), itself default true.
    /// Off, the objects of a missing table are given back (not set aside) with an error naming
    /// the option, and land once the table exists.
    pub auto_create: bool,
    /// Properties of a table floe creates: `[iceberg]` `tables.auto-create-props.*` (Kafka
    /// Connect's name).
    pub create_props: HashMap<String, String>,
    /// Every column of a table floe creates is optional, whatever the schema says: `[iceberg]`
    /// `tables.schema-force-optional` (Kafka Connect's name; default false).
    pub force_optional: bool,
    /// `schema.case-insensitive`: whether the data's field names find the table's columns when
    /// they differ only in case (`ID` lands in `id`; an exact name wins), in every format and at
    /// every level, and schema evolution sees no new column in such a field. Off, names match
    /// byte for byte and `ID` is a field of its own (a new column under schema evolution,
    /// otherwise ignored). Default: `[iceberg]` `tables.schema-case-insensitive` (Kafka
    /// Connect's name), itself default **true**: floe matches names as the OSS CDC connector
    /// does, where Kafka Connect's default is false.
    pub names: floe_decode::Names,
    /// Writer properties: the route's own `write-props.*`, over `[iceberg]`
    /// `tables.write-props.*` (Kafka Connect's name; see [`floe_iceberg::WRITE_PROPS`]), over
    /// the `[ingest]` file and row-group sizes. The target file size is also what `floe
    /// maintain` compacts the route's table to.
    pub write_props: floe_iceberg::WriteProps,
    /// `upsert`, `id-columns`, `cdc-field`: rows change by key (upserts, deletes; see
    /// [`floe_iceberg::changes`]). Defaults: `[iceberg]` `tables.upsert-mode-enabled`,
    /// `table.<table>.id-columns` then `tables.default-id-columns`, `tables.cdc-field` (Kafka
    /// Connect's names). `None`: every row is appended.
    pub changes: Option<floe_iceberg::RowChanges>,
    /// `on-change`: what a new version or a removal of an object does to the rows its earlier
    /// version landed in the route's Iceberg table. Default: `replace` in records mode (no
    /// `upsert`/`cdc-field`), `append` in metadata and content modes (a changelog row per
    /// change). Only the Iceberg table: a MaxCompute target of the route appends (changed rows
    /// reach MaxCompute through `insert_strategy = "upsert"`).
    pub on_change: OnChange,
    /// `targets` and `maxcompute.*`: where the route's rows land (default Iceberg only).
    pub targets: RouteTargets,
    /// `route-field` (Kafka Connect's `iceberg.tables.route-field` with
    /// `iceberg.tables.dynamic-enabled = true`): each record goes to the table its field names
    /// (lowercased; `ns.table`, or a bare name in the namespace of `table`); a record without it
    /// goes to `table`. Records mode, Iceberg only, appends only (default none).
    pub route_field: Option<String>,
    /// More tables that take every record of the route, besides `table` (Kafka Connect's
    /// `iceberg.tables` naming several tables, with no `[[routes]]`): the same fan-out as
    /// `route_field`'s, appends only (default none).
    pub also_tables: Vec<String>,
    /// `route-regex.<table>` (Kafka Connect's static routing: `iceberg.tables.route-field`
    /// with `iceberg.table.<table>.route-regex`), with `route-field`: each record goes to every
    /// table whose regex matches the whole of its field's value (as text). A record that
    /// matches none goes to `table` when `table` has no regex of its own; when it has one (as
    /// every table of Kafka Connect's `iceberg.tables` has), the record is set aside as a bad
    /// record naming the value (the route's `on-error`; Kafka Connect drops it). Appends only
    /// (default none).
    pub route_regex: Vec<(String, RouteRegex)>,
}

/// A `route-regex`: matches the whole value, as Java's `Matcher.matches` does.
#[derive(Clone, Debug)]
pub struct RouteRegex {
    /// As configured.
    pub text: String,
    anchored: regex::Regex,
}

impl RouteRegex {
    /// Compile `text`; the error says what is wrong with it.
    pub fn new(text: &str) -> std::result::Result<Self, String> {
        let anchored = regex::Regex::new(&format!("^(?:{text})$")).map_err(|e| e.to_string())?;
        Ok(RouteRegex {
            text: text.to_owned(),
            anchored,
        })
    }

    /// Whether `value` matches as a whole.
    pub fn matches(&self, value: &str) -> bool {
        self.anchored.is_match(value)
    }
}

impl FloeConfig {
    /// Whether an Iceberg catalog is opened: when a route targets Iceberg, or `[iceberg]`
    /// configures one (files staged into its tables before the staging catalog existed are
    /// still read from it). A configuration whose routes all target MaxCompute only needs none.
    pub fn opens_iceberg_catalog(&self) -> bool {
        !self.catalog.props.is_empty() || self.routes.iter().any(|r| r.targets.iceberg)
    }

    /// Whether some route stages into the staging catalog (its only target is MaxCompute).
    pub fn stages_without_iceberg(&self) -> bool {
        self.routes.iter().any(|r| !r.targets.iceberg)
    }

    /// Read and validate the file at `path` (TOML, or Java properties for `*.properties`).
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::from(e).while_doing(format!("failed to read config {}", path.display()))
        })?;
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let base = base.canonicalize().map_err(|e| {
            Error::from(e).while_doing(format!("failed to resolve {}", base.display()))
        })?;
        let properties = path.extension().is_some_and(|e| e == "properties");
        Self::from_raw(parse(&text, properties)?, &base)
    }

    /// The configuration of a deployed function, read once at start: the file named by
    /// `FLOE_CONFIG`, else the TOML text of `FLOE_CONFIG_TOML` (relative paths taken from the
    /// working directory). Neither set is a configuration error naming both.
    pub fn from_env() -> Result<Self> {
        if let Some(path) = std::env::var_os(CONFIG_PATH_ENV).filter(|v| !v.is_empty()) {
            return Self::load(Path::new(&path));
        }
        match std::env::var(CONFIG_TEXT_ENV) {
            Ok(text) if !text.trim().is_empty() => {
                let base = std::env::current_dir().map_err(|e| {
                    Error::from(e).while_doing("failed to read the working directory")
                })?;
                Self::from_raw(parse(&text, false)?, &base)
                    .map_err(|e| e.with_context("from", CONFIG_TEXT_ENV))
            }
            _ => Err(Error::config(
                CONFIG_PATH_ENV,
                format!(
                    "set {CONFIG_PATH_ENV} to a config file, or {CONFIG_TEXT_ENV} to its TOML text"
                ),
            )),
        }
    }

    /// Validate parsed sections; relative paths are taken from `base`.
    pub fn from_raw(raw: RawConfig, base: &Path) -> Result<Self> {
        let empty = load::Section::new();
        for name in raw.sections.keys() {
            if ![
                "source",
                "iceberg",
                "checkpoint",
                "commit",
                "ingest",
                "dead-letter",
                "maxcompute",
            ]
            .contains(&name.as_str())
            {
                return Err(Error::config(name, "unknown section"));
            }
        }
        let section = |n: &str| raw.sections.get(n).unwrap_or(&empty);
        let resolve = |p: &str| -> PathBuf {
            let p = Path::new(p);
            if p.is_absolute() {
                p.to_owned()
            } else {
                base.join(p)
            }
        };

        // [source]
        let o = Opts::new("source", section("source"));
        let kind = o.string("type")?.unwrap_or_else(|| "local".into());
        let source = match kind.as_str() {
            "local" => {
                let folder = resolve(&o.required("folder")?);
                let bucket = match o.string("bucket")? {
                    Some(b) => b,
                    None => folder
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_else(|| "local".into()),
                };
                SourceConfig::Local {
                    folder,
                    bucket,
                    prefixes: o.list("path")?,
                    poll_interval_ms: o.u64_in("poll-interval-ms", 2000, 10..=86_400_000)?,
                }
            }
            "s3" | "oss" | "mns" | "sqs" => source::cloud_source(&kind, &o)?,
            other => {
                return Err(o.err(
                    "type",
                    format!("unknown source type `{other}`; expected local, s3, oss, mns or sqs"),
                ));
            }
        };
        o.finish()?;

        // [iceberg]: catalog.* passes through; Kafka Connect's control.commit.* map to [commit].
        let o = Opts::new("iceberg", section("iceberg"));
        let name = o
            .string("catalog")?
            .or(o.string("catalog.name")?)
            .unwrap_or_else(|| "floe".into());
        let props = o
            .prefixed("catalog")?
            .into_iter()
            .filter(|(k, _)| k != "name")
            .collect();
        let kc_interval = o.string("control.commit.interval-ms")?;
        let kc_timeout = o.string("control.commit.timeout-ms")?;
        let mut table_ids = HashMap::new();
        let mut table_partitions = HashMap::new();
        let mut table_regexes: Vec<(String, String)> = Vec::new();
        let mut branches = CommitBranches::default();
        for (rest, value) in o.prefixed("table")? {
            // Kafka Connect's per-table options: `iceberg.table.<table>.id-columns`,
            // `.commit-branch`, `.partition-by` and `.route-regex`.
            if let Some(table) = rest.strip_suffix(".commit-branch") {
                let branch = branch_name(&format!("iceberg.table.{rest}"), &value)?;
                branches.tables.insert(table.to_owned(), branch);
                continue;
            }
            if let Some(table) = rest.strip_suffix(".partition-by") {
                let fields = partition_fields(&format!("iceberg.table.{rest}"), &value)?;
                table_partitions.insert(table.to_owned(), fields);
                continue;
            }
            if let Some(table) = rest.strip_suffix(".route-regex") {
                table_regexes.push((table.to_owned(), value));
                continue;
            }
            let Some(table) = rest.strip_suffix(".id-columns") else {
                return Err(Error::config(
                    &format!("iceberg.table.{rest}"),
                    "unsupported per-table option (floe takes id-columns, commit-branch, \
                     partition-by and route-regex; routes take the rest)",
                ));
            };
            let columns: Vec<String> = (value.split(','))
                .map(|c| c.trim().to_owned())
                .filter(|c| !c.is_empty())
                .collect();
            table_ids.insert(table.to_owned(), columns);
        }
        let defaults = TableDefaults {
            auto_create: o.bool("tables.auto-create-enabled", true)?,
            evolve: o.bool("tables.evolve-schema-enabled", false)?,
            upsert: o.bool("tables.upsert-mode-enabled", false)?,
            id_columns: o.list("tables.default-id-columns")?,
            cdc_field: o.string("tables.cdc-field")?,
            table_ids,
            create_props: o
                .prefixed("tables.auto-create-props")?
                .into_iter()
                .collect(),
            force_optional: o.bool("tables.schema-force-optional", false)?,
            case_insensitive: o.bool("tables.schema-case-insensitive", true)?,
            partition_by: match o.string("tables.default-partition-by")? {
                Some(v) => partition_fields("iceberg.tables.default-partition-by", &v)?,
                None => Vec::new(),
            },
            table_partitions,
            write_props: floe_iceberg::WriteProps::parse(
                &o.prefixed("tables.write-props")?.into_iter().collect(),
                "iceberg.tables.write-props",
            )?,
            route_field: None,
        };
        let mut defaults = defaults;
        let dynamic = o.bool("tables.dynamic-enabled", false)?;
        // Kafka Connect's static routing: the field, matched against each table's route-regex.
        let mut static_field = None;
        match (dynamic, o.string("tables.route-field")?) {
            (true, Some(f)) => defaults.route_field = Some(f),
            (true, None) => {
                return Err(Error::config(
                    "iceberg.tables.route-field",
                    "iceberg.tables.dynamic-enabled = true needs the field naming each record's table",
                ));
            }
            (false, Some(f)) => static_field = Some(f),
            (false, None) => {}
        }
        if let Some((table, _)) = table_regexes.first()
            && static_field.is_none()
        {
            return Err(Error::config(
                &format!("iceberg.table.{table}.route-regex"),
                if dynamic {
                    "with iceberg.tables.dynamic-enabled = true the route field names the table \
                     itself: route-regex applies to static routing (dynamic-enabled = false)"
                } else {
                    "route-regex needs iceberg.tables.route-field (the field it is matched against)"
                },
            ));
        }
        if let Some(b) = o.string("tables.default-commit-branch")? {
            branches.default = Some(branch_name("iceberg.tables.default-commit-branch", &b)?);
        }
        // Kafka Connect's static routing (`iceberg.tables`): with no [[routes]], one table
        // takes every object as records (a properties file cannot write [[routes]]).
        let kc_tables = o.list("tables")?;
        o.finish()?;
        let catalog = CatalogConfig::from_props(&name, props, base)?;

        // [checkpoint]
        let o = Opts::new("checkpoint", section("checkpoint"));
        let checkpoint = match o.string("type")?.as_deref().unwrap_or("sqlite") {
            "sqlite" => CheckpointConfig::Sqlite {
                path: resolve(&o.string("path")?.unwrap_or_else(|| "checkpoint.db".into())),
            },
            "object-store" => source::object_store_checkpoint(&o, &source)?,
            other => {
                return Err(o.err(
                    "type",
                    format!("unknown checkpoint type `{other}`; expected sqlite or object-store"),
                ));
            }
        };
        o.finish()?;

        // [commit]
        let o = Opts::new("commit", section("commit"));
        let parse_ms = |v: Option<String>, key: &str| -> Result<Option<u64>> {
            v.map(|s| {
                s.parse::<u64>().map_err(|_| {
                    Error::config(
                        &format!("iceberg.control.commit.{key}"),
                        "expected milliseconds",
                    )
                })
            })
            .transpose()
        };
        let commit = CommitConfig {
            interval_ms: o.u64_in(
                "interval-ms",
                parse_ms(kc_interval, "interval-ms")?.unwrap_or(60_000),
                0..=86_400_000,
            )?,
            max_files: o.u64_in("max-files", 1000, 1..=1_000_000)?,
            max_bytes: o.u64_in("max-bytes", 1 << 30, 1..=u64::MAX)?,
            timeout_ms: o.u64_in(
                "timeout-ms",
                parse_ms(kc_timeout, "timeout-ms")?.unwrap_or(300_000),
                1000..=86_400_000,
            )?,
            lease_ms: o.u64_in("lease-ms", 120_000, 1000..=86_400_000)?,
        };
        o.finish()?;

        // [ingest]
        let o = Opts::new("ingest", section("ingest"));
        let ingest = IngestConfig {
            batch_objects: o.u64_in("batch-objects", 1000, 1..=1_000_000)? as usize,
            batch_bytes: o.u64_in("batch-bytes", 1 << 30, 1..=u64::MAX)?,
            batch_rows: o.u64_in("batch-rows", 8192, 1..=1_048_576)? as usize,
            target_file_size_bytes: o.u64_in(
                "target-file-size-bytes",
                128 << 20,
                1 << 20..=u64::MAX,
            )?,
            row_group_rows: o.u64_in("row-group-rows", 128 * 1024, 1024..=16 << 20)? as usize,
            claim_timeout_ms: o.u64_in("claim-timeout-ms", 300_000, 1000..=86_400_000)?,
            object_timeout_ms: o.u64_in("object-timeout-ms", 600_000, 0..=86_400_000)?,
            max_object_bytes: o.u64_in("max-object-bytes", 0, 0..=u64::MAX)?,
            dedupe_ttl_hours: o.u64_in("dedupe-ttl-hours", 360, 1..=87_600)?,
        };
        o.finish()?;

        // [dead-letter]
        let o = Opts::new("dead-letter", section("dead-letter"));
        let dead_letter = source::dead_letter(&o, &source, resolve)?;
        o.finish()?;

        // [maxcompute]
        let (maxcompute, staging_location) = match raw.sections.get("maxcompute") {
            Some(s) => {
                let o = Opts::new("maxcompute", s);
                let config = maxcompute::section(&o)?;
                let staging = o.string("staging-location")?;
                o.finish()?;
                (Some(config), staging)
            }
            None => (None, None),
        };

        // [[routes]]
        if let Some(field) = &static_field {
            if !raw.routes.is_empty() {
                return Err(Error::config(
                    "iceberg.tables.route-field",
                    "static routing by route-regex applies to the tables of iceberg.tables; \
                     with [[routes]], give a route route-field and route-regex.<table> (or set \
                     iceberg.tables.dynamic-enabled = true)",
                ));
            }
            if let Some(t) = kc_tables
                .iter()
                .find(|t| !table_regexes.iter().any(|(r, _)| r == *t))
            {
                return Err(Error::config(
                    &format!("iceberg.table.{t}.route-regex"),
                    format!(
                        "with iceberg.tables.route-field = {field} (static routing) every table of \
                         iceberg.tables needs its route-regex: without one, {t} would take no record"
                    ),
                ));
            }
            if let Some((t, _)) = table_regexes.iter().find(|(t, _)| !kc_tables.contains(t)) {
                return Err(Error::config(
                    &format!("iceberg.table.{t}.route-regex"),
                    format!("{t} is not one of iceberg.tables"),
                ));
            }
        }
        // The route Kafka Connect's `iceberg.tables` make (no [[routes]]): the first table,
        // with the static routing keys when there are any.
        let kc_route = |table: &str| {
            let mut r = load::Section::new();
            r.insert("name".into(), toml::Value::String("iceberg.tables".into()));
            r.insert("table".into(), toml::Value::String(table.to_owned()));
            if let Some(field) = &static_field {
                r.insert("route-field".into(), toml::Value::String(field.clone()));
                for (t, regex) in &table_regexes {
                    r.insert(
                        format!("route-regex.{t}"),
                        toml::Value::String(regex.clone()),
                    );
                }
            }
            r
        };
        let routes = match (raw.routes.is_empty(), kc_tables.as_slice()) {
            (false, _) => raw
                .routes
                .iter()
                .enumerate()
                .map(|(i, r)| route(i, r, base, maxcompute.as_ref(), &defaults))
                .collect::<Result<Vec<_>>>()?,
            (true, [table]) => {
                let r = kc_route(table);
                vec![route(0, &r, base, maxcompute.as_ref(), &defaults)?]
            }
            (true, []) => {
                return Err(Error::config(
                    "routes",
                    "at least one [[routes]] entry is needed (or iceberg.tables naming one table)",
                ));
            }
            (true, [first, rest @ ..]) => {
                // Every record to every table, as Kafka Connect's static routing without a
                // route field does.
                let mut r = kc_route(first);
                r.insert("on-change".into(), toml::Value::String("append".into()));
                let mut route = route(0, &r, base, maxcompute.as_ref(), &defaults)?;
                if route.changes.is_some()
                    || (route.route_field.is_some() && route.route_regex.is_empty())
                {
                    return Err(Error::config(
                        "iceberg.tables",
                        "names several tables, each taking every record (or those its \
                         route-regex matches): that appends only (no upserts, cdc-field or \
                         dynamic routing); route objects with [[routes]]",
                    ));
                }
                for t in rest {
                    let parts: Vec<&str> = t.split('.').collect();
                    if parts.len() < 2 || parts.iter().any(|p| p.trim().is_empty()) {
                        return Err(Error::config(
                            "iceberg.tables",
                            format!("`{t}` is not `namespace.table`"),
                        ));
                    }
                }
                route.also_tables = rest.to_vec();
                vec![route]
            }
        };

        Ok(FloeConfig {
            base_dir: base.to_owned(),
            commit_branches: branches,
            source,
            catalog,
            checkpoint,
            commit,
            ingest,
            dead_letter,
            routes,
            maxcompute,
            staging_location,
        })
    }
}

fn route(
    i: usize,
    map: &load::Section,
    base: &Path,
    mc: Option<&MaxComputeSinkConfig>,
    defaults: &TableDefaults,
) -> Result<RouteConfig> {
    let o = Opts::new(format!("routes[{i}]"), map);
    let mode = match o.string("mode")?.as_deref().unwrap_or("records") {
        "records" => Mode::Records,
        "metadata" => Mode::Metadata,
        "content" => Mode::Content,
        other => {
            return Err(o.err(
                "mode",
                format!("`{other}`: expected records, metadata or content"),
            ));
        }
    };
    let format = match o.string("format")? {
        None => None,
        Some(f) => Some(Format::parse(&f).ok_or_else(|| {
            o.err(
                "format",
                format!("`{f}`: expected ndjson, json, csv, tsv or parquet"),
            )
        })?),
    };
    let byte = |key: &str, default: Option<u8>| -> Result<Option<u8>> {
        match o.string(key)? {
            None => Ok(default),
            Some(s) if s == "\\t" || s == "\t" => Ok(Some(b'\t')),
            Some(s) if s.len() == 1 => Ok(Some(s.as_bytes()[0])),
            Some(s) => Err(o.err(key, format!("`{s}`: expected one character"))),
        }
    };
    let mut csv = match &format {
        Some(Format::Csv(c)) => c.clone(),
        _ => CsvOptions::default(),
    };
    csv.header = o.bool("csv.header", true)?;
    csv.delimiter = byte("csv.delimiter", Some(csv.delimiter))?.unwrap_or(b',');
    csv.quote = byte("csv.quote", Some(b'"'))?.unwrap_or(b'"');
    csv.escape = byte("csv.escape", None)?;
    let format = match format {
        Some(Format::Csv(_)) => Some(Format::Csv(csv.clone())),
        other => other,
    };
    let schema = match o.string("schema")? {
        None => None,
        Some(s) if s.trim_start().starts_with('{') => {
            Some(TableSchema::from_json(&s).map_err(|e| o.err("schema", e))?)
        }
        Some(p) => {
            let path = if Path::new(&p).is_absolute() {
                PathBuf::from(&p)
            } else {
                base.join(&p)
            };
            let text = std::fs::read_to_string(&path)
                .map_err(|e| o.err("schema", format!("cannot read {}: {e}", path.display())))?;
            Some(TableSchema::from_json(&text).map_err(|e| o.err("schema", e))?)
        }
    };
    let columns = if o.has("columns") {
        Some(o.list("columns")?)
    } else {
        None
    };
    if columns.is_some() && mode == Mode::Records {
        return Err(o.err(
            "columns",
            "only metadata and content routes choose metadata columns",
        ));
    }
    let partition_by = o
        .expressions("partition-by")?
        .iter()
        .map(|p| PartitionField::parse(p).map_err(|e| o.err("partition-by", e.message())))
        .collect::<Result<Vec<_>>>()?;
    let on_error = match o.string("on-error")?.as_deref().unwrap_or("dead-letter") {
        "fail" => OnError::Fail,
        "skip" => OnError::Skip,
        "dead-letter" | "dead_letter" | "deadletter" => OnError::DeadLetter,
        other => {
            return Err(o.err(
                "on-error",
                format!("`{other}`: expected fail, skip or dead-letter"),
            ));
        }
    };
    let glob = o.string("glob")?;
    if let Some(g) = &glob {
        globset::Glob::new(g).map_err(|e| o.err("glob", e))?;
    }
    let targets = maxcompute::route_targets(&o, mode, columns.as_deref(), mc)?;
    let table = match o.string("table")? {
        Some(t) => t,
        None => maxcompute::default_table(&o, &targets)?,
    };
    if !is_qualified(&table) {
        return Err(o.err("table", format!("`{table}` is not `namespace.table`")));
    }
    let partition_by = match (
        partition_by.is_empty(),
        defaults.table_partitions.get(&table),
    ) {
        (false, _) => partition_by,
        (true, Some(fields)) => fields.clone(),
        (true, None) => defaults.partition_by.clone(),
    };
    let mut route_regex = Vec::new();
    for (t, text) in o.prefixed("route-regex")? {
        let key = format!("route-regex.{t}");
        if !is_qualified(&t) {
            return Err(o.err(&key, format!("`{t}` is not `namespace.table`")));
        }
        let regex = RouteRegex::new(&text)
            .map_err(|e| o.err(&key, format!("`{text}` is not a regex: {e}")))?;
        route_regex.push((t.to_lowercase(), regex));
    }
    let r = RouteConfig {
        name: o.string("name")?.unwrap_or_else(|| format!("route{i}")),
        bucket: o.string("bucket")?,
        prefixes: o.list("prefix")?,
        suffixes: o.list("suffix")?,
        glob,
        mode,
        format,
        csv,
        table,
        schema,
        columns,
        partition_by,
        on_error,
        content_max_bytes: o.u64_in("content.max-bytes", 16 << 20, 0..=1 << 30)?,
        infer_max_records: o.u64_in("infer.max-records", 1000, 1..=1_000_000)? as usize,
        evolve: o.bool("schema.evolution", defaults.evolve)?,
        auto_create: o.bool("auto-create", defaults.auto_create)?,
        create_props: defaults.create_props.clone(),
        force_optional: defaults.force_optional,
        names: floe_decode::Names::from_case_insensitive(
            o.bool("schema.case-insensitive", defaults.case_insensitive)?,
        ),
        write_props: {
            let own = o.prefixed("write-props")?;
            if own.is_empty() {
                defaults.write_props.clone()
            } else {
                let option = o.full("write-props");
                floe_iceberg::WriteProps::parse(&own.into_iter().collect(), &option)?
                    .or(&defaults.write_props)
            }
        },
        changes: None,
        on_change: OnChange::Append,
        targets,
        route_field: o
            .string("route-field")?
            .or_else(|| defaults.route_field.clone()),
        also_tables: Vec::new(),
        route_regex,
    };
    if let Some((t, _)) = r.route_regex.first()
        && r.route_field.is_none()
    {
        return Err(o.err(
            &format!("route-regex.{t}"),
            "route-regex needs route-field (the field it is matched against)",
        ));
    }
    let on_change = match o.string("on-change")?.as_deref() {
        None => None,
        Some("replace") => Some(OnChange::Replace),
        Some("append") => Some(OnChange::Append),
        Some(other) => {
            return Err(o.err(
                "on-change",
                format!("`{other}`: expected replace or append"),
            ));
        }
    };
    let upsert = o.bool("upsert", defaults.upsert)?;
    let cdc_field = o
        .string("cdc-field")?
        .or_else(|| defaults.cdc_field.clone());
    let mut id_columns = o.list("id-columns")?;
    if id_columns.is_empty() {
        id_columns = (defaults.table_ids.get(&r.table))
            .unwrap_or(&defaults.id_columns)
            .clone();
    }
    o.finish()?;
    let mut r = r;
    if upsert || cdc_field.is_some() {
        let name = |key: &str| format!("routes[{i}].{key}");
        if id_columns.is_empty() {
            return Err(Error::config(
                &name("id-columns"),
                "upserts and deletes need the columns that identify a row: set id-columns, \
                 or iceberg.tables.default-id-columns / iceberg.table.<table>.id-columns",
            ));
        }
        if r.mode != Mode::Records {
            return Err(Error::config(
                &name("upsert"),
                "upserts and deletes by key apply to records mode",
            ));
        }
        if r.targets.maxcompute.is_some() {
            return Err(Error::config(
                &name("upsert"),
                "a route with MaxCompute targets cannot also upsert into Iceberg: MaxCompute \
                 applies changes through insert_strategy = \"upsert\" on a primary-key table",
            ));
        }
        r.changes = Some(floe_iceberg::RowChanges {
            id_columns,
            cdc_field,
            upsert,
        });
    }
    r.on_change = match on_change {
        Some(OnChange::Replace) if r.changes.is_some() => {
            return Err(Error::config(
                &format!("routes[{i}].on-change"),
                "a route that upserts or deletes by key replaces rows by their key, not by the \
                 object they came from: leave on-change out (or set it to append)",
            ));
        }
        Some(OnChange::Replace) if !r.targets.iceberg => {
            return Err(Error::config(
                &format!("routes[{i}].on-change"),
                "on-change = replace applies to a route's Iceberg table; a MaxCompute table \
                 takes changed rows through insert_strategy = \"upsert\"",
            ));
        }
        Some(c) => c,
        None if r.mode == Mode::Records
            && r.changes.is_none()
            && r.targets.iceberg
            && r.route_field.is_none() =>
        {
            OnChange::Replace
        }
        None => OnChange::Append,
    };
    if r.route_field.is_some() {
        let refuse = |why: &str| Error::config(&format!("routes[{i}].route-field"), why);
        if r.mode != Mode::Records {
            return Err(refuse(
                "routing by a record's field applies to records mode",
            ));
        }
        if r.targets.maxcompute.is_some() || !r.targets.iceberg {
            return Err(refuse(
                "routing by a record's field applies to Iceberg tables only",
            ));
        }
        if r.changes.is_some() || r.on_change == OnChange::Replace {
            return Err(refuse(
                "a route whose records choose their table appends: leave out upserts, cdc-field \
                 and on-change = \"replace\"",
            ));
        }
    }
    Ok(r)
}

/// What `[iceberg]` gives every route by default (Kafka Connect's `iceberg.tables.*` names).
struct TableDefaults {
    /// `tables.auto-create-enabled` (true).
    auto_create: bool,
    /// `tables.evolve-schema-enabled` (false).
    evolve: bool,
    /// `tables.upsert-mode-enabled` (false).
    upsert: bool,
    /// `tables.default-id-columns`.
    id_columns: Vec<String>,
    /// `tables.cdc-field`.
    cdc_field: Option<String>,
    /// `table.<table>.id-columns`, by table.
    table_ids: HashMap<String, Vec<String>>,
    /// `tables.auto-create-props.*`.
    create_props: HashMap<String, String>,
    /// `tables.schema-force-optional` (false).
    force_optional: bool,
    /// `tables.schema-case-insensitive` (true).
    case_insensitive: bool,
    /// `tables.write-props.*`.
    write_props: floe_iceberg::WriteProps,
    /// `tables.route-field`, when `tables.dynamic-enabled` is true.
    route_field: Option<String>,
    /// `tables.default-partition-by`.
    partition_by: Vec<PartitionField>,
    /// `table.<table>.partition-by`, by table.
    table_partitions: HashMap<String, Vec<PartitionField>>,
}

/// Whether `table` is `namespace.table` (namespaces may nest).
fn is_qualified(table: &str) -> bool {
    let parts: Vec<&str> = table.split('.').collect();
    parts.len() >= 2 && parts.iter().all(|p| !p.trim().is_empty())
}

/// Kafka Connect's partition-by: comma-separated partition expressions (`day(ts)`,
/// `bucket(id, 16)`), as `option` gives them.
fn partition_fields(option: &str, value: &str) -> Result<Vec<PartitionField>> {
    opts::split_expressions(value)
        .iter()
        .map(|p| PartitionField::parse(p).map_err(|e| Error::config(option, e.message())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<FloeConfig> {
        FloeConfig::from_raw(parse(text, false)?, Path::new("/cfg"))
    }

    const MINIMAL: &str = "[source]\nfolder = \"bucket\"\n[iceberg]\ncatalog.uri = \"c.db\"\ncatalog.warehouse = \"wh\"\n[[routes]]\ntable = \"demo.t\"\n";

    #[test]
    fn names_match_case_insensitively_unless_the_tables_or_the_route_say_exact() {
        use floe_decode::Names;
        let names = |iceberg: &str, route: &str| {
            let text = MINIMAL
                .replace("[iceberg]\n", &format!("[iceberg]\n{iceberg}"))
                .replace(
                    "table = \"demo.t\"\n",
                    &format!("table = \"demo.t\"\n{route}"),
                );
            load(&text).unwrap().routes[0].names
        };
        assert_eq!(names("", ""), Names::CaseInsensitive);
        let exact = "tables.schema-case-insensitive = false\n";
        assert_eq!(names(exact, ""), Names::Exact);
        assert_eq!(
            names(exact, "schema.case-insensitive = true\n"),
            Names::CaseInsensitive
        );
        assert_eq!(names("", "schema.case-insensitive = false\n"), Names::Exact);
        let e = load(&MINIMAL.replace(
            "[iceberg]\n",
            "[iceberg]\ntables.schema-case-insensitive = \"maybe\"\n",
        ))
        .unwrap_err();
        assert!(e.to_string().contains("schema-case-insensitive"), "{e}");
    }

    #[test]
    fn on_change_replaces_in_records_mode_appends_elsewhere_and_refuses_what_cannot_be() {
        let route = |extra: &str| {
            load(&MINIMAL.replace(
                "table = \"demo.t\"\n",
                &format!("table = \"demo.t\"\n{extra}"),
            ))
        };
        let on = |extra: &str| route(extra).unwrap().routes[0].on_change;
        assert_eq!(on(""), OnChange::Replace);
        assert_eq!(on("on-change = \"append\"\n"), OnChange::Append);
        assert_eq!(on("mode = \"metadata\"\n"), OnChange::Append);
        assert_eq!(
            on("mode = \"metadata\"\non-change = \"replace\"\n"),
            OnChange::Replace
        );
        // Rows that change by key are replaced by their key.
        assert_eq!(
            on("cdc-field = \"op\"\nid-columns = [\"id\"]\n"),
            OnChange::Append
        );
        let e = route("cdc-field = \"op\"\nid-columns = [\"id\"]\non-change = \"replace\"\n")
            .unwrap_err();
        assert!(e.to_string().contains("routes[0].on-change"), "{e}");
        let e = route("on-change = \"mirror\"\n").unwrap_err();
        assert!(e.to_string().contains("expected replace or append"), "{e}");
    }

    /// [`MINIMAL`] with `iceberg` added to its `[iceberg]` and `route` to its route.
    fn with(iceberg: &str, route: &str) -> Result<FloeConfig> {
        load(
            &MINIMAL
                .replace(
                    "catalog.warehouse = \"wh\"\n",
                    &format!("catalog.warehouse = \"wh\"\n{iceberg}"),
                )
                .replace(
                    "table = \"demo.t\"\n",
                    &format!("table = \"demo.t\"\n{route}"),
                ),
        )
    }

    #[test]
    fn upserts_take_the_kafka_connect_names_and_need_id_columns() {
        let c = with(
            "tables.upsert-mode-enabled = true\ntables.default-id-columns = \"id\"\ntables.cdc-field = \"op\"\n",
            "",
        )
        .unwrap();
        let changes = c.routes[0].changes.clone().unwrap();
        assert_eq!(changes.id_columns, ["id"]);
        assert_eq!(changes.cdc_field.as_deref(), Some("op"));
        assert!(changes.upsert);
        // A table's own id columns win over the default; a route's over both.
        let c = with(
            "tables.upsert-mode-enabled = true\ntables.default-id-columns = \"id\"\ntable.demo.t.id-columns = \"a, b\"\n",
            "",
        )
        .unwrap();
        assert_eq!(c.routes[0].changes.as_ref().unwrap().id_columns, ["a", "b"]);
        let c = with("tables.cdc-field = \"op\"\n", "id-columns = [\"k\"]\n").unwrap();
        let changes = c.routes[0].changes.clone().unwrap();
        assert_eq!(
            (changes.id_columns, changes.upsert),
            (vec!["k".to_owned()], false)
        );
        // Neither upsert mode nor a cdc field: plain appends.
        assert!(
            with("tables.default-id-columns = \"id\"\n", "")
                .unwrap()
                .routes[0]
                .changes
                .is_none()
        );
        let e = with("tables.upsert-mode-enabled = true\n", "").unwrap_err();
        assert!(e.to_string().contains("id-columns"), "{e}");
        let e = with("table.demo.t.route-regex = \"b\"\n", "").unwrap_err();
        assert!(
            e.to_string().contains("iceberg.table.demo.t.route-regex"),
            "{e}"
        );
        let e = with(
            "",
            "upsert = true\nid-columns = \"id\"\nmode = \"metadata\"\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("records mode"), "{e}");
    }

    #[test]
    fn commit_branches_take_the_kafka_connect_names() {
        let append = "on-change = \"append\"\n";
        let c = with("tables.default-commit-branch = \"audit\"\n", append).unwrap();
        assert_eq!(c.commit_branches.of("demo.t"), Some("audit"));
        assert_eq!(c.commit_branches.of("demo.other"), Some("audit"));
        let c = with(
            "tables.default-commit-branch = \"audit\"\ntable.demo.t.commit-branch = \"main\"\n",
            "",
        )
        .unwrap();
        assert_eq!(c.commit_branches.of("demo.t"), None, "a table's own wins");
        assert_eq!(c.commit_branches.of("demo.other"), Some("audit"));
        let c = with("table.demo.t.commit-branch = \"wap\"\n", append).unwrap();
        assert_eq!(c.commit_branches.of("demo.t"), Some("wap"));
        assert_eq!(load(MINIMAL).unwrap().commit_branches.of("demo.t"), None);
        // Replacing (records mode's default) and upserting routes commit to branches too.
        let c = with("tables.default-commit-branch = \"audit\"\n", "").unwrap();
        assert_eq!(c.routes[0].on_change, OnChange::Replace);
        assert_eq!(c.commit_branches.of("demo.t"), Some("audit"));
        let e = with("tables.default-commit-branch = \"a b\"\n", append).unwrap_err();
        assert!(
            e.to_string()
                .contains("iceberg.tables.default-commit-branch"),
            "{e}"
        );
    }

    #[test]
    fn routing_by_a_field_takes_the_kafka_connect_names_and_appends_only() {
        let dynamic = "tables.dynamic-enabled = true\ntables.route-field = \"kind\"\n";
        let c = with(dynamic, "").unwrap();
        assert_eq!(c.routes[0].route_field.as_deref(), Some("kind"));
        assert_eq!(
            c.routes[0].on_change,
            OnChange::Append,
            "such routes append"
        );
        let c = with("", "route-field = \"t\"\n").unwrap();
        assert_eq!(c.routes[0].route_field.as_deref(), Some("t"));
        assert_eq!(with("", "").unwrap().routes[0].route_field, None);
        let e = with("tables.dynamic-enabled = true\n", "").unwrap_err();
        assert!(e.to_string().contains("iceberg.tables.route-field"), "{e}");
        let e = with("tables.route-field = \"kind\"\n", "").unwrap_err();
        assert!(e.to_string().contains("dynamic-enabled"), "{e}");
        for refused in [
            "on-change = \"replace\"\n",
            "cdc-field = \"op\"\nid-columns = [\"id\"]\n",
            "mode = \"metadata\"\n",
        ] {
            let e = with(dynamic, refused).unwrap_err();
            assert!(
                e.to_string().contains("routes[0].route-field"),
                "{refused}: {e}"
            );
        }
        // `iceberg.tables` naming several tables, no [[routes]]: every record to each. (TOML
        // holds `tables` beside `tables.*` keys only quoted; a .properties file has no such
        // limit.)
        let several = |extra: &str| {
            load(&format!(
                "[source]\nfolder = \"bucket\"\n[iceberg]\ntables = \"ev.a, ev.b\"\n{extra}"
            ))
        };
        let c = several("").unwrap();
        assert_eq!(c.routes[0].table, "ev.a");
        assert_eq!(c.routes[0].also_tables, ["ev.b"]);
        assert_eq!(c.routes[0].on_change, OnChange::Append);
        let e = several("\"tables.cdc-field\" = \"op\"\n\"tables.default-id-columns\" = \"id\"\n")
            .unwrap_err();
        assert!(e.to_string().contains("iceberg.tables"), "{e}");
    }

    #[test]
    fn static_routing_takes_route_regex_and_partition_by_takes_the_kafka_connect_names() {
        // Kafka Connect's properties: iceberg.tables, the route field, a regex per table.
        let props = "source.folder = bucket\n\
                     iceberg.catalog.uri = c.db\niceberg.catalog.warehouse = wh\n\
                     iceberg.tables = ev.list, ev.create\n\
                     iceberg.tables.route-field = type\n\
                     iceberg.table.ev.list.route-regex = list|ls\n\
                     iceberg.table.ev.create.route-regex = create\n\
                     iceberg.tables.default-partition-by = bucket(id, 16),day(ts)\n\
                     iceberg.table.ev.create.partition-by = region\n";
        let c = FloeConfig::from_raw(parse(props, true).unwrap(), Path::new("/cfg")).unwrap();
        let r = &c.routes[0];
        assert_eq!(r.table, "ev.list");
        assert_eq!(r.also_tables, ["ev.create"]);
        assert_eq!(r.route_field.as_deref(), Some("type"));
        assert_eq!(r.on_change, OnChange::Append);
        let regex = |t: &str| &r.route_regex.iter().find(|(n, _)| n == t).unwrap().1;
        assert!(regex("ev.list").matches("ls"));
        assert!(
            !regex("ev.list").matches("lists"),
            "the whole value must match"
        );
        assert!(regex("ev.create").matches("create"));
        // The route's table takes the default partitioning; the per-table one is for ev.create.
        let names: Vec<&str> = r.partition_by.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["id_bucket", "ts_day"]);
        let with_props = |extra: &str| {
            FloeConfig::from_raw(
                parse(&format!("{props}{extra}"), true).unwrap(),
                Path::new("/cfg"),
            )
        };
        let e = with_props("iceberg.table.ev.other.route-regex = x\n").unwrap_err();
        assert!(
            e.to_string().contains("iceberg.table.ev.other.route-regex"),
            "{e}"
        );
        let e = with_props("iceberg.table.ev.list.route-regex = (\n").unwrap_err();
        assert!(e.to_string().contains("route-regex.ev.list"), "{e}");
        let missing = props.replace("iceberg.table.ev.create.route-regex = create\n", "");
        let e =
            FloeConfig::from_raw(parse(&missing, true).unwrap(), Path::new("/cfg")).unwrap_err();
        assert!(
            e.to_string()
                .contains("iceberg.table.ev.create.route-regex"),
            "{e}"
        );
        // A TOML route: route-field with a regex per table; `table` (no regex) takes the rest.
        let c = with(
            "",
            "route-field = \"kind\"\nroute-regex = { \"demo.a\" = \"a.*\", \"demo.b\" = \"b\" }\n",
        )
        .unwrap();
        let r = &c.routes[0];
        assert_eq!(r.route_regex.len(), 2);
        assert_eq!(r.on_change, OnChange::Append);
        let e = with("", "route-regex.demo.a = \"a\"\n").unwrap_err();
        assert!(
            e.to_string().contains("routes[0].route-regex.demo.a"),
            "{e}"
        );
        assert!(e.to_string().contains("route-field"), "{e}");
        // Static routing by the iceberg section applies to iceberg.tables, not [[routes]].
        let e = with("tables.route-field = \"kind\"\n", "").unwrap_err();
        assert!(e.to_string().contains("iceberg.tables.route-field"), "{e}");
        // Per-table and default partition-by reach a [[routes]] table without its own.
        let c = with("table.demo.t.partition-by = \"truncate(name, 4)\"\n", "").unwrap();
        assert_eq!(c.routes[0].partition_by[0].name, "name_trunc");
        let c = with(
            "tables.default-partition-by = \"hour(ts)\"\n",
            "partition-by = \"day(ts), bucket(16, id)\"\n",
        )
        .unwrap();
        let names: Vec<&str> = c.routes[0]
            .partition_by
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(names, ["ts_day", "id_bucket"], "the route's own wins");
        let e = with("tables.default-partition-by = \"fortnight(ts)\"\n", "").unwrap_err();
        assert!(
            e.to_string()
                .contains("iceberg.tables.default-partition-by"),
            "{e}"
        );
    }

    #[test]
    fn minimal_config_gets_the_defaults() {
        let c = load(MINIMAL).unwrap();
        let SourceConfig::Local { folder, bucket, .. } = &c.source else {
            panic!("the default source is local")
        };
        assert_eq!(folder, Path::new("/cfg/bucket"));
        assert_eq!(bucket, "bucket");
        assert_eq!(c.catalog.name, "floe");
        assert_eq!(c.commit.interval_ms, 60_000);
        assert_eq!(c.routes[0].mode, Mode::Records);
        assert_eq!(c.routes[0].on_error, OnError::DeadLetter);
        assert_eq!(c.routes[0].name, "route0");
        let CheckpointConfig::Sqlite { path } = &c.checkpoint else {
            panic!("the default checkpoint is sqlite")
        };
        assert_eq!(path, Path::new("/cfg/checkpoint.db"));
    }

    #[test]
    fn errors_name_the_option() {
        let cases = [
            ("[source]\nfolder = \"b\"\ncolour = 1\n", "source.colour"),
            ("[source]\ntype = \"ftp\"\n", "source.type"),
            ("[sourc]\n", "sourc"),
            ("[ingest]\nbatch-rows = 0\n", "ingest.batch-rows"),
            (
                "[[routes]]\ntable = \"a.b\"\nmode = \"rows\"\n",
                "routes[0].mode",
            ),
            (
                "[[routes]]\ntable = \"a.b\"\npartition-by = [\"fortnight(ts)\"]\n",
                "routes[0].partition-by",
            ),
            ("[[routes]]\nmode = \"records\"\n", "routes[0].table"),
            (
                "[[routes]]\ntable = \"a.b\"\ncolumns = [\"key\"]\n",
                "routes[0].columns",
            ),
            (
                "[[routes]]\ntable = \"a.b\"\nschema = \"{\\\"fields\\\": 1}\"\n",
                "routes[0].schema",
            ),
            (
                "[iceberg]\ncatalog.type = \"hive\"\n",
                "iceberg.catalog.type",
            ),
        ];
        for (extra, option) in cases {
            let text = if extra.starts_with("[source]") {
                format!("{extra}[[routes]]\ntable = \"a.b\"\n")
            } else if extra.starts_with("[[routes]]") {
                format!("[source]\nfolder = \"b\"\n{extra}")
            } else {
                format!("[source]\nfolder = \"b\"\n{extra}[[routes]]\ntable = \"a.b\"\n")
            };
            let err = load(&text).unwrap_err();
            assert!(err.to_string().contains(option), "{option}: {err}");
            assert_eq!(err.kind(), floe_core::ErrorKind::Config, "{option}");
        }
    }

    #[test]
    fn kafka_connect_commit_names_and_inline_schema() {
        let c = load(&format!(
            "{MINIMAL}[iceberg.control.commit]\ninterval-ms = \"5000\"\n"
        ))
        .unwrap();
        assert_eq!(c.commit.interval_ms, 5000);
        let c = load(
            "[source]\nfolder = \"b\"\n[[routes]]\ntable = \"a.b\"\nformat = \"tsv\"\ncsv.header = false\n\
             schema = '{\"fields\":[{\"name\":\"id\",\"type\":\"long\"}]}'\n",
        )
        .unwrap();
        let r = &c.routes[0];
        assert_eq!(r.schema.as_ref().unwrap().fields[0].name, "id");
        let Some(Format::Csv(csv)) = &r.format else {
            panic!("tsv is csv")
        };
        assert_eq!((csv.delimiter, csv.header), (b'\t', false));
    }
}
