//! The pipeline's dependencies, built once and shared by ingest and commit.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use floe_checkpoint::{CheckpointStore, SqliteStore};
use floe_core::{ObjectChange, Result};
use floe_storage::{LocalStore, ObjectStore, PrefixedStore};
use iceberg::Catalog;

use crate::config::{CheckpointConfig, DeadLetterConfig, FloeConfig, SourceConfig};
use crate::fault::Faults;
use crate::ingest::route::Router;
use crate::protocol::records::Owner;
use crate::sources::CloudSource;
use crate::sources::stores::{BucketStores, open_object_store_checkpoint, open_s3};
use crate::targets::commit::CommitReport;
use crate::targets::{Committer, TargetId};

/// Finds the object store holding a changed object.
pub trait StoreResolver: Send + Sync + fmt::Debug {
    /// The store for `change`'s bucket.
    fn store(&self, change: &ObjectChange) -> Result<Arc<dyn ObjectStore>>;
}

/// One store for every change (a local folder, or a single-bucket source).
#[derive(Debug)]
pub struct SingleStore(pub Arc<dyn ObjectStore>);

impl StoreResolver for SingleStore {
    fn store(&self, _change: &ObjectChange) -> Result<Arc<dyn ObjectStore>> {
        Ok(self.0.clone())
    }
}

/// What progress reports.
#[derive(Debug, Clone, Copy)]
pub enum ProgressEvent<'a> {
    /// Bytes of an object read so far (reported about every 64 MiB).
    Reading {
        /// The object.
        change: &'a ObjectChange,
        /// Bytes read so far.
        read: u64,
    },
    /// An object finished.
    Done {
        /// The object.
        change: &'a ObjectChange,
        /// Objects finished in this batch.
        done: usize,
        /// Objects in this batch.
        total: usize,
        /// Rows the object gave.
        rows: u64,
    },
}

/// Progress callback.
pub type Progress = Arc<dyn Fn(ProgressEvent<'_>) + Send + Sync>;

/// Everything ingest and commit need.
pub struct Pipeline {
    /// The configuration.
    pub config: Arc<FloeConfig>,
    /// The checkpoint table.
    pub checkpoint: Arc<dyn CheckpointStore>,
    /// Where objects are read from.
    pub stores: Arc<dyn StoreResolver>,
    /// Where dead letters go.
    pub dead_letters: Arc<dyn ObjectStore>,
    /// The Iceberg catalog.
    pub catalog: Arc<dyn Catalog>,
    /// The catalog's name (part of target ids).
    pub catalog_name: String,
    /// The routes.
    pub router: Router,
    /// Injected faults (tests).
    pub faults: Faults,
    /// Who this process is.
    pub owner: Owner,
    /// TTL of object records (None: kept forever, as the local folder source needs).
    pub dedupe_ttl: Option<Duration>,
    /// Progress reporting.
    pub progress: Option<Progress>,
    /// The MaxCompute target (`[maxcompute]`), connected on first use.
    pub maxcompute: Option<Arc<crate::targets::maxcompute::MaxComputeTargets>>,
    /// The bucket or queue source (None for a local folder).
    pub cloud: Option<Arc<CloudSource>>,
}

impl fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pipeline")
            .field("catalog", &self.catalog_name)
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

impl Pipeline {
    /// The committer over this pipeline's checkpoint table and targets.
    pub(crate) fn committer(&self) -> Committer<'_> {
        Committer {
            checkpoint: &self.checkpoint,
            catalog: &self.catalog,
            dead_letters: &self.dead_letters,
            faults: &self.faults,
            owner: &self.owner,
            config: &self.config,
            maxcompute: self.maxcompute.as_deref(),
        }
    }

    /// Commit every target with staged batches that is due (`force`: all of them now).
    pub async fn commit(&self, force: bool) -> Result<CommitReport> {
        self.committer().commit(force).await
    }

    /// Staged work waiting per target: (batches, files, rows).
    pub async fn staged_summary(&self) -> Result<BTreeMap<TargetId, (usize, usize, u64)>> {
        self.committer().staged_summary().await
    }

    /// Build the pipeline for a configuration: checkpoint table, source store, catalog.
    pub async fn open(config: FloeConfig) -> Result<Self> {
        let checkpoint: Arc<dyn CheckpointStore> = match &config.checkpoint {
            CheckpointConfig::Sqlite { path } => Arc::new(SqliteStore::open(path).await?),
            CheckpointConfig::ObjectStore {
                provider,
                bucket,
                prefix,
                store,
            } => open_object_store_checkpoint(*provider, bucket, prefix, store).await?,
        };
        let (stores, dedupe_ttl, cloud): (Arc<dyn StoreResolver>, Option<Duration>, _) =
            match &config.source {
                SourceConfig::Local { folder, bucket, .. } => {
                    // A folder that is not there is a mistake in the file (a typo), not an
                    // empty bucket: say so rather than land nothing.
                    if !folder.is_dir() {
                        return Err(floe_core::Error::config(
                            "source.folder",
                            format!("{} is not a folder", folder.display()),
                        ));
                    }
                    let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::new(folder, bucket)?);
                    (Arc::new(SingleStore(store)), None, None)
                }
                SourceConfig::Cloud(c) => {
                    let first = c.listing.as_ref().map(|l| l.bucket.as_str());
                    let stores = BucketStores::open(c.provider, &c.store, first).await?;
                    let ttl = Duration::from_secs(config.ingest.dedupe_ttl_hours * 3600);
                    let source = CloudSource::open(c, checkpoint.clone()).await?;
                    (Arc::new(stores), Some(ttl), Some(Arc::new(source)))
                }
            };
        let dead_letters = open_dead_letters(&config.dead_letter).await?;
        let catalog = floe_iceberg::open_catalog(&config.catalog).await?;
        let router = Router::new(&config.routes)?;
        let maxcompute = config
            .maxcompute
            .clone()
            .map(|c| Arc::new(crate::targets::maxcompute::MaxComputeTargets::new(c)));
        Ok(Pipeline {
            catalog_name: config.catalog.name.clone(),
            config: Arc::new(config),
            checkpoint,
            stores,
            dead_letters,
            catalog,
            router,
            faults: Faults::from_env(),
            owner: crate::host::this_process(),
            dedupe_ttl,
            progress: None,
            maxcompute,
            cloud,
        })
    }
}

/// The dead-letter destination of `[dead-letter]`: a folder, or a prefix of a bucket (nothing of
/// it on local disk then).
pub async fn open_dead_letters(config: &DeadLetterConfig) -> Result<Arc<dyn ObjectStore>> {
    Ok(match config {
        DeadLetterConfig::Local { path } => Arc::new(LocalStore::new(path, "dead-letter")?),
        DeadLetterConfig::ObjectStore {
            provider,
            bucket,
            prefix,
            store,
        } => {
            let bucket_store = open_s3(*provider, bucket, store).await.map_err(|e| {
                e.while_doing(format!(
                    "failed to open the dead-letter bucket {}",
                    config.location()
                ))
            })?;
            Arc::new(PrefixedStore::new(Arc::new(bucket_store), prefix)?)
        }
    })
}
