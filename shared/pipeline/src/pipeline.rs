//! The pipeline's dependencies, built once and shared by ingest and commit.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use floe_checkpoint::{CheckpointStore, SqliteStore};
use floe_core::{ObjectChange, Result};
use floe_iceberg::FloeCatalog;
use floe_storage::{LocalStore, ObjectStore, PrefixedStore};

use crate::config::{CheckpointConfig, DeadLetterConfig, FloeConfig, SourceConfig};
use crate::fault::Faults;
use crate::ingest::route::Router;
use crate::protocol::records::Owner;
use crate::sources::stores::{
    BucketStores, SingleStore, StoreResolver, open_object_store_checkpoint, open_s3,
};
use crate::sources::{CloudSource, QueueOpener};
use crate::targets::commit::CommitReport;
use crate::targets::staging::{StagingArea, StagingCatalog};
use crate::targets::{Committer, TargetId};

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

/// Everything ingest and commit need, built once per process by [`Pipeline::open`] or
/// [`Pipeline::builder`].
pub struct Pipeline {
    pub(crate) config: Arc<FloeConfig>,
    pub(crate) checkpoint: Arc<dyn CheckpointStore>,
    /// Where objects are read from.
    pub(crate) stores: Arc<dyn StoreResolver>,
    pub(crate) dead_letters: Arc<dyn ObjectStore>,
    pub(crate) catalog: Arc<dyn FloeCatalog>,
    /// The staging tables of routes whose only target is MaxCompute (None when no route is).
    pub(crate) staging: Option<Arc<StagingCatalog>>,
    /// The catalog's name (part of target ids).
    pub(crate) catalog_name: String,
    pub(crate) router: Router,
    /// Injected faults (tests).
    pub(crate) faults: Faults,
    /// Who this process is (batch and lease owner).
    pub(crate) owner: Owner,
    /// TTL of object records (None: kept forever, as the local folder source needs).
    pub(crate) dedupe_ttl: Option<Duration>,
    pub(crate) progress: Option<Progress>,
    /// The `[maxcompute]` targets, connected on first use.
    pub(crate) maxcompute: Option<Arc<crate::targets::maxcompute::MaxComputeTargets>>,
    /// The bucket or queue source (None for a local folder).
    pub(crate) cloud: Option<Arc<CloudSource>>,
    /// When this process last asked whether the scheduled purge is due (see the committer).
    pub(crate) purge_asked: std::sync::Mutex<Option<std::time::Instant>>,
}

/// Builds a [`Pipeline`]: every part from the configuration unless given.
pub struct PipelineBuilder {
    config: FloeConfig,
    checkpoint: Option<Arc<dyn CheckpointStore>>,
    catalog: Option<Arc<dyn FloeCatalog>>,
    faults: Option<Faults>,
    progress: Option<Progress>,
    /// How a configured queue's client is opened; None: never (see
    /// [`Pipeline::open_without_queue_clients`]).
    queues: Option<QueueOpener>,
}

impl PipelineBuilder {
    /// Use this checkpoint table instead of `[checkpoint]`'s.
    pub fn checkpoint(mut self, checkpoint: Arc<dyn CheckpointStore>) -> Self {
        self.checkpoint = Some(checkpoint);
        self
    }

    /// Use this catalog instead of opening `[iceberg]`'s.
    pub fn catalog(mut self, catalog: Arc<dyn FloeCatalog>) -> Self {
        self.catalog = Some(catalog);
        self
    }

    /// Inject these faults (tests) instead of those `FLOE_FAULT` names.
    pub fn faults(mut self, faults: Faults) -> Self {
        self.faults = Some(faults);
        self
    }

    /// Report progress to `progress`.
    pub fn progress(mut self, progress: Progress) -> Self {
        self.progress = Some(progress);
        self
    }

    /// Open what was not given (checkpoint table, source stores and queue, dead-letter store,
    /// catalog); no request is made to the targets.
    pub async fn build(self) -> Result<Pipeline> {
        let config = self.config;
        let checkpoint = async {
            Ok::<Arc<dyn CheckpointStore>, floe_core::Error>(
                match (self.checkpoint, &config.checkpoint) {
                    (Some(c), _) => c,
                    (None, CheckpointConfig::Sqlite { path }) => {
                        Arc::new(SqliteStore::open(path).await?)
                    }
                    (
                        None,
                        CheckpointConfig::ObjectStore {
                            provider,
                            bucket,
                            prefix,
                            store,
                        },
                    ) => open_object_store_checkpoint(*provider, bucket, prefix, store).await?,
                },
            )
        };
        let catalog = async {
            Ok::<Arc<dyn FloeCatalog>, floe_core::Error>(match self.catalog {
                Some(c) => c,
                None if !config.opens_iceberg_catalog() => {
                    Arc::new(crate::targets::staging::NoIcebergCatalog)
                }
                None => floe_iceberg::open_catalog(&config.catalog).await?,
            })
        };
        // Each opening waits mostly on its own database or store (a local catalog and
        // checkpoint table each create their tables, with their syncs): together, not one
        // after the other.
        let (checkpoint, catalog) = tokio::try_join!(checkpoint, catalog)?;
        let (stores, dedupe_ttl, cloud) = open_source(&config, &checkpoint, self.queues).await?;
        let dead_letters = open_dead_letters(&config.dead_letter).await?;
        let router = Router::new(&config.routes)?;
        let staging = if config.stages_without_iceberg() {
            let area = StagingArea::from_config(&config)?;
            Some(Arc::new(StagingCatalog::new(checkpoint.clone(), area)))
        } else {
            None
        };
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
            staging,
            router,
            faults: self.faults.unwrap_or_else(Faults::from_env),
            owner: crate::host::this_process(),
            dedupe_ttl,
            progress: self.progress,
            maxcompute,
            cloud,
            purge_asked: Default::default(),
        })
    }
}

/// The source's stores, the object records' TTL, and the cloud source (None for a folder).
async fn open_source(
    config: &FloeConfig,
    checkpoint: &Arc<dyn CheckpointStore>,
    queues: Option<QueueOpener>,
) -> Result<(
    Arc<dyn StoreResolver>,
    Option<Duration>,
    Option<Arc<CloudSource>>,
)> {
    Ok(match &config.source {
        SourceConfig::Local { folder, bucket, .. } => {
            // A folder that is not there is a mistake in the file (a typo), not an empty
            // bucket: say so rather than land nothing.
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
            let source = CloudSource::open(c, checkpoint.clone(), queues).await?;
            (Arc::new(stores), Some(ttl), Some(Arc::new(source)))
        }
    })
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
            staging: self.staging.as_deref(),
            dead_letters: &self.dead_letters,
            faults: &self.faults,
            owner: &self.owner,
            config: &self.config,
            maxcompute: self.maxcompute.as_deref(),
            lease: Default::default(),
            purge_asked: &self.purge_asked,
        }
    }

    /// Maintain Iceberg tables (`namespace.table`) one after the other; see
    /// [`crate::targets::maintain`]. A table whose lease another committer holds is reported
    /// as busy (skipped).
    pub async fn maintain(
        &self,
        tables: &[String],
        opts: &crate::targets::maintain::MaintainOptions,
    ) -> Result<Vec<crate::targets::maintain::TableMaintenance>> {
        let committer = self.committer();
        let mut out = Vec::new();
        for table in tables {
            let target = TargetId::iceberg(&self.catalog_name, table);
            let done = committer.maintain_table(target, table, opts).await?;
            out.push(
                done.unwrap_or_else(|| crate::targets::maintain::TableMaintenance {
                    table: table.clone(),
                    skipped: vec!["another committer holds the table's lease".into()],
                    ..Default::default()
                }),
            );
        }
        Ok(out)
    }

    /// Maintain every table of the catalog; see [`Pipeline::maintain`]. With orphan removal
    /// asked, the staging tables of routes whose only target is MaxCompute lose their
    /// abandoned batches' files too (see [`crate::targets::orphans`]), each reported as
    /// `staging <table>`.
    pub async fn maintain_all(
        &self,
        opts: &crate::targets::maintain::MaintainOptions,
    ) -> Result<Vec<crate::targets::maintain::TableMaintenance>> {
        let idents = floe_iceberg::all_tables(self.catalog.as_ref()).await?;
        let name = |t: &iceberg::TableIdent| format!("{}.{}", t.namespace().join("."), t.name());
        let tables: Vec<String> = idents.iter().map(name).collect();
        let mut out = self.maintain(&tables, opts).await?;
        if let (Some(staging), Some(age)) = (&self.staging, opts.remove_orphans_older_than) {
            let protected = crate::targets::orphans::batch_files(self.checkpoint.as_ref()).await?;
            let cutoff = floe_checkpoint::now_ms() - age.as_millis() as i64;
            for ident in floe_iceberg::all_tables(staging.as_ref()).await? {
                let mut report = crate::targets::maintain::TableMaintenance {
                    table: format!("staging {}", name(&ident)),
                    ..Default::default()
                };
                if idents.contains(&ident) {
                    // Same name as an Iceberg table, perhaps in the same folder: its files
                    // are that table's to keep.
                    report.skipped.push(
                        "an Iceberg table has the same name: its files are left alone".into(),
                    );
                } else {
                    let table = iceberg::Catalog::load_table(staging.as_ref(), &ident)
                        .await
                        .map_err(floe_iceberg::from_iceberg)?;
                    report.orphans = Some(
                        crate::targets::orphans::remove_staging_orphans(
                            &table,
                            &protected,
                            cutoff,
                            &self.faults,
                        )
                        .await
                        .map_err(|e| {
                            e.while_doing(format!(
                                "failed to remove orphan files of {}",
                                report.table
                            ))
                        })?,
                    );
                }
                out.push(report);
            }
        }
        Ok(out)
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
        Self::builder(config).build().await
    }

    /// [`Pipeline::open`] for a function that never polls a queue (ingest, commit, backfill):
    /// a queue in `config` (which such a function shares with the poll function) is read for
    /// its name and options, but its client is never opened, nor linked into a binary that
    /// opens its pipeline only this way, however cargo unified the crate's features.
    pub async fn open_without_queue_clients(config: FloeConfig) -> Result<Self> {
        PipelineBuilder {
            queues: None,
            ..Self::parts(config)
        }
        .build()
        .await
    }

    /// A builder for the pipeline of `config`, to replace some of its parts.
    pub fn builder(config: FloeConfig) -> PipelineBuilder {
        PipelineBuilder {
            queues: crate::sources::queue_clients(),
            ..Self::parts(config)
        }
    }

    /// Every part from the configuration, no queue client.
    fn parts(config: FloeConfig) -> PipelineBuilder {
        PipelineBuilder {
            config,
            checkpoint: None,
            catalog: None,
            faults: None,
            progress: None,
            queues: None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &FloeConfig {
        &self.config
    }

    /// The Iceberg catalog.
    pub fn catalog(&self) -> &Arc<dyn FloeCatalog> {
        &self.catalog
    }

    /// The catalog holding `route`'s table: the Iceberg catalog, or the staging catalog for a
    /// route whose only target is MaxCompute (see [`crate::targets::staging`]).
    pub fn catalog_for(&self, route: &crate::config::RouteConfig) -> Result<&dyn FloeCatalog> {
        if route.targets.iceberg {
            return Ok(self.catalog.as_ref());
        }
        match &self.staging {
            Some(s) => Ok(s.as_ref()),
            None => Err(floe_core::Error::unexpected(format!(
                "route {} has no iceberg target but no staging catalog was opened",
                route.name
            ))),
        }
    }

    /// Write and delete a file under the staging location (`floe config check --connect`):
    /// its root, or `None` when no route stages there.
    pub async fn check_staging(&self) -> Result<Option<String>> {
        match &self.staging {
            Some(s) => s
                .area()
                .probe()
                .await
                .map(|()| Some(s.area().root().to_owned())),
            None => Ok(None),
        }
    }

    /// The catalog's name.
    pub fn catalog_name(&self) -> &str {
        &self.catalog_name
    }

    /// Where dead letters go.
    pub fn dead_letters(&self) -> &Arc<dyn ObjectStore> {
        &self.dead_letters
    }

    /// The checkpoint table.
    pub fn checkpoint(&self) -> &Arc<dyn CheckpointStore> {
        &self.checkpoint
    }

    /// The injected faults (tests).
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Report progress to `progress` from now on.
    pub fn set_progress(&mut self, progress: Progress) {
        self.progress = Some(progress);
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
