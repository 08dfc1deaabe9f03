//! CSV records, streamed with `csv-core`: header (or declared column order), delimiter, quote and
//! escape characters, quoted fields spanning lines. Every field is read as text and converted to
//! its column's type by the [`Conformer`], so a bad value marks only its own record bad.

use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::{ArrayRef, RecordBatch};
use csv_core::{ReadRecordResult, Reader, ReaderBuilder};
use floe_core::{Error, Result};

use super::convert::Conformer;
use super::{BadRecord, Decoded, StreamDecoder, truncate_raw};

/// CSV dialect options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsvOptions {
    /// The first record names the columns (default true). Without a header, columns are the
    /// target table's columns in order.
    pub header: bool,
    /// Field delimiter (default `,`).
    pub delimiter: u8,
    /// Quote character (default `"`).
    pub quote: u8,
    /// Escape character inside quotes, if any (default none: quotes are doubled).
    pub escape: Option<u8>,
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions {
            header: true,
            delimiter: b',',
            quote: b'"',
            escape: None,
        }
    }
}

/// Streaming CSV decoder; see the module doc.
pub struct CsvDecoder {
    target: arrow_schema::SchemaRef,
    names: crate::Names,
    conformer: Option<Conformer>,
    reader: Reader,
    delimiter: u8,
    batch_rows: usize,
    field_buf: Vec<u8>,
    ends: Vec<usize>,
    out_len: usize,
    ends_len: usize,
    record_line: u64,
    columns: Vec<StringBuilder>,
    lines: Vec<u64>,
    out: Decoded,
}

impl CsvDecoder {
    /// A decoder for `target`; with `opts.header` false the columns are `target`'s in order,
    /// otherwise the header's names find `target`'s columns as `names` says.
    pub fn new(
        target: arrow_schema::SchemaRef,
        opts: &CsvOptions,
        batch_rows: usize,
        names: crate::Names,
    ) -> Self {
        let reader = ReaderBuilder::new()
            .delimiter(opts.delimiter)
            .quote(opts.quote)
            .escape(opts.escape)
            .double_quote(opts.escape.is_none())
            .build();
        let mut d = CsvDecoder {
            target: target.clone(),
            names,
            conformer: None,
            reader,
            delimiter: opts.delimiter,
            batch_rows: batch_rows.max(1),
            field_buf: vec![0; 4096],
            ends: vec![0; 64],
            out_len: 0,
            ends_len: 0,
            record_line: 1,
            columns: Vec::new(),
            lines: Vec::new(),
            out: Decoded::default(),
        };
        if !opts.header {
            let names: Vec<String> = target.fields().iter().map(|f| f.name().clone()).collect();
            d.set_columns(&names);
        }
        d
    }

    fn set_columns(&mut self, names: &[String]) {
        self.columns = names.iter().map(|_| StringBuilder::new()).collect();
        self.conformer = Some(Conformer::for_text_source(
            self.target.clone(),
            names,
            self.names,
        ));
    }

    /// Feed bytes; an empty slice signals the end of input.
    fn feed(&mut self, mut input: &[u8]) -> Result<()> {
        let at_end = input.is_empty();
        loop {
            let (res, nin, nout, nend) = self.reader.read_record(
                input,
                &mut self.field_buf[self.out_len..],
                &mut self.ends[self.ends_len..],
            );
            input = &input[nin..];
            self.out_len += nout;
            self.ends_len += nend;
            match res {
                ReadRecordResult::InputEmpty => {
                    if input.is_empty() && !at_end {
                        return Ok(());
                    }
                }
                ReadRecordResult::OutputFull => {
                    let len = self.field_buf.len();
                    if len >= 64 << 20 {
                        return Err(Error::invalid_input(format!(
                            "csv record at line {} is longer than 64 MiB",
                            self.record_line
                        )));
                    }
                    self.field_buf.resize(len * 2, 0);
                }
                ReadRecordResult::OutputEndsFull => {
                    let len = self.ends.len();
                    self.ends.resize(len * 2, 0);
                }
                ReadRecordResult::Record => {
                    // csv-core skips blank lines inside the call, so the start line is counted
                    // back from the end: the terminator, then newlines quoted inside fields.
                    let embedded =
                        memchr::memchr_iter(b'\n', &self.field_buf[..self.out_len]).count();
                    let terminated = u64::from(!at_end);
                    self.record_line = self
                        .reader
                        .line()
                        .saturating_sub(terminated + embedded as u64)
                        .max(1);
                    self.record()?;
                    self.out_len = 0;
                    self.ends_len = 0;
                }
                ReadRecordResult::End => return Ok(()),
            }
        }
    }

    fn record(&mut self) -> Result<()> {
        let n = self.ends_len;
        let mut fields: Vec<&[u8]> = Vec::with_capacity(n);
        let mut start = 0;
        for &end in &self.ends[..n] {
            fields.push(&self.field_buf[start..end]);
            start = end;
        }
        if n == 1 && fields[0].is_empty() {
            return Ok(()); // a blank line
        }
        let line = self.record_line;
        if self.conformer.is_none() {
            let names: Vec<String> = fields
                .iter()
                .map(|f| String::from_utf8_lossy(f).trim().to_owned())
                .collect();
            self.set_columns(&names);
            return Ok(());
        }
        let raw = || {
            let joined = fields.join(&[self.delimiter][..]);
            truncate_raw(&joined)
        };
        if n > self.columns.len() {
            self.out.bad.push(BadRecord {
                line: Some(line),
                raw: raw(),
                reason: format!(
                    "record has {n} fields, the header has {}",
                    self.columns.len()
                ),
            });
            return Ok(());
        }
        let mut texts = Vec::with_capacity(n);
        for f in &fields {
            match std::str::from_utf8(f) {
                Ok(s) => texts.push(s),
                Err(_) => {
                    self.out.bad.push(BadRecord {
                        line: Some(line),
                        raw: raw(),
                        reason: "record is not valid utf-8".into(),
                    });
                    return Ok(());
                }
            }
        }
        for (i, col) in self.columns.iter_mut().enumerate() {
            match texts.get(i) {
                Some(t) => col.append_value(t),
                None => col.append_null(),
            }
        }
        self.lines.push(line);
        if self.lines.len() >= self.batch_rows {
            self.flush_batch()?;
        }
        Ok(())
    }

    fn flush_batch(&mut self) -> Result<()> {
        let Some(conformer) = &self.conformer else {
            return Ok(());
        };
        if self.lines.is_empty() {
            return Ok(());
        }
        let arrays: Vec<ArrayRef> = self
            .columns
            .iter_mut()
            .map(|b| Arc::new(b.finish()) as ArrayRef)
            .collect();
        let batch = RecordBatch::try_new(conformer.decode_schema().clone(), arrays)
            .map_err(|e| Error::unexpected("failed to assemble csv batch").with_source(e))?;
        let (good, bad) = conformer
            .conform(&batch)
            .map_err(|e| Error::invalid_input("failed to convert csv records").with_source(e))?;
        for (row, reason) in bad {
            let raw: Vec<String> = batch
                .columns()
                .iter()
                .map(|c| arrow_cast::display::array_value_to_string(c, row).unwrap_or_default())
                .collect();
            self.out.bad.push(BadRecord {
                line: Some(self.lines[row]),
                raw: truncate_raw(raw.join(&(self.delimiter as char).to_string()).as_bytes()),
                reason,
            });
        }
        if good.num_rows() > 0 {
            self.out.batches.push(good);
        }
        self.lines.clear();
        Ok(())
    }
}

impl StreamDecoder for CsvDecoder {
    fn push(&mut self, bytes: &[u8]) -> Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.feed(bytes)
    }

    fn finish(&mut self) -> Result<()> {
        self.feed(&[])?;
        self.flush_batch()
    }

    fn take(&mut self) -> Decoded {
        std::mem::take(&mut self.out)
    }
}
