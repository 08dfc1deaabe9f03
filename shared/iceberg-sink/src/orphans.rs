//! Orphan files: files under a table's location that no metadata of the table names.
//!
//! A table's files are reachable from its current metadata file: the metadata log (earlier
//! metadata files still listed), every snapshot's manifest list, every manifest those lists
//! name, every data and delete file those manifests name (live or marked deleted: an older
//! snapshot may still read it), and the statistics files. Everything else under the location is
//! an orphan: files of snapshots that expiry removed, metadata files that fell off the log,
//! files of a compaction that crashed before its commit, files of an ingest batch that died.
//!
//! Some of those are not orphans yet: a file an ingest batch wrote and staged, whose commit has
//! not run, is named only by the checkpoint table. The caller passes those as `protected`, and
//! an age below which nothing is removed covers files a running batch has written but not yet
//! recorded. [`select`] is the pure decision; listing and deleting are the caller's.
//!
//! Paths are compared in one form ([`normal`]): `file:///a/b` and `/a/b` are the same file, and
//! so are `s3a://`, `s3n://` and `s3://` of one bucket and key.

use std::collections::BTreeSet;

use floe_core::Result;
use iceberg::table::Table;

use crate::catalog::from_iceberg;
use crate::delta::manifest_list;

/// A file found under a table's location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedFile {
    /// Its path, in the form the table's metadata uses (`s3://b/k`, `oss://b/k`, `file:///p`).
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// Last modified, ms since the epoch.
    pub modified_ms: i64,
}

/// The one form paths are compared in (see the module doc).
pub fn normal(path: &str) -> String {
    if let Some(rest) = path.strip_prefix("file://") {
        // `file:///abs` and `file:/abs` (Java's form) are both `/abs`.
        return format!("/{}", rest.trim_start_matches('/'));
    }
    if let Some(rest) = path.strip_prefix("file:") {
        return format!("/{}", rest.trim_start_matches('/'));
    }
    for scheme in ["s3a://", "s3n://"] {
        if let Some(rest) = path.strip_prefix(scheme) {
            return format!("s3://{rest}");
        }
    }
    path.to_owned()
}

/// Every file `table`'s current metadata reaches, in [`normal`] form (see the module doc).
/// Reads each snapshot's manifest list and each distinct manifest once.
pub async fn referenced_files(table: &Table) -> Result<BTreeSet<String>> {
    let metadata = table.metadata();
    let mut out = BTreeSet::new();
    if let Some(location) = table.metadata_location() {
        out.insert(normal(location));
    }
    for log in metadata.metadata_log() {
        out.insert(normal(&log.metadata_file));
    }
    for s in metadata.statistics_iter() {
        out.insert(normal(&s.statistics_path));
    }
    for s in metadata.partition_statistics_iter() {
        out.insert(normal(&s.statistics_path));
    }
    let mut manifests = BTreeSet::new();
    for snapshot in metadata.snapshots() {
        out.insert(normal(snapshot.manifest_list()));
        for manifest in manifest_list(table, snapshot).await?.entries() {
            if !manifests.insert(manifest.manifest_path.clone()) {
                continue;
            }
            out.insert(normal(&manifest.manifest_path));
            let loaded = manifest.load_manifest(table.file_io()).await.map_err(|e| {
                from_iceberg(e).while_doing(format!(
                    "failed to read manifest {}",
                    manifest.manifest_path
                ))
            })?;
            for entry in loaded.entries() {
                out.insert(normal(entry.file_path()));
            }
        }
    }
    Ok(out)
}

/// The orphans among `listed`: named neither by the table (`referenced`) nor by the checkpoint
/// table (`protected`, any form), and last modified before `older_than_ms`.
pub fn select<'a>(
    listed: &'a [ListedFile],
    referenced: &BTreeSet<String>,
    protected: &BTreeSet<String>,
    older_than_ms: i64,
) -> Vec<&'a ListedFile> {
    let protected: BTreeSet<String> = protected.iter().map(|p| normal(p)).collect();
    listed
        .iter()
        .filter(|f| f.modified_ms < older_than_ms)
        .filter(|f| {
            let p = normal(&f.path);
            !referenced.contains(&p) && !protected.contains(&p)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, modified_ms: i64) -> ListedFile {
        ListedFile {
            path: path.into(),
            size: 1,
            modified_ms,
        }
    }

    #[test]
    fn paths_compare_in_one_form() {
        assert_eq!(normal("file:///w/t/data/a.parquet"), "/w/t/data/a.parquet");
        assert_eq!(normal("file:/w/t/data/a.parquet"), "/w/t/data/a.parquet");
        assert_eq!(normal("/w/t/data/a.parquet"), "/w/t/data/a.parquet");
        assert_eq!(normal("s3a://b/t/a.parquet"), "s3://b/t/a.parquet");
        assert_eq!(normal("s3n://b/t/a.parquet"), "s3://b/t/a.parquet");
        assert_eq!(normal("oss://b/t/a.parquet"), "oss://b/t/a.parquet");
    }

    #[test]
    fn only_old_files_named_by_nobody_are_orphans() {
        let listed = vec![
            file("/w/t/data/live.parquet", 10),
            file("/w/t/data/staged.parquet", 10),
            file("/w/t/data/gone.parquet", 10),
            file("/w/t/data/fresh.parquet", 100),
            file("/w/t/metadata/00001.metadata.json", 10),
        ];
        let referenced = BTreeSet::from(["/w/t/data/live.parquet".to_owned()]);
        let protected = BTreeSet::from(["file:///w/t/data/staged.parquet".to_owned()]);
        let chosen: Vec<&str> = select(&listed, &referenced, &protected, 50)
            .iter()
            .map(|f| f.path.as_str())
            .collect();
        assert_eq!(
            chosen,
            vec![
                "/w/t/data/gone.parquet",
                "/w/t/metadata/00001.metadata.json"
            ]
        );
    }
}
