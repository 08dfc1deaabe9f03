//! Orphan-file removal, the last step of `floe maintain`: list a table's location, keep what
//! the table's metadata reaches and what the checkpoint table still names, delete the rest
//! once it is older than a safe age (the decision: [`floe_iceberg::orphans`]).
//!
//! | a file under the table's location | kept because |
//! |---|---|
//! | reached from the current metadata (data, deletes, manifests, lists, metadata log, statistics) | the table reads it |
//! | named by a `batch/` record that is running or staged | a commit will add it |
//! | modified within `--orphans-older-than-hours` (default 72, at least 24) | a running batch may have written it without recording it yet; a commit may be writing it |
//! | anything else | removed: files of expired snapshots, metadata that fell off the log, files of a crashed compaction, files of abandoned batches |
//!
//! It runs under the table's commit lease, after compaction and expiry, so no committer adds
//! to the table meanwhile; files a commit in another process writes without the lease (none
//! does today) would be protected by the age alone.
//!
//! A staging table (a route whose only target is MaxCompute, [`super::staging`]) has no
//! snapshots and its landed files are deleted by the MaxCompute committer: every file under its
//! `data/` that no live batch names is an abandoned batch's, removed once old enough
//! ([`remove_staging_orphans`], run by `floe maintain` without `--table`).
//!
//! Where the location is: a folder (`file://` or a bare path) is walked; `s3://` and `oss://`
//! locations are listed through floe's object store with the table's FileIO properties
//! (`s3.endpoint`, `s3.region` / `client.region`, `s3.path-style-access`, keys; none: the
//! provider's default chain). S3 Tables and OSS Tables buckets remove unreferenced files
//! themselves (their `icebergUnreferencedFileRemoval`), and cannot be listed: floe leaves
//! them alone, whether reached through the `s3tables` catalog or a REST catalog signing as
//! `s3tables` or `osstables`.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use floe_checkpoint::StoreExt;
use floe_core::{Error, Provider, Result};
use floe_iceberg::orphans::{ListedFile, referenced_files, select};
use floe_storage::{ObjectStore, S3Store, S3StoreConfig};
use iceberg::table::Table;

use crate::protocol::records::BatchRecord;

/// The least age `--orphans-older-than-hours` accepts: younger files may belong to a batch
/// still writing, which records its files only when it stages.
pub const MIN_ORPHAN_AGE_HOURS: f64 = 24.0;

/// What orphan removal did to one table.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct OrphanReport {
    /// Files listed under the location.
    pub listed: usize,
    /// Files removed, and their bytes.
    pub removed: usize,
    pub removed_bytes: u64,
    /// Unreferenced files kept because a live batch names them.
    pub protected: usize,
}

/// Where a table's files are, and how to list and delete them.
enum Location {
    Folder(PathBuf),
    Bucket {
        store: Arc<dyn ObjectStore>,
        /// `s3` or `oss`: the scheme paths are written with.
        scheme: &'static str,
        /// The key prefix of the location, ending in `/`.
        prefix: String,
    },
}

impl Location {
    /// The storage of `table`'s location (below it, `sub` only, when not empty), with its
    /// FileIO's properties.
    async fn of(table: &Table, sub: &str) -> Result<Location> {
        let location = table.metadata().location().trim_end_matches('/');
        let location = if sub.is_empty() {
            location.to_owned()
        } else {
            format!("{location}/{sub}")
        };
        let location = location.as_str();
        if location.starts_with('/') || location.starts_with("file:") {
            return Ok(Location::Folder(PathBuf::from(
                floe_iceberg::orphans::normal(location),
            )));
        }
        let (scheme, rest) = location
            .split_once("://")
            .ok_or_else(|| Error::invalid_input(format!("table location `{location}`")))?;
        let (provider, scheme) = match scheme.to_ascii_lowercase().as_str() {
            "s3" | "s3a" | "s3n" => (Provider::S3, "s3"),
            "oss" => (Provider::Oss, "oss"),
            other => {
                return Err(Error::new(
                    floe_core::ErrorKind::Unsupported,
                    format!("table location `{location}`: floe cannot list `{other}` storage"),
                ));
            }
        };
        let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
        let config = store_config(provider, bucket, table.file_io().config().props())?;
        let store = S3Store::new(config).await?;
        Ok(Location::Bucket {
            store: Arc::new(store),
            scheme,
            prefix: if key.is_empty() {
                String::new()
            } else {
                format!("{key}/")
            },
        })
    }

    async fn list(&self) -> Result<Vec<ListedFile>> {
        match self {
            Location::Folder(root) => {
                let root = root.clone();
                tokio::task::spawn_blocking(move || walk(&root))
                    .await
                    .map_err(|e| Error::unexpected(format!("listing stopped: {e}")))?
            }
            Location::Bucket {
                store,
                scheme,
                prefix,
            } => {
                let mut out = Vec::new();
                let mut token = None;
                loop {
                    let page = store.list(prefix, token.as_deref(), 1000).await?;
                    for o in page.objects {
                        out.push(ListedFile {
                            path: format!("{scheme}://{}/{}", store.bucket(), o.key),
                            size: o.size,
                            modified_ms: o.last_modified.map_or(i64::MAX, |t| t.timestamp_millis()),
                        });
                    }
                    match page.next_token {
                        Some(t) => token = Some(t),
                        None => break,
                    }
                }
                Ok(out)
            }
        }
    }

    async fn delete(&self, path: &str) -> Result<()> {
        match self {
            Location::Folder(_) => match tokio::fs::remove_file(path).await {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(Error::from(e).while_doing(format!("failed to remove {path}"))),
            },
            Location::Bucket { store, scheme, .. } => {
                let key = path
                    .strip_prefix(&format!("{scheme}://{}/", store.bucket()))
                    .ok_or_else(|| Error::unexpected(format!("{path} is not in the bucket")))?;
                store.delete(key).await
            }
        }
    }
}

/// The object-store configuration for `bucket` from FileIO properties (iceberg's names): the
/// mapping the table's own FileIO uses ([`floe_iceberg::rest::s3_storage::store_config`]).
fn store_config(
    provider: Provider,
    bucket: &str,
    props: &HashMap<String, String>,
) -> Result<S3StoreConfig> {
    floe_iceberg::rest::s3_storage::store_config(provider == Provider::Oss, bucket, props)
}

/// Every file under `root`, recursively (a missing folder has none).
fn walk(root: &Path) -> Result<Vec<ListedFile>> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(Error::from(e).while_doing(format!("failed to list {}", dir.display())));
            }
        };
        for entry in entries {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                dirs.push(entry.path());
            } else if meta.is_file() {
                let modified_ms = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(i64::MAX, |d| d.as_millis() as i64);
                out.push(ListedFile {
                    path: entry.path().to_string_lossy().into_owned(),
                    size: meta.len(),
                    modified_ms,
                });
            }
        }
    }
    Ok(out)
}

/// The files live batches name ([`crate::protocol::batch::named_files`]).
pub(crate) async fn batch_files(
    checkpoint: &dyn floe_checkpoint::CheckpointStore,
) -> Result<BTreeSet<String>> {
    let prefix = crate::protocol::records::batch_key("");
    let batches = checkpoint.scan_json::<BatchRecord>(&prefix).await?;
    Ok(crate::protocol::batch::named_files(
        batches.iter().map(|(_, b, _)| b),
    ))
}

/// Remove `table`'s orphan files older than `older_than_ms` (ms since the epoch), keeping
/// those in `protected`.
pub(crate) async fn remove_orphans(
    table: &Table,
    protected: &BTreeSet<String>,
    older_than_ms: i64,
    faults: &crate::fault::Faults,
) -> Result<OrphanReport> {
    let location = Location::of(table, "").await?;
    let listed = location.list().await?;
    let referenced = referenced_files(table).await?;
    remove_listed(
        &location,
        &listed,
        &referenced,
        protected,
        older_than_ms,
        faults,
    )
    .await
}

/// Remove the orphan files of a staging table (a route whose only target is MaxCompute, see
/// [`super::staging`]): it has no snapshots, so every file under its `data/` that no live
/// batch names is one, once older than `older_than_ms` (the MaxCompute committer deletes the
/// files it landed; these are abandoned batches').
pub(crate) async fn remove_staging_orphans(
    table: &Table,
    protected: &BTreeSet<String>,
    older_than_ms: i64,
    faults: &crate::fault::Faults,
) -> Result<OrphanReport> {
    let location = Location::of(table, "data").await?;
    let listed = location.list().await?;
    remove_listed(
        &location,
        &listed,
        &BTreeSet::new(),
        protected,
        older_than_ms,
        faults,
    )
    .await
}

async fn remove_listed(
    location: &Location,
    listed: &[ListedFile],
    referenced: &BTreeSet<String>,
    protected: &BTreeSet<String>,
    older_than_ms: i64,
    faults: &crate::fault::Faults,
) -> Result<OrphanReport> {
    let chosen = select(listed, referenced, protected, older_than_ms);
    let unreferenced = select(listed, referenced, &BTreeSet::new(), older_than_ms).len();
    let mut report = OrphanReport {
        listed: listed.len(),
        protected: unreferenced - chosen.len(),
        ..Default::default()
    };
    for f in chosen {
        location.delete(&f.path).await?;
        tracing::debug!(path = %f.path, "removed an orphan file");
        report.removed += 1;
        report.removed_bytes += f.size;
        faults.hit("maintain.after-orphan").await;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_bucket_location_is_reached_as_the_tables_file_io_reaches_it() {
        let c = store_config(
            Provider::S3,
            "wh",
            &props(&[
                ("s3.endpoint", "http://127.0.0.1:9000"),
                ("s3.access-key-id", "AK"),
                ("s3.secret-access-key", "SK"),
                ("client.region", "us-east-1"),
            ]),
        )
        .unwrap();
        assert_eq!(c.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert!(c.path_style, "an IP endpoint means path style");
        assert_eq!(c.region.as_deref(), Some("us-east-1"));
        assert_eq!(c.access_key_id.as_deref(), Some("AK"));
        let c = store_config(
            Provider::S3,
            "wh",
            &props(&[
                ("s3.endpoint", "http://localhost:9000"),
                ("s3.path-style-access", "false"),
            ]),
        )
        .unwrap();
        assert!(!c.path_style, "the properties win");
        let c = store_config(
            Provider::Oss,
            "wh",
            &props(&[("client.region", "cn-hangzhou")]),
        )
        .unwrap();
        assert_eq!(
            c.endpoint.as_deref(),
            Some("https://oss-cn-hangzhou.aliyuncs.com")
        );
        assert!(!c.path_style);
        let e = store_config(Provider::Oss, "wh", &props(&[])).unwrap_err();
        assert!(e.to_string().contains("s3.endpoint"), "{e}");
    }

    /// A table on `s3://` (s3s-fs): its location is listed and its orphans deleted through the
    /// object store its FileIO properties describe; what the metadata reaches, what a live batch
    /// names and what is younger than the age stay.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn orphans_of_a_table_in_a_bucket_are_listed_and_removed_there() {
        use floe_testbed::servers::S3sFs;
        use iceberg::spec::{
            NestedField, PrimitiveType, Schema, SortOrder, TableMetadataBuilder, Type,
            UnboundPartitionSpec,
        };
        let s3 = S3sFs::start().await.expect("start s3s-fs");
        s3.create_bucket("lake").unwrap();
        let file_props = props(&[
            ("s3.endpoint", &s3.endpoint()),
            ("s3.region", S3sFs::REGION),
            ("s3.path-style-access", "true"),
            ("s3.access-key-id", S3sFs::ACCESS_KEY_ID),
            ("s3.secret-access-key", S3sFs::SECRET_ACCESS_KEY),
        ]);
        let location = "s3://lake/wh/t";
        let io = floe_iceberg::rest::table_file_io(location, &file_props).unwrap();
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::optional(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            ])
            .build()
            .unwrap();
        let metadata = TableMetadataBuilder::new(
            schema,
            UnboundPartitionSpec::builder().build(),
            SortOrder::unsorted_order(),
            location.to_owned(),
            iceberg::spec::FormatVersion::V2,
            HashMap::new(),
        )
        .unwrap()
        .build()
        .unwrap()
        .metadata;
        let current = format!("{location}/metadata/00001-a.metadata.json");
        let table = Table::builder()
            .metadata(metadata)
            .metadata_location(current.clone())
            .identifier(iceberg::TableIdent::from_strs(["ns", "t"]).unwrap())
            .file_io(io.clone())
            .runtime(iceberg::Runtime::try_current().unwrap())
            .build()
            .unwrap();
        let path = |name: &str| format!("{location}/{name}");
        let names = [
            "metadata/00001-a.metadata.json",
            "data/abandoned.parquet",
            "data/staged.parquet",
            "data/young.parquet",
            "metadata/00000-expired.metadata.json",
        ];
        for name in names {
            let out = io.new_output(path(name)).unwrap();
            out.write(bytes::Bytes::from_static(b"x")).await.unwrap();
        }
        // Two days old on s3s-fs's disk, but for the young file.
        let two_days = std::time::Duration::from_secs(48 * 3600);
        for name in names.iter().filter(|n| !n.contains("young")) {
            let file = std::fs::File::options()
                .write(true)
                .open(s3.root().join("lake/wh/t").join(name))
                .unwrap();
            file.set_modified(std::time::SystemTime::now() - two_days)
                .unwrap();
        }
        let protected = BTreeSet::from([path("data/staged.parquet")]);
        let day_ago = chrono::Utc::now().timestamp_millis() - 24 * 3600 * 1000;
        let report = remove_orphans(&table, &protected, day_ago, &Default::default())
            .await
            .unwrap();
        assert_eq!(
            (report.listed, report.removed, report.protected),
            (5, 2, 1),
            "{report:?}"
        );
        let mut left = Vec::new();
        for name in names {
            if io.exists(path(name)).await.unwrap() {
                left.push(name);
            }
        }
        assert_eq!(
            left,
            [
                "metadata/00001-a.metadata.json",
                "data/staged.parquet",
                "data/young.parquet"
            ]
        );
    }
}
