//! JSON records: newline-delimited (one object per line) or JSON documents (an array of objects,
//! or objects one after another, pretty-printed or not), streamed.
//!
//! Each record is first read straight into the target schema's builders by the typed reader
//! ([`super::typed`]), which takes the plain records and says when it is not sure of one. From
//! such a record on, records are gathered into a batch of whole records and decoded by arrow-json
//! in one go; when that batch fails (a malformed record, a value arrow-json will not put in its
//! column) it is decoded again record by record, so only the bad records are set aside, with their
//! line numbers. After the batch the typed reader takes over again.
//!
//! With case-insensitive names (the default), a record whose keys name columns only when case is
//! ignored has them renamed first ([`super::fold`]), and is then read either way.

use arrow_array::RecordBatch;
use arrow_json::reader::{Decoder, ReaderBuilder};
use floe_core::{Error, Result};

use super::convert::Conformer;
use super::fold::CaseFold;
use super::typed::{Read, TypedReader};
use super::{BadRecord, Decoded, StreamDecoder, truncate_raw};

/// Longest record accepted; a longer one is a bad record (keeps memory bounded).
pub(super) const MAX_RECORD_BYTES: usize = 64 << 20;

/// How records are delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// One record per line.
    Lines,
    /// A JSON array of records, or records one after another.
    Documents,
}

/// Streaming JSON decoder; see the module doc.
pub struct JsonDecoder {
    conformer: Conformer,
    /// arrow-json's decoder, made when a record first needs it: its buffers are sized for a
    /// whole batch (a few MiB for a wide one), and most objects never use it.
    decoder: Option<Decoder>,
    batch_rows: usize,
    framing: Framing,
    /// The fast path, when it takes the schema; rows it read wait in its builders.
    typed: Option<TypedReader>,
    /// Renames keys that are case variants of column names (names matched case-insensitively).
    fold: Option<CaseFold>,
    /// Whole records waiting to be decoded by arrow-json.
    pending: Vec<u8>,
    /// `(start, end, line)` of each record in `pending`.
    spans: Vec<(usize, usize, u64)>,
    /// The start of a record that has not ended yet.
    partial: Vec<u8>,
    partial_line: u64,
    /// Line number (1-based) at the current input position.
    line: u64,
    splitter: Splitter,
    out: Decoded,
    oversize: bool,
}

impl JsonDecoder {
    /// A decoder producing batches of `conformer`'s target schema, `batch_rows` rows at most.
    pub fn new(conformer: Conformer, framing: Framing, batch_rows: usize) -> Result<Self> {
        let batch_rows = batch_rows.max(1);
        let typed = conformer
            .is_typed_source()
            .then(|| {
                let target = conformer.target_schema().clone();
                TypedReader::new(target, batch_rows, conformer.names())
            })
            .flatten();
        let fold = (conformer.names() == crate::Names::CaseInsensitive)
            .then(|| CaseFold::new(conformer.target_schema().fields().clone()));
        // Without the typed reader every record goes to arrow-json: make it now, so that a
        // schema it cannot take fails here rather than at the first record.
        let decoder = match typed {
            None => Some(build(&conformer, batch_rows)?),
            Some(_) => None,
        };
        Ok(JsonDecoder {
            typed,
            fold,
            conformer,
            decoder,
            batch_rows,
            framing,
            pending: Vec::new(),
            spans: Vec::new(),
            partial: Vec::new(),
            partial_line: 1,
            line: 1,
            splitter: Splitter::default(),
            out: Decoded::default(),
            oversize: false,
        })
    }

    /// This decoder without the typed reader: arrow-json and the conformer alone (what the
    /// typed reader is held against in tests).
    #[cfg(test)]
    pub(super) fn arrow_only(mut self) -> Self {
        self.typed = None;
        self
    }

    /// Count lines from 1 again (a decoder of segments, each decoded whole before the next).
    pub(super) fn restart_lines(&mut self) {
        self.line = 1;
        self.partial_line = 1;
    }

    /// Line ends read since lines were last counted from 1.
    pub(super) fn line_ends(&self) -> u64 {
        self.line - 1
    }

    fn add_record(&mut self, record: &[u8], line: u64) -> Result<()> {
        let trimmed = record.trim_ascii();
        if trimmed.is_empty() {
            return Ok(());
        }
        // The typed reader reads while no arrow-json batch is being gathered (rows stay in order).
        // A record it is unsure of may only need its keys renamed: it then reads the renamed one.
        let mut folded = None;
        if self.spans.is_empty()
            && let Some(typed) = &mut self.typed
        {
            let mut read = typed.read(trimmed, line, &mut self.out.bad);
            if read == Read::Unsure {
                folded = self.fold.as_ref().and_then(|f| f.apply(trimmed));
                if let Some(renamed) = &folded {
                    read = typed.read(renamed, line, &mut self.out.bad);
                }
            }
            match read {
                Read::Row => {
                    if typed.rows() >= self.batch_rows {
                        self.finish_typed()?;
                    }
                    return Ok(());
                }
                Read::Bad => return Ok(()),
                Read::Unsure => self.finish_typed()?,
            }
        } else if let Some(fold) = &self.fold {
            folded = fold.apply(trimmed);
        }
        let record = folded.as_deref().unwrap_or(trimmed);
        let start = self.pending.len();
        self.pending.extend_from_slice(record);
        self.pending.push(b'\n');
        self.spans.push((start, self.pending.len() - 1, line));
        if self.spans.len() >= self.batch_rows {
            self.decode_pending()?;
        }
        Ok(())
    }

    /// The typed reader's rows as a batch.
    fn finish_typed(&mut self) -> Result<()> {
        if let Some(typed) = &mut self.typed
            && let Some(batch) = typed
                .finish()
                .map_err(|e| Error::unexpected("failed to build decoded records").with_source(e))?
        {
            self.out.batches.push(batch);
        }
        Ok(())
    }

    /// Decode `pending`: all at once, or record by record when that fails.
    fn decode_pending(&mut self) -> Result<()> {
        if self.spans.is_empty() {
            return Ok(());
        }
        let fast = decode_all(
            made(&mut self.decoder, &self.conformer, self.batch_rows)?,
            &self.pending,
        );
        let (batch, rows_to_spans) = match fast {
            Ok(Some(b)) if b.num_rows() == self.spans.len() => (b, None),
            _ => {
                self.decoder = Some(build(&self.conformer, self.batch_rows)?);
                self.decode_one_by_one()?
            }
        };
        let (good, bad) = self
            .conformer
            .conform(&batch)
            .map_err(|e| Error::invalid_input("failed to convert json records").with_source(e))?;
        for (row, reason) in bad {
            let span = match &rows_to_spans {
                Some(map) => map[row],
                None => row,
            };
            self.bad(span, reason);
        }
        if good.num_rows() > 0 {
            self.out.batches.push(good);
        }
        self.pending.clear();
        self.spans.clear();
        Ok(())
    }

    /// The slow path: one record at a time. Returns the batch of good records and, for each of its
    /// rows, the index of its span.
    fn decode_one_by_one(&mut self) -> Result<(RecordBatch, Option<Vec<usize>>)> {
        let mut batches = Vec::new();
        let mut map = Vec::new();
        for i in 0..self.spans.len() {
            let (s, e, _) = self.spans[i];
            let one = decode_all(
                made(&mut self.decoder, &self.conformer, self.batch_rows)?,
                &self.pending[s..e],
            );
            match one {
                Ok(Some(b)) if b.num_rows() == 1 => {
                    batches.push(b);
                    map.push(i);
                }
                Ok(_) => {
                    self.decoder = Some(build(&self.conformer, self.batch_rows)?);
                    self.bad(i, "record is not a json object".into());
                }
                Err(e) => {
                    self.decoder = Some(build(&self.conformer, self.batch_rows)?);
                    self.bad(i, e.to_string());
                }
            }
        }
        let schema = self.conformer.decode_schema().clone();
        let batch = arrow_select::concat::concat_batches(&schema, &batches)
            .map_err(|e| Error::unexpected("failed to join decoded records").with_source(e))?;
        Ok((batch, Some(map)))
    }

    fn bad(&mut self, span: usize, reason: String) {
        let (s, e, line) = self.spans[span];
        self.out.bad.push(BadRecord {
            line: Some(line),
            raw: truncate_raw(&self.pending[s..e]),
            reason,
        });
    }

    fn push_lines(&mut self, mut bytes: &[u8]) -> Result<()> {
        if !self.partial.is_empty() || self.oversize {
            match memchr::memchr(b'\n', bytes) {
                None => {
                    self.extend_partial(bytes);
                    return Ok(());
                }
                Some(nl) => {
                    self.extend_partial(&bytes[..nl]);
                    let record = std::mem::take(&mut self.partial);
                    let line = self.partial_line;
                    self.finish_partial(&record, line)?;
                    self.line += 1;
                    bytes = &bytes[nl + 1..];
                }
            }
        }
        let mut start = 0;
        for nl in memchr::memchr_iter(b'\n', bytes) {
            let line = self.line;
            self.line += 1;
            self.add_record(&bytes[start..nl], line)?;
            start = nl + 1;
        }
        if start < bytes.len() {
            self.partial_line = self.line;
            self.extend_partial(&bytes[start..]);
        }
        Ok(())
    }

    fn extend_partial(&mut self, bytes: &[u8]) {
        if self.oversize {
            return;
        }
        if self.partial.len() + bytes.len() > MAX_RECORD_BYTES {
            self.oversize = true;
            let head = self.partial.len().min(1024);
            self.partial.truncate(head);
            return;
        }
        self.partial.extend_from_slice(bytes);
    }

    fn finish_partial(&mut self, record: &[u8], line: u64) -> Result<()> {
        if std::mem::take(&mut self.oversize) {
            self.out.bad.push(BadRecord {
                line: Some(line),
                raw: truncate_raw(record),
                reason: format!("record longer than {MAX_RECORD_BYTES} bytes"),
            });
            return Ok(());
        }
        self.add_record(record, line)
    }

    fn push_documents(&mut self, bytes: &[u8]) -> Result<()> {
        let mut records = Vec::new();
        self.splitter.split(bytes, &mut self.partial, &mut records);
        for (record, line) in records {
            if record.len() > MAX_RECORD_BYTES {
                self.out.bad.push(BadRecord {
                    line: Some(line),
                    raw: truncate_raw(&record),
                    reason: format!("record longer than {MAX_RECORD_BYTES} bytes"),
                });
                continue;
            }
            self.add_record(&record, line)?;
        }
        Ok(())
    }
}

impl StreamDecoder for JsonDecoder {
    fn push(&mut self, bytes: &[u8]) -> Result<()> {
        match self.framing {
            Framing::Lines => self.push_lines(bytes),
            Framing::Documents => self.push_documents(bytes),
        }
    }

    fn finish(&mut self) -> Result<()> {
        match self.framing {
            Framing::Lines => {
                if !self.partial.is_empty() || self.oversize {
                    let record = std::mem::take(&mut self.partial);
                    let line = self.partial_line;
                    self.finish_partial(&record, line)?;
                }
            }
            Framing::Documents => {
                let rest = std::mem::take(&mut self.partial);
                if !rest.trim_ascii().is_empty() {
                    let line = self.splitter.record_line;
                    self.add_record(&rest, line)?;
                }
            }
        }
        self.finish_typed()?;
        self.decode_pending()
    }

    fn take(&mut self) -> Decoded {
        std::mem::take(&mut self.out)
    }
}

/// arrow-json's decoder in `slot`, made on first use.
fn made<'d>(
    slot: &'d mut Option<Decoder>,
    conformer: &Conformer,
    batch_rows: usize,
) -> Result<&'d mut Decoder> {
    if slot.is_none() {
        *slot = Some(build(conformer, batch_rows)?);
    }
    slot.as_mut()
        .ok_or_else(|| Error::unexpected("the json decoder is missing"))
}

fn build(conformer: &Conformer, batch_rows: usize) -> Result<Decoder> {
    ReaderBuilder::new(conformer.decode_schema().clone())
        .with_batch_size(batch_rows + 1)
        .with_coerce_primitive(true)
        .with_strict_mode(false)
        .build_decoder()
        .map_err(|e| Error::unexpected("failed to build the json decoder").with_source(e))
}

fn decode_all(
    decoder: &mut Decoder,
    mut buf: &[u8],
) -> std::result::Result<Option<RecordBatch>, arrow_schema::ArrowError> {
    while !buf.is_empty() {
        let n = decoder.decode(buf)?;
        if n == 0 {
            break;
        }
        buf = &buf[n..];
    }
    decoder.flush()
}

/// Splits a stream of JSON documents into records: the elements of a top-level array, or the
/// top-level values themselves. Tracks line numbers of record starts.
#[derive(Default)]
struct Splitter {
    depth: u32,
    in_string: bool,
    escape: bool,
    /// Inside a record (a value at record level).
    in_record: bool,
    /// A scalar record (number, literal) without brackets: ends at a delimiter.
    scalar: bool,
    /// Whether the stream turned out to be one top-level array.
    array: Option<bool>,
    line: u64,
    record_line: u64,
}

impl Splitter {
    fn split(&mut self, bytes: &[u8], partial: &mut Vec<u8>, records: &mut Vec<(Vec<u8>, u64)>) {
        if self.line == 0 {
            self.line = 1;
        }
        let mut start = if self.in_record { Some(0) } else { None };
        let mut i = 0;
        let n = bytes.len();
        while i < n {
            if self.escape {
                self.escape = false;
                i += 1;
                continue;
            }
            let b = bytes[i];
            if self.in_string {
                // Jump to the next quote or backslash.
                match memchr::memchr2(b'"', b'\\', &bytes[i..]) {
                    None => {
                        self.line += memchr::memchr_iter(b'\n', &bytes[i..]).count() as u64;
                        i = n;
                        continue;
                    }
                    Some(off) => {
                        self.line += memchr::memchr_iter(b'\n', &bytes[i..i + off]).count() as u64;
                        i += off;
                        if bytes[i] == b'\\' {
                            i += 2;
                            if i > n {
                                // The escaped byte is in the next chunk.
                                self.escape = true;
                                i = n;
                            }
                            continue;
                        }
                        self.in_string = false;
                        i += 1;
                        if self.in_record && self.depth == 0 && !self.scalar {
                            // A top-level string record ends here.
                            self.end_record(bytes, &mut start, i, partial, records);
                        }
                        continue;
                    }
                }
            }
            if b == b'\n' {
                self.line += 1;
            }
            if self.in_record {
                if self.scalar {
                    if matches!(b, b',' | b']' | b' ' | b'\t' | b'\r' | b'\n') {
                        self.scalar = false;
                        self.end_record(bytes, &mut start, i, partial, records);
                        if b == b']' && self.array == Some(true) {
                            self.array = None;
                        }
                    }
                    i += 1;
                    continue;
                }
                match b {
                    b'"' => self.in_string = true,
                    b'{' | b'[' => self.depth += 1,
                    b'}' | b']' => {
                        self.depth = self.depth.saturating_sub(1);
                        if self.depth == 0 {
                            self.end_record(bytes, &mut start, i + 1, partial, records);
                        }
                    }
                    _ => {}
                }
                i += 1;
                continue;
            }
            match b {
                b' ' | b'\t' | b'\r' | b'\n' | b',' => {}
                b'[' if self.array.is_none() => self.array = Some(true),
                b']' if self.array == Some(true) => self.array = None,
                _ => {
                    self.in_record = true;
                    self.record_line = self.line;
                    start = Some(i);
                    match b {
                        b'{' | b'[' => self.depth = 1,
                        b'"' => self.in_string = true,
                        _ => self.scalar = true,
                    }
                }
            }
            i += 1;
        }
        if let Some(s) = start.filter(|_| self.in_record) {
            partial.extend_from_slice(&bytes[s.min(n)..]);
        }
    }

    fn end_record(
        &mut self,
        bytes: &[u8],
        start: &mut Option<usize>,
        end: usize,
        partial: &mut Vec<u8>,
        records: &mut Vec<(Vec<u8>, u64)>,
    ) {
        let s = start.take().unwrap_or(0);
        let mut record = std::mem::take(partial);
        record.extend_from_slice(&bytes[s..end]);
        records.push((record, self.record_line));
        self.in_record = false;
    }
}

/// Split a sample of JSON documents into records (see [`Framing::Documents`]); with `complete`
/// false an unfinished last record is dropped.
pub fn split_json_records(bytes: &[u8], complete: bool) -> Vec<Vec<u8>> {
    let mut s = Splitter::default();
    let mut partial = Vec::new();
    let mut out = Vec::new();
    s.split(bytes, &mut partial, &mut out);
    if complete && !partial.trim_ascii().is_empty() {
        out.push((partial, s.record_line));
    }
    out.into_iter().map(|(r, _)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_all(chunks: &[&[u8]]) -> Vec<(String, u64)> {
        let mut s = Splitter::default();
        let mut partial = Vec::new();
        let mut out = Vec::new();
        for c in chunks {
            s.split(c, &mut partial, &mut out);
        }
        if !partial.trim_ascii().is_empty() {
            out.push((partial, s.record_line));
        }
        out.into_iter()
            .map(|(r, l)| (String::from_utf8(r).unwrap(), l))
            .collect()
    }

    #[test]
    fn splits_arrays_and_concatenated_documents_across_chunks() {
        let doc = b"[\n {\"a\": \"x}\\\"]\"},\n {\"b\": [1, {\"c\": 2}]}\n, 7, \"s\"\n]";
        let want = vec![
            ("{\"a\": \"x}\\\"]\"}".to_owned(), 2),
            ("{\"b\": [1, {\"c\": 2}]}".to_owned(), 3),
            ("7".to_owned(), 4),
            ("\"s\"".to_owned(), 4),
        ];
        assert_eq!(split_all(&[doc]), want);
        // Every split point gives the same records.
        for cut in 0..doc.len() {
            assert_eq!(split_all(&[&doc[..cut], &doc[cut..]]), want, "cut at {cut}");
        }
        let pretty = b"{\n  \"a\": 1\n}\n{\n  \"a\": 2\n}\n";
        assert_eq!(
            split_all(&[pretty]),
            vec![
                ("{\n  \"a\": 1\n}".to_owned(), 1),
                ("{\n  \"a\": 2\n}".to_owned(), 4)
            ]
        );
    }
}
