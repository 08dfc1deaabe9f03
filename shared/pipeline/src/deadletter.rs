//! The dead-letter destination: records and objects floe could not land, with why.
//!
//! Each batch writes its dead letters as NDJSON to `<day>/<batch>-<part>.ndjson` in the
//! dead-letter store (a folder, or a prefix of a bucket: `[dead-letter] path`), one line per bad
//! record or unreadable object:
//! `{"time","batch","route","bucket","key","url","line","reason","raw"}`. Parts roll at 8 MiB so
//! a batch full of bad records never holds more than that in memory. A letter with a `line` is
//! one bad record of an object whose other records landed; a letter without one sets the whole
//! object aside (nothing of it was written, except for an object whose stream broke part way
//! through: the rows read before the break were kept).
//!
//! # Create-only writes
//!
//! A part is written with `If-None-Match: *` ([`PutMode::IfAbsent`]), never over an existing
//! object, so no writer can destroy letters another one wrote. Who can find a part's name taken:
//!
//! - an ingest, backfill or queue batch: its name holds a fresh id per attempt (a batch retried
//!   after a crash is a new batch with new names), so only its own earlier write of the same
//!   part can be there: a PUT the client retried after the answer was lost;
//! - a MaxCompute commit redone after a crash (`maxcompute`): its parts are named by commit,
//!   file and row group and filed under the commit's day, so the redo finds the parts the first
//!   attempt wrote. The rows MaxCompute refuses are found again the same way, so the redo's
//!   part normally holds the same letters.
//!
//! The rule: when the name is taken, the existing part is read; if it holds the same letters
//! (every field but `time` equal, in the same order) the write has already happened and counts
//! as done. If it holds anything else (the table changed between attempts and other rows were
//! refused, or a part cut short by a crash on a local disk), both are kept: the new letters go
//! to the next free name `<batch>-<part>.<n>.ndjson`, so no letter is lost and none is written
//! twice under the same name.

use std::sync::Arc;

use bytes::Bytes;
use floe_core::{Error, Result};
use floe_storage::{ObjectMeta, ObjectStore, PutMode, collect_body};
use serde::{Deserialize, Serialize};

const PART_BYTES: usize = 8 << 20;
/// Names tried for one part before giving up (see the module doc; more than a couple means
/// something keeps writing different letters under one batch's names).
const MAX_NAMES: u32 = 100;
/// The largest dead-letter file read back (a part rolls at 8 MiB, plus one letter).
const MAX_FILE_BYTES: usize = 64 << 20;

/// One dead letter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeadLetter {
    /// When it was set aside (RFC 3339).
    pub time: String,
    /// The batch.
    pub batch: String,
    /// The route.
    pub route: String,
    /// Bucket of the object.
    pub bucket: String,
    /// Key of the object.
    pub key: String,
    /// URL of the object.
    pub url: String,
    /// Line (or row) of the record; absent for a whole object.
    pub line: Option<u64>,
    /// Why.
    pub reason: String,
    /// The record's text (truncated), or empty for a whole object.
    pub raw: String,
}

/// A batch's dead-letter writer.
#[derive(Debug)]
pub struct DeadLetterWriter {
    store: Arc<dyn ObjectStore>,
    batch: String,
    day: String,
    buf: Vec<u8>,
    part: u32,
    count: u64,
}

impl DeadLetterWriter {
    /// A writer for `batch` into `store`.
    pub fn new(store: Arc<dyn ObjectStore>, batch: &str) -> Self {
        DeadLetterWriter {
            store,
            batch: batch.to_owned(),
            day: chrono::Utc::now().format("%Y-%m-%d").to_string(),
            buf: Vec::new(),
            part: 0,
            count: 0,
        }
    }

    /// The same writer filing under `day` (`YYYY-MM-DD`) rather than today, so that writing
    /// the same letters again after a crash meets the part already written (see the module doc)
    /// instead of adding a copy under another day.
    pub fn on_day(mut self, day: String) -> Self {
        self.day = day;
        self
    }

    /// Dead letters written (or buffered) so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Add one; flushes a part when the buffer is full.
    pub async fn add(&mut self, letter: &DeadLetter) -> Result<()> {
        serde_json::to_writer(&mut self.buf, letter).map_err(|e| {
            floe_core::Error::unexpected("failed to encode a dead letter").with_source(e)
        })?;
        self.buf.push(b'\n');
        self.count += 1;
        if self.buf.len() >= PART_BYTES {
            self.flush().await?;
        }
        Ok(())
    }

    /// Drop what is buffered and not yet written (a batch restarting its writing).
    pub fn discard_pending(&mut self) {
        let lines = self.buf.iter().filter(|b| **b == b'\n').count() as u64;
        self.count -= lines.min(self.count);
        self.buf.clear();
    }

    /// Write what is buffered, as the next part (create-only; see the module doc).
    pub async fn flush(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let body = Bytes::from(std::mem::take(&mut self.buf));
        self.put_part(body).await?;
        self.part += 1;
        Ok(())
    }

    /// Write one part under the first name that is free or already holds the same letters;
    /// returns the key.
    async fn put_part(&self, body: Bytes) -> Result<String> {
        for n in 0..MAX_NAMES {
            let key = part_key(&self.day, &self.batch, self.part, n);
            let written = self
                .store
                .put(&key, body.clone(), PutMode::IfAbsent)
                .await
                .map_err(|e| {
                    e.while_doing(format!(
                        "failed to write dead letters to {}",
                        self.store.url(&key)
                    ))
                })?;
            if written.is_some() {
                return Ok(key);
            }
            let existing = self.read_existing(&key).await?;
            if same_letters(&existing, &body) {
                tracing::info!(url = %self.store.url(&key), "dead letters already written by an earlier attempt");
                return Ok(key);
            }
            tracing::warn!(url = %self.store.url(&key), "a dead-letter part of this name holds other letters; writing under the next name");
        }
        Err(Error::unexpected(format!(
            "{MAX_NAMES} dead-letter parts named {} already exist with other letters",
            self.store
                .url(&part_key(&self.day, &self.batch, self.part, 0))
        )))
    }

    async fn read_existing(&self, key: &str) -> Result<Vec<u8>> {
        let got = self.store.get(key).await.map_err(|e| {
            e.while_doing(format!(
                "failed to read dead letters at {}",
                self.store.url(key)
            ))
        })?;
        collect_body(got.body, MAX_FILE_BYTES).await
    }
}

/// The key of part `part` of `batch` filed under `day`; `n > 0` are the further names a part
/// takes when its own is held by other letters.
fn part_key(day: &str, batch: &str, part: u32, n: u32) -> String {
    if n == 0 {
        format!("{day}/{batch}-{part:04}.ndjson")
    } else {
        format!("{day}/{batch}-{part:04}.{n}.ndjson")
    }
}

/// Whether two dead-letter files hold the same letters in the same order, `time` aside (an
/// attempt that writes the same letters again stamps them anew). Anything that does not parse
/// makes them differ.
pub fn same_letters(a: &[u8], b: &[u8]) -> bool {
    fn letters(text: &[u8]) -> Option<Vec<serde_json::Value>> {
        text.split(|b| *b == b'\n')
            .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
            .map(|l| {
                let mut v: serde_json::Value = serde_json::from_slice(l).ok()?;
                v.as_object_mut()?.remove("time");
                Some(v)
            })
            .collect()
    }
    match (letters(a), letters(b)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// One dead-letter file, read back.
#[derive(Clone, Debug, PartialEq)]
pub struct LetterFile {
    /// Its key in the dead-letter store (`<day>/<batch>-<part>.ndjson`).
    pub key: String,
    /// Its URL.
    pub url: String,
    /// Its letters, in order.
    pub letters: Vec<DeadLetter>,
    /// Lines (1-based) that are not dead letters (a part cut short on a local disk).
    pub unreadable_lines: Vec<usize>,
}

/// Every dead-letter file of the store (`*.ndjson`), in key order (so by day).
pub async fn list_files(store: &dyn ObjectStore) -> Result<Vec<ObjectMeta>> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = store.list("", token.as_deref(), 1000).await.map_err(|e| {
            e.while_doing(format!("failed to list dead letters at {}", store.url("")))
        })?;
        out.extend(
            page.objects
                .into_iter()
                .filter(|m| m.key.ends_with(".ndjson")),
        );
        match page.next_token {
            Some(t) => token = Some(t),
            None => break,
        }
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(out)
}

/// Read one dead-letter file.
pub async fn read_file(store: &dyn ObjectStore, key: &str) -> Result<LetterFile> {
    let got = store
        .get(key)
        .await
        .map_err(|e| e.while_doing(format!("failed to read dead letters at {}", store.url(key))))?;
    let body = collect_body(got.body, MAX_FILE_BYTES).await?;
    Ok(parse_file(key, store.url(key), &body))
}

/// Parse a dead-letter file's text.
pub fn parse_file(key: &str, url: String, body: &[u8]) -> LetterFile {
    let mut letters = Vec::new();
    let mut unreadable_lines = Vec::new();
    for (i, line) in body.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<DeadLetter>(line) {
            Ok(l) => letters.push(l),
            Err(_) => unreadable_lines.push(i + 1),
        }
    }
    LetterFile {
        key: key.to_owned(),
        url,
        letters,
        unreadable_lines,
    }
}

/// What the dead letters say about one object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LetteredObject {
    /// Its bucket.
    pub bucket: String,
    /// Its key.
    pub key: String,
    /// The URL a letter gave it (for a MaxCompute row: the staged file's; the first seen).
    pub url: String,
    /// Some letter set the whole object aside (no `line`).
    pub whole: bool,
    /// Letters about single records of it (with a `line`).
    pub records: u64,
    /// Reasons, each with how many letters gave it.
    pub reasons: std::collections::BTreeMap<String, u64>,
}

impl LetteredObject {
    /// Only single records of it were set aside: the rest of it landed, so landing it again
    /// lands that rest twice (in append mode).
    pub fn is_partial(&self) -> bool {
        !self.whole
    }
}

/// The objects the letters of `files` name, in bucket and key order. Letters that name no
/// object (an unreadable queue message) are left out.
pub fn lettered_objects(files: &[LetterFile]) -> Vec<LetteredObject> {
    let mut by: std::collections::BTreeMap<(String, String), LetteredObject> =
        std::collections::BTreeMap::new();
    for l in files.iter().flat_map(|f| f.letters.iter()) {
        if l.key.is_empty() {
            continue;
        }
        let o = by
            .entry((l.bucket.clone(), l.key.clone()))
            .or_insert_with(|| LetteredObject {
                bucket: l.bucket.clone(),
                key: l.key.clone(),
                url: l.url.clone(),
                ..Default::default()
            });
        match l.line {
            None => o.whole = true,
            Some(_) => o.records += 1,
        }
        *o.reasons.entry(l.reason.clone()).or_insert(0) += 1;
    }
    by.into_values().collect()
}

#[cfg(test)]
mod tests {
    use floe_storage::LocalStore;

    use super::*;

    fn letter(key: &str, line: Option<u64>, reason: &str) -> DeadLetter {
        DeadLetter {
            time: chrono::Utc::now().to_rfc3339(),
            batch: "b1".into(),
            route: "events".into(),
            bucket: "landing".into(),
            key: key.into(),
            url: format!("s3://landing/{key}"),
            line,
            reason: reason.into(),
            raw: line.map(|l| format!("bad {l}")).unwrap_or_default(),
        }
    }

    async fn write(store: &Arc<dyn ObjectStore>, letters: &[DeadLetter]) {
        let mut w = DeadLetterWriter::new(store.clone(), "b1").on_day("2026-03-04".into());
        for l in letters {
            w.add(l).await.unwrap();
        }
        w.flush().await.unwrap();
    }

    async fn files(store: &Arc<dyn ObjectStore>) -> Vec<LetterFile> {
        let mut out = Vec::new();
        for m in list_files(store.as_ref()).await.unwrap() {
            out.push(read_file(store.as_ref(), &m.key).await.unwrap());
        }
        out
    }

    #[tokio::test]
    async fn a_part_is_never_overwritten_and_the_same_letters_are_written_once() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::new(dir.path(), "dl").unwrap());
        let first = vec![
            letter("a.json", Some(3), "bad json"),
            letter("b.gz", None, "corrupt"),
        ];
        write(&store, &first).await;
        let got = files(&store).await;
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].key, "2026-03-04/b1-0000.ndjson");
        assert_eq!(got[0].letters, first);

        // The same letters again (a redo, stamped anew): the part already holds them.
        let again: Vec<DeadLetter> = first
            .iter()
            .map(|l| DeadLetter {
                time: "2030-01-01T00:00:00Z".into(),
                ..l.clone()
            })
            .collect();
        write(&store, &again).await;
        let got = files(&store).await;
        assert_eq!(got.len(), 1, "no copy: {got:?}");
        assert_eq!(got[0].letters, first, "the first write stands");

        // Other letters under the same name: kept beside it, never over it.
        let other = vec![letter("c.json", Some(9), "other row")];
        write(&store, &other).await;
        write(&store, &other).await;
        let got = files(&store).await;
        let keys: Vec<&str> = got.iter().map(|f| f.key.as_str()).collect();
        assert_eq!(
            keys,
            ["2026-03-04/b1-0000.1.ndjson", "2026-03-04/b1-0000.ndjson"]
        );
        assert_eq!(got[1].letters, first);
        assert_eq!(got[0].letters, other);
    }

    #[tokio::test]
    async fn a_part_cut_short_is_kept_and_the_letters_go_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::new(dir.path(), "dl").unwrap());
        let l = letter("a.json", None, "corrupt");
        let full = serde_json::to_string(&l).unwrap();
        store
            .put(
                "2026-03-04/b1-0000.ndjson",
                Bytes::from(full[..full.len() / 2].to_owned()),
                PutMode::Overwrite,
            )
            .await
            .unwrap();
        write(&store, std::slice::from_ref(&l)).await;
        let got = files(&store).await;
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].letters, [l]);
        assert!(got[1].letters.is_empty());
        assert_eq!(got[1].unreadable_lines, [1]);
    }

    #[test]
    fn objects_are_whole_or_partial_by_their_letters() {
        let f = LetterFile {
            key: "k".into(),
            url: "u".into(),
            letters: vec![
                letter("a.json", Some(3), "bad json"),
                letter("a.json", Some(5), "bad json"),
                letter("b.gz", None, "corrupt"),
                letter("b.gz", Some(1), "bad json"),
                DeadLetter {
                    key: String::new(),
                    bucket: String::new(),
                    ..letter("", None, "unreadable message")
                },
            ],
            unreadable_lines: vec![],
        };
        let objects = lettered_objects(&[f]);
        assert_eq!(objects.len(), 2, "the message names no object");
        let (a, b) = (&objects[0], &objects[1]);
        assert_eq!((a.key.as_str(), a.whole, a.records), ("a.json", false, 2));
        assert!(a.is_partial());
        assert_eq!(a.reasons["bad json"], 2);
        assert_eq!((b.key.as_str(), b.whole, b.records), ("b.gz", true, 1));
        assert!(!b.is_partial());
    }

    #[test]
    fn same_letters_ignores_only_the_time() {
        let a = letter("a", Some(1), "r");
        let enc = |ls: &[DeadLetter]| -> Vec<u8> {
            ls.iter()
                .flat_map(|l| {
                    let mut v = serde_json::to_vec(l).unwrap();
                    v.push(b'\n');
                    v
                })
                .collect()
        };
        let later = DeadLetter {
            time: "later".into(),
            ..a.clone()
        };
        let one = enc(std::slice::from_ref(&a));
        assert!(same_letters(&one, &enc(&[later])));
        let other_line = DeadLetter {
            line: Some(2),
            ..a.clone()
        };
        assert!(!same_letters(&one, &enc(&[other_line])));
        assert!(!same_letters(&one, &enc(&[a.clone(), a.clone()])));
        assert!(!same_letters(b"{\"trunc", &one));
    }
}
