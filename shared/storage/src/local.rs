//! A local folder treated as a bucket: keys are paths relative to the folder, `/`-separated.
//!
//! The ETag of a file is its modification time and size (`<mtime ns hex>-<size hex>`): a changed
//! file gets a new one without reading it, the way `make` and `rsync` notice changes. Files and
//! folders whose names start with `.` are not listed, so writers can upload to a dot-file and
//! rename it into place.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use floe_core::{Error, ErrorKind, Provider, Result};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

use crate::store::{GetResult, ListPage, ObjectMeta, ObjectStore, PutMode};

const READ_CHUNK: usize = 1 << 20;

/// A folder as a bucket.
#[derive(Debug, Clone)]
pub struct LocalStore {
    root: PathBuf,
    bucket: String,
}

impl LocalStore {
    /// A store over `root` (created if missing), reported under the bucket name `bucket`.
    pub fn new(root: impl Into<PathBuf>, bucket: impl Into<String>) -> Result<Self> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(|e| {
            Error::from(e).while_doing(format!("failed to create {}", root.display()))
        })?;
        let root = root.canonicalize().map_err(|e| {
            Error::from(e).while_doing(format!("failed to resolve {}", root.display()))
        })?;
        Ok(LocalStore {
            root,
            bucket: bucket.into(),
        })
    }

    /// The folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, key: &str) -> Result<PathBuf> {
        if key.is_empty()
            || key.split('/').any(|seg| seg == ".." || seg == ".")
            || key.starts_with('/')
        {
            return Err(Error::invalid_input(format!("invalid object key `{key}`")));
        }
        Ok(self.root.join(key))
    }

    fn meta(key: String, md: &std::fs::Metadata) -> ObjectMeta {
        let modified = md.modified().ok();
        let nanos = modified
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        ObjectMeta {
            key,
            size: md.len(),
            etag: Some(format!("{nanos:x}-{:x}", md.len())),
            last_modified: modified.map(DateTime::<Utc>::from),
            version_id: None,
            content_type: None,
            content_encoding: None,
        }
    }

    /// Every file under `dir` whose key starts with `prefix`, sorted by key.
    fn walk(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        let mut out = Vec::new();
        let mut stack = vec![self.root.clone()];
        while let Some(dir) = stack.pop() {
            let entries = match std::fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(
                        Error::from(e).while_doing(format!("failed to list {}", dir.display()))
                    );
                }
            };
            for entry in entries {
                let entry = entry.map_err(Error::from)?;
                let name = entry.file_name();
                let Some(name) = name.to_str() else { continue };
                if name.starts_with('.') {
                    continue;
                }
                let path = entry.path();
                let rel = path
                    .strip_prefix(&self.root)
                    .map_err(|_| Error::unexpected("walked outside the root"))?;
                let key = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/");
                let ft = entry.file_type().map_err(Error::from)?;
                if ft.is_dir() {
                    // Only descend where keys can still match the prefix.
                    let dir_key = format!("{key}/");
                    if dir_key.starts_with(prefix) || prefix.starts_with(&dir_key) {
                        stack.push(path);
                    }
                } else if ft.is_file() && key.starts_with(prefix) {
                    let md = entry.metadata().map_err(Error::from)?;
                    out.push(Self::meta(key, &md));
                }
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }
}

#[async_trait]
impl ObjectStore for LocalStore {
    fn provider(&self) -> Provider {
        Provider::Local
    }

    fn bucket(&self) -> &str {
        &self.bucket
    }

    fn url(&self, key: &str) -> String {
        format!("file://{}/{key}", self.root.display())
    }

    async fn list(&self, prefix: &str, token: Option<&str>, max_keys: usize) -> Result<ListPage> {
        let this = self.clone();
        let prefix = prefix.to_owned();
        let all = tokio::task::spawn_blocking(move || this.walk(&prefix))
            .await
            .map_err(|e| Error::unexpected(format!("listing task failed: {e}")))??;
        let start = match token {
            Some(t) => all.partition_point(|m| m.key.as_str() <= t),
            None => 0,
        };
        let end = start.saturating_add(max_keys.max(1)).min(all.len());
        let objects = all[start..end].to_vec();
        let next_token = (end < all.len())
            .then(|| objects.last().map(|m| m.key.clone()))
            .flatten();
        Ok(ListPage {
            objects,
            next_token,
        })
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>> {
        match tokio::fs::metadata(self.path(key)?).await {
            Ok(md) if md.is_file() => Ok(Some(Self::meta(key.to_owned(), &md))),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::from(e).while_doing(format!("failed to stat {}", self.url(key)))),
        }
    }

    async fn get(&self, key: &str) -> Result<GetResult> {
        // Blocking file IO runs on tokio's blocking pool: one hand-off opens the file, reads its
        // metadata and the first chunk (all of a small object), one more per further chunk.
        let path = self.path(key)?;
        let url = self.url(key);
        let owned = key.to_owned();
        let (file, meta, first) =
            tokio::task::spawn_blocking(move || open_first(&path, &url, owned))
                .await
                .map_err(|e| Error::unexpected(format!("file read task failed: {e}")))??;
        let start = (Some(first), file);
        let body = futures::stream::try_unfold(start, |(first, file)| async move {
            if let Some(chunk) = first {
                return Ok((!chunk.is_empty()).then_some((chunk, (None, file))));
            }
            let Some(mut file) = file else {
                return Ok(None);
            };
            let (chunk, file) = tokio::task::spawn_blocking(move || -> Result<_> {
                let chunk = read_chunk(&mut file, READ_CHUNK)?;
                let more = chunk.len() == READ_CHUNK;
                Ok((chunk, more.then_some(file)))
            })
            .await
            .map_err(|e| Error::unexpected(format!("file read task failed: {e}")))??;
            Ok((!chunk.is_empty()).then_some((chunk, (None, file))))
        });
        Ok(GetResult {
            meta,
            body: Box::pin(body),
        })
    }

    async fn get_range(&self, key: &str, start: u64, end: u64) -> Result<Bytes> {
        let mut file = tokio::fs::File::open(self.path(key)?)
            .await
            .map_err(|e| Error::from(e).while_doing(format!("failed to open {}", self.url(key))))?;
        file.seek(std::io::SeekFrom::Start(start))
            .await
            .map_err(Error::from)?;
        let mut buf = vec![0u8; end.saturating_sub(start) as usize];
        file.read_exact(&mut buf).await.map_err(Error::from)?;
        Ok(Bytes::from(buf))
    }

    async fn put(&self, key: &str, body: Bytes, mode: PutMode) -> Result<Option<String>> {
        let path = self.path(key)?;
        if let Some(dir) = path.parent() {
            tokio::fs::create_dir_all(dir).await.map_err(Error::from)?;
        }
        match &mode {
            PutMode::IfAbsent => {
                let mut f = match tokio::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .await
                {
                    Ok(f) => f,
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(None),
                    Err(e) => return Err(Error::from(e)),
                };
                f.write_all(&body).await.map_err(Error::from)?;
                f.sync_all().await.map_err(Error::from)?;
            }
            PutMode::IfMatch(etag) => {
                let current = self.head(key).await?;
                if current.and_then(|m| m.etag).as_deref() != Some(etag.as_str()) {
                    return Ok(None);
                }
                write_atomically(&path, &body).await?;
            }
            PutMode::Overwrite => write_atomically(&path, &body).await?,
        }
        Ok(self.head(key).await?.and_then(|m| m.etag))
    }

    async fn delete(&self, key: &str) -> Result<()> {
        match tokio::fs::remove_file(self.path(key)?).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::from(e)),
        }
    }

    /// Compare, then remove: atomic only against writers in this process's timing, which is
    /// what a local folder offers.
    async fn delete_if_match(&self, key: &str, etag: &str) -> Result<bool> {
        let current = self.head(key).await?;
        if current.and_then(|m| m.etag).as_deref() != Some(etag) {
            return Ok(false);
        }
        match tokio::fs::remove_file(self.path(key)?).await {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::from(e)),
        }
    }

    fn local_path(&self, key: &str) -> Option<PathBuf> {
        self.path(key).ok()
    }

    fn get_blocking(&self, key: &str) -> Option<Result<(ObjectMeta, Vec<Bytes>)>> {
        let read = || {
            let path = self.path(key)?;
            let (mut file, meta, first) = open_first(&path, &self.url(key), key.to_owned())?;
            // The chunks `get`'s body would give: none empty.
            let mut chunks: Vec<Bytes> = (!first.is_empty()).then_some(first).into_iter().collect();
            while let Some(mut f) = file.take() {
                let chunk = read_chunk(&mut f, READ_CHUNK)?;
                if chunk.len() == READ_CHUNK {
                    file = Some(f);
                }
                if !chunk.is_empty() {
                    chunks.push(chunk);
                }
            }
            Ok((meta, chunks))
        };
        Some(read())
    }
}

/// Open the file at `path` (the object `key`, at `url`), read its metadata and its first chunk
/// (all of a small object, into a buffer of its size); the file comes back when there may be
/// more to read.
fn open_first(
    path: &Path,
    url: &str,
    key: String,
) -> Result<(Option<std::fs::File>, ObjectMeta, Bytes)> {
    let mut file = std::fs::File::open(path)
        .map_err(|e| Error::from(e).while_doing(format!("failed to open {url}")))?;
    let md = file.metadata().map_err(Error::from)?;
    let meta = LocalStore::meta(key, &md);
    let cap = usize::try_from(md.len())
        .unwrap_or(READ_CHUNK)
        .clamp(1, READ_CHUNK);
    let first = read_chunk(&mut file, cap)?;
    let more = first.len() == READ_CHUNK;
    Ok((more.then_some(file), meta, first))
}

/// Up to `cap` bytes from the file's position (fewer only at its end).
fn read_chunk(file: &mut std::fs::File, cap: usize) -> Result<Bytes> {
    use std::io::Read;
    // Read into spare capacity: zeroing the buffer first would cost a pass over every byte
    // of the object. `read_to_end` grows its reads from 8 KiB, so a chunk takes several read
    // calls (about 3 for a 36 KiB object, 8 for 1 MiB); measured, that still costs less than
    // the memset. One call into uninitialised memory needs `Read::read_buf`, not yet stable.
    let mut buf = Vec::with_capacity(cap);
    (file.by_ref().take(cap as u64))
        .read_to_end(&mut buf)
        .map_err(Error::from)?;
    Ok(Bytes::from(buf))
}

/// Replace the file at `path` with `body` through a temporary file and a rename, so a reader
/// sees the old content or the new, never part of it.
///
/// The new file's modification time is made later than the old one's: an ETag is the time
/// and the size, and the kernel stamps new files with a clock that ticks every few
/// milliseconds, so two writes of the same size within one tick would otherwise share a
/// version, and a compare-and-set holding the first would overwrite the second.
async fn write_atomically(path: &Path, body: &[u8]) -> Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| Error::new(ErrorKind::InvalidInput, "object path has no file name"))?;
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    tokio::fs::write(&tmp, body).await.map_err(Error::from)?;
    let old = tokio::fs::metadata(path)
        .await
        .ok()
        .and_then(|m| m.modified().ok());
    if let Some(old) = old {
        let tmp = tmp.clone();
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            let file = std::fs::OpenOptions::new().write(true).open(&tmp)?;
            let new = file.metadata()?.modified()?;
            if new <= old {
                file.set_modified(old + std::time::Duration::from_micros(1))?;
            }
            Ok(())
        })
        .await
        .map_err(|e| Error::unexpected(format!("setting a file time: {e}")))?
        .map_err(Error::from)?;
    }
    tokio::fs::rename(&tmp, path).await.map_err(Error::from)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect_body;

    #[tokio::test]
    async fn a_blocking_get_gives_what_get_gives() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path(), "b").unwrap();
        let sizes = [0, 1, 5000, READ_CHUNK, READ_CHUNK + 7, 2 * READ_CHUNK];
        for (i, size) in sizes.into_iter().enumerate() {
            let key = format!("d/o{i}");
            let bytes: Vec<u8> = (0..size).map(|k| (k % 251) as u8).collect();
            store
                .put(&key, Bytes::from(bytes.clone()), PutMode::Overwrite)
                .await
                .unwrap();
            let got = store.get(&key).await.unwrap();
            let chunks: Vec<Bytes> = futures::StreamExt::collect::<Vec<_>>(got.body)
                .await
                .into_iter()
                .map(Result::unwrap)
                .collect();
            let (meta, blocking) = store.get_blocking(&key).unwrap().unwrap();
            assert_eq!(meta, got.meta, "size {size}");
            assert_eq!(blocking, chunks, "size {size}: the same chunks");
            assert_eq!(blocking.concat(), bytes);
        }
        let missing = store.get_blocking("d/none").unwrap().unwrap_err();
        assert_eq!(
            missing.kind(),
            store.get("d/none").await.err().unwrap().kind()
        );
        assert_eq!(missing.kind(), ErrorKind::NotFound);
        assert!(store.get_blocking("../escape").unwrap().is_err());
    }

    /// File times tick coarsely (a few milliseconds on Linux): two writes of the same length
    /// within one tick must still get different versions, or a compare-and-set on the first
    /// one's version would overwrite the second. (The checkpoint conformance suite met this
    /// twice under load; here the old file's time is also set ahead of the clock, as a file
    /// written within the same tick, or by a clock since set back, would be.)
    #[tokio::test]
    async fn every_write_changes_the_version_even_within_one_clock_tick() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path(), "local").unwrap();
        let mut version = store
            .put("k", Bytes::from("v-0"), PutMode::IfAbsent)
            .await
            .unwrap()
            .unwrap();
        for i in 1..500 {
            if i % 50 == 0 {
                // The current file stamped ahead of the clock: the next write's own stamp
                // would be earlier, and could equal a later one's.
                let ahead = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(dir.path().join("k"))
                    .unwrap();
                f.set_modified(ahead).unwrap();
                version = store.head("k").await.unwrap().unwrap().etag.unwrap();
            }
            let body = Bytes::from(format!("v-{}", i % 10));
            let next = store
                .put("k", body, PutMode::IfMatch(version.clone()))
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("write {i} lost its compare-and-set"));
            assert_ne!(next, version, "write {i} kept the version");
            let before = version
                .split('-')
                .next()
                .map(|t| u128::from_str_radix(t, 16).unwrap());
            let after = next
                .split('-')
                .next()
                .map(|t| u128::from_str_radix(t, 16).unwrap());
            assert!(
                after > before,
                "write {i}: its time went back ({version} → {next})"
            );
            version = next;
        }
    }

    #[tokio::test]
    async fn lists_pages_reads_and_writes_conditionally() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path(), "local").unwrap();
        for k in [
            "b/2.json",
            "a/1.json",
            "a/nested/3.csv",
            ".hidden/x",
            "a/.part",
        ] {
            store
                .put(k, Bytes::from(k.to_owned()), PutMode::Overwrite)
                .await
                .unwrap();
        }
        let mut keys = Vec::new();
        let mut token = None;
        loop {
            let page = store.list("", token.as_deref(), 2).await.unwrap();
            keys.extend(page.objects.iter().map(|m| m.key.clone()));
            match page.next_token {
                Some(t) => token = Some(t),
                None => break,
            }
        }
        assert_eq!(keys, ["a/1.json", "a/nested/3.csv", "b/2.json"]);
        let page = store.list("a/n", None, 100).await.unwrap();
        assert_eq!(page.objects.len(), 1);

        let got = store.get("a/1.json").await.unwrap();
        assert_eq!(got.meta.size, 8);
        assert_eq!(collect_body(got.body, 100).await.unwrap(), b"a/1.json");
        assert_eq!(
            store.get_range("a/1.json", 2, 5).await.unwrap().as_ref(),
            b"1.j"
        );
        assert_eq!(
            store.get("nope").await.unwrap_err().kind(),
            ErrorKind::NotFound
        );

        assert!(
            store
                .put("c", Bytes::from("1"), PutMode::IfAbsent)
                .await
                .unwrap()
                .is_some()
        );
        assert!(
            store
                .put("c", Bytes::from("2"), PutMode::IfAbsent)
                .await
                .unwrap()
                .is_none()
        );
        let etag = store.head("c").await.unwrap().unwrap().etag.unwrap();
        assert!(
            store
                .put("c", Bytes::from("22"), PutMode::IfMatch("stale".into()))
                .await
                .unwrap()
                .is_none()
        );
        let new = store
            .put("c", Bytes::from("22"), PutMode::IfMatch(etag.clone()))
            .await
            .unwrap()
            .unwrap();
        assert_ne!(new, etag);
        assert!(store.get("../escape").await.is_err());
        assert_eq!(
            store.url("a/1.json"),
            format!("file://{}/a/1.json", store.root().display())
        );
    }
}
