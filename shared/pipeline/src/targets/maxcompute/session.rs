//! Writing a commit's staged rows into a tunnel session: one upload block per row group (ids by
//! position), or every row into an upsert session.

use std::collections::{BTreeSet, HashMap};

use floe_core::{Error, ErrorKind, Result};
use floe_maxcompute::upload::MAX_BLOCK_ID;
use floe_maxcompute::{
    ArrowBlockEncoder, BatchConverter, MaxComputeSinkConfig, RowKind, TableMeta, TunnelFormat,
    UploadSession, UpsertSession,
};
use floe_tunnel_codec::BlockEncoder;
use iceberg::table::Table;

use super::Part;
use super::bad_rows::{KindColumn, bad_row, row_error_reason};
use super::readback::read_error;
use crate::protocol::records::CommitRecord;
use crate::targets::Committer;

/// One upload block being encoded, in the configured `tunnel_format`.
enum Block {
    Record(BlockEncoder),
    Arrow(ArrowBlockEncoder),
}

impl Block {
    fn record_count(&self) -> u64 {
        match self {
            Block::Record(e) => e.record_count(),
            Block::Arrow(e) => e.record_count(),
        }
    }
}

/// Why row `i` cannot go into an upload session at all (its kind), before conversion.
fn refusal(kinds: &KindColumn, i: usize, meta: &TableMeta) -> Option<String> {
    match kinds.kind(i) {
        Ok(RowKind::Insert) => None,
        Ok(_) if kinds.changelog => None,
        Ok(RowKind::UpdateBefore) => RowKind::UpdateBefore
            .operation()
            .err()
            .map(|e| e.to_string()),
        Ok(_) => Some(format!(
            "update and delete rows need an upsert session, and maxcompute table {} has no primary key",
            meta.id
        )),
        Err(e) => Some(e.to_string()),
    }
}

impl Committer<'_> {
    /// Write the blocks the session lacks (all of them for a new one); returns every block id of
    /// the commit, the rows set aside, and the records the blocks hold (those the session had
    /// are encoded again to count them, not sent).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn upload_blocks(
        &self,
        s: &UploadSession,
        have: &BTreeSet<u32>,
        parts: &[Part<'_>],
        meta: &TableMeta,
        cfg: &MaxComputeSinkConfig,
        rec: &CommitRecord,
        tables: &mut HashMap<String, Table>,
    ) -> Result<(Vec<u32>, u64, u64)> {
        let mut blocks = Vec::new();
        let mut bad_rows = 0;
        let mut records = 0;
        let mut next: u32 = 0;
        for (fi, part) in parts.iter().enumerate() {
            let file = self
                .open_staged(tables, &part.staged.table, &part.file.path)
                .await?;
            let conv = BatchConverter::new(&meta.columns, file.schema(), &cfg.datetime_format)
                .map_err(|e| e.while_doing(format!("staged file {}", part.file.path)))?;
            for rg in 0..file.row_groups() {
                let id = next;
                if id > MAX_BLOCK_ID {
                    return Err(Error::invalid_input(format!(
                        "a commit to maxcompute table {} takes more than {} row groups; lower commit.max-files",
                        meta.id,
                        MAX_BLOCK_ID + 1
                    ))
                    .with_retryable(false));
                }
                next += 1;
                blocks.push(id);
                let mut enc = match cfg.tunnel_format {
                    TunnelFormat::Record => Block::Record(BlockEncoder::new(&meta.columns)),
                    TunnelFormat::Arrow => Block::Arrow(
                        ArrowBlockEncoder::new(&meta.columns)
                            .map_err(|e| e.while_doing(format!("maxcompute table {}", meta.id)))?,
                    ),
                };
                let mut bad = Vec::new();
                let mut line = file.first_row(rg);
                let mut row = Vec::new();
                for batch in file.row_group(rg)? {
                    let batch = batch.map_err(|e| read_error(&part.file.path, e))?;
                    let kinds = KindColumn::new(&part.detail.row_kinds, &batch)?;
                    let prepared = conv.prepare(&batch)?;
                    let mut refused = |i: usize| refusal(&kinds, i, meta);
                    match &mut enc {
                        Block::Record(enc) => {
                            for i in 0..batch.num_rows() {
                                let outcome = match refused(i) {
                                    Some(reason) => Err(reason),
                                    None => match prepared.row(i, &mut row) {
                                        Err(e) => Err(row_error_reason(&e)),
                                        Ok(()) => match enc.write_record(&row) {
                                            Ok(()) => Ok(()),
                                            Err(e) if e.kind() == ErrorKind::InvalidInput => {
                                                Err(e.to_string())
                                            }
                                            Err(e) => return Err(e),
                                        },
                                    },
                                };
                                if let Err(reason) = outcome {
                                    bad.push(bad_row(&batch, i, line + i as u64, reason));
                                }
                            }
                        }
                        Block::Arrow(enc) => {
                            for e in enc.write(&prepared, &mut refused)? {
                                let reason = row_error_reason(&e);
                                bad.push(bad_row(&batch, e.row, line + e.row as u64, reason));
                            }
                        }
                    }
                    line += batch.num_rows() as u64;
                }
                records += enc.record_count();
                if have.contains(&id) {
                    // Written before a crash; its bad rows were set aside before it was (a
                    // dead letter is written once: see `crate::deadletter`).
                    continue;
                }
                bad_rows += self.set_aside(rec, part, fi, rg, bad).await?;
                self.renew_lease(false).await?;
                match enc {
                    Block::Record(mut enc) => s.write_block(id, enc.finish()).await?,
                    Block::Arrow(enc) => s.write_arrow_block(id, &enc.finish()).await?,
                }
            }
        }
        Ok((blocks, bad_rows, records))
    }

    /// Send every row of the commit to an upsert session (not flushed); returns the rows set
    /// aside.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn upsert_rows(
        &self,
        s: &mut UpsertSession,
        parts: &[Part<'_>],
        meta: &TableMeta,
        cfg: &MaxComputeSinkConfig,
        rec: &CommitRecord,
        tables: &mut HashMap<String, Table>,
    ) -> Result<u64> {
        let mut bad_rows = 0;
        for (fi, part) in parts.iter().enumerate() {
            let file = self
                .open_staged(tables, &part.staged.table, &part.file.path)
                .await?;
            let conv = BatchConverter::new(s.schema(), file.schema(), &cfg.datetime_format)
                .map_err(|e| e.while_doing(format!("staged file {}", part.file.path)))?;
            for rg in 0..file.row_groups() {
                let mut bad = Vec::new();
                let mut line = file.first_row(rg);
                for batch in file.row_group(rg)? {
                    let batch = batch.map_err(|e| read_error(&part.file.path, e))?;
                    let kinds = KindColumn::new(&part.detail.row_kinds, &batch)?;
                    self.renew_lease(false).await?;
                    let errors = s.write_batch(&conv, &batch, |i| kinds.kind(i)).await?;
                    for e in errors {
                        bad.push(bad_row(
                            &batch,
                            e.row,
                            line + e.row as u64,
                            row_error_reason(&e),
                        ));
                    }
                    line += batch.num_rows() as u64;
                }
                bad_rows += self.set_aside(rec, part, fi, rg, bad).await?;
            }
        }
        tracing::debug!(table = %meta.id, rows = s.rows_sent(), "maxcompute upsert rows sent");
        Ok(bad_rows)
    }
}
