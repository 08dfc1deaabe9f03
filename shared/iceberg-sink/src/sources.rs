//! Where each source's rows went: row ordinals per partition while writing, turned into
//! (data file, first position, count) when the files are closed.
//!
//! iceberg's rolling writer fills one partition's files in order, so the rows of one partition
//! are numbered from 0 across its files: a row's ordinal and the record counts of the files
//! closed for that partition give its file and position. The same numbering serves the rows an
//! upsert replaces within a batch ([`crate::changes`]) and the rows of each object a batch read
//! (so a later version of the object can delete them by position).

use std::collections::{BTreeMap, HashMap};

use floe_core::{Error, Result};
use iceberg::spec::{DataFile, Struct};
use serde::{Deserialize, Serialize};

/// Rows numbered per partition, in the order they were written.
#[derive(Debug, Default)]
pub(crate) struct Ordinals {
    /// Partition values seen, in order of first sight.
    partitions: Vec<Struct>,
    slot: HashMap<Struct, usize>,
    /// Rows written so far, per partition.
    written: Vec<u64>,
}

impl Ordinals {
    /// The slot of partition `value` (`Struct::empty()` for an unpartitioned table).
    pub(crate) fn slot(&mut self, value: &Struct) -> usize {
        if let Some(s) = self.slot.get(value) {
            return *s;
        }
        self.partitions.push(value.clone());
        self.written.push(0);
        self.slot.insert(value.clone(), self.partitions.len() - 1);
        self.partitions.len() - 1
    }

    /// The ordinal the next row of partition `slot` gets.
    pub(crate) fn next(&self, slot: usize) -> u64 {
        self.written[slot]
    }

    /// Count `rows` more rows of partition `slot`; the ordinal of the first.
    pub(crate) fn take(&mut self, slot: usize, rows: u64) -> u64 {
        let first = self.written[slot];
        self.written[slot] += rows;
        first
    }

    /// Each partition's closed files in the order they were filled, with the ordinal each
    /// starts at.
    pub(crate) fn files<'f>(&self, data: &'f [DataFile]) -> FileIndex<'f> {
        let mut per_partition: Vec<Vec<(u64, &DataFile)>> = vec![Vec::new(); self.partitions.len()];
        let mut next = vec![0u64; self.partitions.len()];
        for file in data {
            let Some(&slot) = self.slot.get(file.partition()) else {
                continue;
            };
            per_partition[slot].push((next[slot], file));
            next[slot] += file.record_count();
        }
        FileIndex { per_partition }
    }
}

/// Files by partition slot, as [`Ordinals::files`] lays them out.
pub(crate) struct FileIndex<'f> {
    per_partition: Vec<Vec<(u64, &'f DataFile)>>,
}

impl<'f> FileIndex<'f> {
    /// The file holding row `ordinal` of partition `slot`, and the row's position in it.
    pub(crate) fn locate(&self, slot: usize, ordinal: u64) -> Result<(&'f DataFile, u64)> {
        let files = self.per_partition.get(slot).map_or(&[][..], Vec::as_slice);
        let i = files.partition_point(|(start, _)| *start <= ordinal);
        match i.checked_sub(1).and_then(|i| files.get(i)) {
            Some(&(start, file)) if ordinal < start + file.record_count() => {
                Ok((file, ordinal - start))
            }
            _ => Err(Error::unexpected(format!(
                "row {ordinal} of partition {slot} is in no data file"
            ))),
        }
    }

    /// Rows `first..first + rows` of partition `slot` as runs within files.
    fn runs(&self, slot: usize, first: u64, rows: u64) -> Result<Vec<SourceRows>> {
        let mut out = Vec::new();
        let (mut at, end) = (first, first + rows);
        while at < end {
            let (file, pos) = self.locate(slot, at)?;
            let n = (file.record_count() - pos).min(end - at);
            out.push(SourceRows {
                file: file.file_path().to_owned(),
                start: pos,
                rows: n,
            });
            at += n;
        }
        Ok(out)
    }
}

/// A run of one source's rows in a data file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRows {
    /// The data file's path.
    pub file: String,
    /// Position (0-based) of the first row.
    pub start: u64,
    /// Rows in the run.
    pub rows: u64,
}

/// Which rows each source gave, while writing: (source, partition slot, first ordinal, rows).
#[derive(Debug, Default)]
pub(crate) struct SourceTracker {
    pub(crate) current: Option<u64>,
    runs: Vec<(u64, usize, u64, u64)>,
}

impl SourceTracker {
    /// Note `rows` rows of partition `slot` starting at ordinal `first`, for the current source.
    pub(crate) fn note(&mut self, slot: usize, first: u64, rows: u64) {
        let Some(source) = self.current else {
            return;
        };
        if let Some(last) = self.runs.last_mut()
            && last.0 == source
            && last.1 == slot
            && last.2 + last.3 == first
        {
            last.3 += rows;
            return;
        }
        self.runs.push((source, slot, first, rows));
    }

    /// The runs per source, in data files.
    pub(crate) fn resolve(self, files: &FileIndex<'_>) -> Result<BTreeMap<u64, Vec<SourceRows>>> {
        let mut out: BTreeMap<u64, Vec<SourceRows>> = BTreeMap::new();
        for (source, slot, first, rows) in self.runs {
            let runs = files.runs(slot, first, rows)?;
            let entry = out.entry(source).or_default();
            for r in runs {
                match entry.last_mut() {
                    Some(l) if l.file == r.file && l.start + l.rows == r.start => l.rows += r.rows,
                    _ => entry.push(r),
                }
            }
        }
        Ok(out)
    }
}
