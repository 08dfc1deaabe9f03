//! Command-line interface.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use floe_core::Result;

use crate::s3tables;

/// floe lands object-storage changes in lakehouse tables, exactly once.
///
/// Locally, a folder plays the bucket: `floe run` lands what was created, changed or removed in
/// it since the last run into Iceberg tables of a local SQL catalog (readable by pyiceberg).
#[derive(Debug, Parser)]
#[command(name = "floe", version, propagate_version = true)]
pub struct Cli {
    /// Log filter (tracing's syntax: `info`, `floe_pipeline=debug`, ...).
    #[arg(long, global = true, env = "FLOE_LOG", default_value = "warn")]
    pub log: String,
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

/// Log output format.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the pipeline of a configuration: one pass (scan, ingest, commit), or continuously.
    Run(RunArgs),
    /// Commit staged files now (what `run` does at the end of a pass).
    Commit(ConfigArg),
    /// Maintain the Iceberg tables of a configuration's catalog: compact small files (applying
    /// position deletes), expire old snapshots and remove orphan files, each under the table's
    /// commit lease.
    Maintain(MaintainArgs),
    /// List the source's `path` prefixes and land every object (SNAPSHOT / INITIAL), resuming
    /// where an earlier run stopped; then commit.
    Backfill(BackfillArgs),
    /// Make sample objects in demo/, run the pipeline on them, and show what landed.
    Demo(DemoArgs),
    /// List and inspect the tables of a configuration's catalog; manage S3 Tables / OSS Tables
    /// (the `aws s3tables` calls, same arguments and output).
    #[command(subcommand)]
    Tables(TablesCommand),
    /// List and show the dead letters of a configuration (`[dead-letter] path`: a folder or a
    /// bucket prefix), and land the objects they name again once fixed.
    #[command(subcommand)]
    DeadLetters(DeadLettersCommand),
    /// Check a configuration file without landing anything.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Benchmark floe against arrow-rs and pyarrow + pyiceberg on generated data.
    Bench(BenchArgs),
    /// The benchmark's one-thread floor: floe's NDJSON decoder into a Parquet writer, each timed.
    #[command(hide = true)]
    BenchRaw(BenchRawArgs),
    /// The benchmark's commit-pass case: one idle commit pass on the object-store checkpoint
    /// (s3s-fs) with 20 finished batches behind it, then with 20,000.
    #[command(hide = true)]
    BenchCommitPass(BenchCommitPassArgs),
    /// The benchmark's maintenance case: micro-commits into one table, then `floe maintain`;
    /// files, snapshots and a pyiceberg full scan before and after.
    #[command(hide = true)]
    BenchMaintain(BenchMaintainArgs),
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Read the file as floe reads it (every option checked, exit 2 naming a bad one) and print
    /// what it means; with `--connect`, also reach what it names.
    Check(ConfigCheckArgs),
}

#[derive(Debug, Args)]
pub struct ConfigCheckArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Reach every endpoint the file names: the checkpoint store (and probe its conditional
    /// writes), the source's bucket, the catalog. Lands nothing.
    #[arg(long)]
    pub connect: bool,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Where generated data and runs go (kept between runs; the data is reused).
    #[arg(long, default_value = "bench-data")]
    pub dir: PathBuf,
    /// Size of the large NDJSON object, in MiB.
    #[arg(long, default_value_t = 1024)]
    pub size_mib: u64,
    /// How many small objects.
    #[arg(long, default_value_t = 500)]
    pub small: usize,
    /// Size of each small object, in KiB.
    #[arg(long, default_value_t = 32)]
    pub small_kib: u64,
    /// The per-object cost is measured at `small` objects and at this many (0: skip), each of
    /// `flat-kib` KiB, to show it stays flat.
    #[arg(long, default_value_t = 50_000)]
    pub flat: usize,
    /// Size of each object of the per-object cost case, in KiB.
    #[arg(long, default_value_t = 1)]
    pub flat_kib: u64,
    /// A python with pyarrow and pyiceberg for the baseline (none: skip it).
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// The baseline script.
    #[arg(long, default_value = "bench/pyiceberg_baseline.py")]
    pub script: PathBuf,
    /// Rounds of the large-object and small-objects cases: each round runs floe, the floor and
    /// the baseline one after the other, and each figure is the median over the rounds.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=99))]
    pub runs: u32,
}

#[derive(Debug, Args)]
pub struct BenchMaintainArgs {
    /// The Python with pyiceberg (`make test-deps` makes one).
    #[arg(long)]
    pub python: PathBuf,
    /// Where the run's files go (emptied first).
    #[arg(long, default_value = "bench-data/maintain")]
    pub dir: PathBuf,
    /// Micro-commits before maintenance.
    #[arg(long, default_value_t = 1000)]
    pub commits: usize,
    /// Rows per object.
    #[arg(long, default_value_t = 20)]
    pub rows: usize,
}

#[derive(Debug, Args)]
pub struct BenchCommitPassArgs {
    /// The s3s-fs binary (`make test-deps` installs it).
    #[arg(long)]
    pub s3s_fs: PathBuf,
    /// Where its data and the run's files go (emptied first).
    #[arg(long, default_value = "bench-data/commit-pass")]
    pub dir: PathBuf,
    /// Finished batches behind the second measurement.
    #[arg(long, default_value_t = 20_000)]
    pub batches: usize,
}

#[derive(Debug, Args)]
pub struct BenchRawArgs {
    /// NDJSON input.
    pub input: PathBuf,
    /// Parquet output.
    pub output: PathBuf,
}

#[derive(Debug, Args)]
pub struct MaintainArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Only this table (`namespace.table`); default every table of the catalog.
    #[arg(long)]
    pub table: Option<String>,
    /// Leave the files as they are (only expire snapshots).
    #[arg(long)]
    pub no_compact: bool,
    /// Expire snapshots older than this many hours (the Iceberg default's 5 days).
    #[arg(long, default_value_t = 120.0)]
    pub expire_older_than_hours: f64,
    /// Snapshots of `main` always kept, however old.
    #[arg(long, default_value_t = 1)]
    pub keep_snapshots: usize,
    /// Remove files under a table's location that neither the table nor a staged batch names,
    /// once older than this many hours (Iceberg's default of 3 days; at least 24).
    #[arg(long, default_value_t = 72.0)]
    pub orphans_older_than_hours: f64,
    /// Leave orphan files alone.
    #[arg(long)]
    pub keep_orphans: bool,
}

#[derive(Debug, Args)]
pub struct ConfigArg {
    /// The configuration file (TOML, or Kafka Connect-style `.properties`).
    #[arg(short, long, default_value = "floe.toml")]
    pub config: PathBuf,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Keep running: rescan every `source.poll-interval-ms`, commit every `commit.interval-ms`,
    /// until Ctrl-C.
    #[arg(long)]
    pub watch: bool,
    /// Stage but do not commit at the end of the pass (a later `run` or `commit` does).
    #[arg(long)]
    pub no_commit: bool,
    /// Print one line per object as it lands.
    #[arg(long)]
    pub progress: bool,
}

#[derive(Debug, Args)]
pub struct BackfillArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Stage but do not commit at the end (a later `run` or `commit` does).
    #[arg(long)]
    pub no_commit: bool,
    /// Print one line per listed page.
    #[arg(long)]
    pub progress: bool,
    /// Stop listing after this many seconds (the next run resumes).
    #[arg(long)]
    pub max_seconds: Option<u64>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where the demo keeps its bucket folder, warehouse, catalog and configuration.
    #[arg(long, default_value = "demo")]
    pub dir: PathBuf,
    /// Start over: delete the demo folder first.
    #[arg(long)]
    pub reset: bool,
}

#[derive(Debug, Subcommand)]
pub enum TablesCommand {
    /// List the tables of the catalog.
    List(ConfigArg),
    /// Show a table: schema, partition spec, snapshots (with floe's commit ids), row count, rows.
    Show(ShowArgs),
    /// S3 Tables: create a table bucket; prints its ARN.
    CreateTableBucket(s3tables::CreateTableBucketArgs),
    /// S3 Tables: create a namespace in a table bucket.
    CreateNamespace(s3tables::CreateNamespaceArgs),
    /// S3 Tables: create an Iceberg table from a schema document (`--metadata file://…`).
    CreateTable(s3tables::CreateTableArgs),
    /// S3 Tables: a table's state (metadata location, version token, warehouse location).
    GetTable(s3tables::TableArgs),
    /// S3 Tables: the status of a table's maintenance jobs.
    GetTableMaintenanceJobStatus(s3tables::TableArgs),
    /// S3 Tables: a table's maintenance configuration.
    GetTableMaintenanceConfiguration(s3tables::TableArgs),
    /// S3 Tables: set a table's maintenance (`icebergCompaction`, `icebergSnapshotManagement`).
    PutTableMaintenanceConfiguration(s3tables::PutTableMaintenanceArgs),
    /// S3 Tables: a table bucket's maintenance configuration.
    GetTableBucketMaintenanceConfiguration(s3tables::BucketArgs),
    /// S3 Tables: set a table bucket's maintenance (`icebergUnreferencedFileRemoval`).
    PutTableBucketMaintenanceConfiguration(s3tables::PutBucketMaintenanceArgs),
}

#[derive(Debug, Subcommand)]
pub enum DeadLettersCommand {
    /// One line per dead-letter file: its letters, their reasons, the objects they name; then
    /// totals.
    List(DeadLettersListArgs),
    /// Print the letters of one file (its key as `list` prints it), one per line.
    Show(DeadLettersShowArgs),
    /// Land the named objects again, once fixed, through the normal ingest and commit.
    ///
    /// Each object's current version is landed under the checkpoint's rules: a version already
    /// landed or already set aside is a duplicate and lands nothing (fix the object, i.e. write
    /// it again, first), so replaying twice lands once.
    ///
    /// Only objects set aside whole (letters without a line) are replayed unless
    /// --include-partial is given: an object with only bad records had its good records landed
    /// already, and replaying it lands those again next to them. (So does an object whose
    /// stream broke part way through: the rows before the break landed.)
    Replay(ReplayArgs),
}

#[derive(Debug, Args)]
pub struct DeadLettersListArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Print one JSON document instead of lines.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DeadLettersShowArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// The file: its key under the dead-letter path (`2026-12-01/<batch>-0000.ndjson`) or its
    /// URL.
    pub key: String,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Objects to land: `s3://bucket/key`, `oss://bucket/key`, a URL as `list` prints it, or,
    /// for a local folder source, the key.
    pub objects: Vec<String>,
    /// Every object any dead letter names.
    #[arg(long, conflicts_with = "objects")]
    pub all: bool,
    /// Also objects whose letters are only about single records (their good records landed
    /// already and land again).
    #[arg(long)]
    pub include_partial: bool,
    /// Stage but do not commit (a later `run` or `commit` does).
    #[arg(long)]
    pub no_commit: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// The table, `namespace.table`.
    pub table: String,
    /// How many rows to print.
    #[arg(long, default_value_t = 10)]
    pub rows: usize,
}

/// Run a command.
pub async fn dispatch(command: Command) -> Result<ExitCode> {
    match command {
        Command::Run(args) => crate::run::run(args).await,
        Command::Commit(args) => crate::run::commit(args).await,
        Command::Maintain(args) => crate::run::maintain(args).await,
        Command::Backfill(args) => crate::run::backfill(args).await,
        Command::Demo(args) => crate::demo::demo(args).await,
        Command::Tables(TablesCommand::List(args)) => crate::tables::list(args).await,
        Command::Tables(TablesCommand::Show(args)) => crate::tables::show(args).await,
        Command::DeadLetters(DeadLettersCommand::List(args)) => {
            crate::deadletters::list(args).await
        }
        Command::DeadLetters(DeadLettersCommand::Show(args)) => {
            crate::deadletters::show(args).await
        }
        Command::DeadLetters(DeadLettersCommand::Replay(args)) => {
            crate::deadletters::replay(args).await
        }
        Command::Config(ConfigCommand::Check(args)) => crate::check::check(args).await,
        Command::Bench(args) => crate::bench::bench(args).await,
        Command::BenchRaw(args) => crate::bench::bench_raw(args).await,
        Command::BenchCommitPass(args) => crate::bench_commit::bench_commit_pass(args).await,
        Command::BenchMaintain(args) => crate::bench_maintain::bench_maintain(args).await,
        Command::Tables(c) => tables_admin(c).await,
    }
}

async fn tables_admin(command: TablesCommand) -> Result<ExitCode> {
    use TablesCommand as T;
    match command {
        T::List(_) | T::Show(_) => Err(floe_core::Error::unexpected("not an admin command")),
        T::CreateTableBucket(a) => s3tables::create_table_bucket(a).await,
        T::CreateNamespace(a) => s3tables::create_namespace(a).await,
        T::CreateTable(a) => s3tables::create_table(a).await,
        T::GetTable(a) => s3tables::get_table(a).await,
        T::GetTableMaintenanceJobStatus(a) => s3tables::get_table_maintenance_job_status(a).await,
        T::GetTableMaintenanceConfiguration(a) => {
            s3tables::get_table_maintenance_configuration(a).await
        }
        T::PutTableMaintenanceConfiguration(a) => {
            s3tables::put_table_maintenance_configuration(a).await
        }
        T::GetTableBucketMaintenanceConfiguration(a) => {
            s3tables::get_table_bucket_maintenance_configuration(a).await
        }
        T::PutTableBucketMaintenanceConfiguration(a) => {
            s3tables::put_table_bucket_maintenance_configuration(a).await
        }
    }
}
