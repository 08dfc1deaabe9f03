//! `S3Store` against a real `s3s-fs` server on 127.0.0.1 (SigV4 checked, conditional writes,
//! ListObjectsV2 pagination, ranged and streamed GETs).

use std::collections::BTreeSet;

use bytes::Bytes;
use floe_core::{ErrorKind, Provider, Secret};
use floe_storage::{ObjectStore, PutMode, S3Store, S3StoreConfig, collect_body};
use floe_testbed::servers::S3sFs;
use futures::StreamExt;

const BUCKET: &str = "floe-test";

async fn server() -> S3sFs {
    let s = S3sFs::start().await.expect("start s3s-fs");
    s.create_bucket(BUCKET).unwrap();
    s
}

fn config(s: &S3sFs, provider: Provider) -> S3StoreConfig {
    S3StoreConfig::new(provider, BUCKET)
        .with_endpoint(s.endpoint())
        .with_region(S3sFs::REGION)
        .with_path_style(true)
        .with_keys(S3sFs::ACCESS_KEY_ID, S3sFs::SECRET_ACCESS_KEY, None)
}

async fn store(s: &S3sFs) -> S3Store {
    S3Store::new(config(s, Provider::S3)).await.unwrap()
}

async fn list_all(store: &S3Store, prefix: &str, page: usize) -> (Vec<String>, usize) {
    let mut keys = Vec::new();
    let mut token = None;
    let mut pages = 0;
    loop {
        let p = store.list(prefix, token.as_deref(), page).await.unwrap();
        pages += 1;
        assert!(
            p.objects.len() <= page,
            "page of {} > {page}",
            p.objects.len()
        );
        keys.extend(p.objects.into_iter().map(|m| m.key));
        match p.next_token {
            Some(t) => token = Some(t),
            None => break,
        }
    }
    (keys, pages)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_thousands_of_keys_across_prefixes_page_by_page() {
    let s = server().await;
    let store = store(&s).await;
    // Written straight into the served folder (s3s-fs serves files as objects): 3,000 PUTs
    // would only test the same call 3,000 times.
    let mut want = BTreeSet::new();
    for (prefix, n) in [("a/", 1200), ("b/nested/", 900), ("c", 400)] {
        for i in 0..n {
            let key = format!("{prefix}{i:05}.json");
            let path = s.root().join(BUCKET).join(&key);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, format!("{{\"i\":{i}}}")).unwrap();
            want.insert(key);
        }
    }
    // And a few through the API.
    for k in ["b/api-1.json", "b/api-2.json"] {
        store
            .put(k, Bytes::from_static(b"{}"), PutMode::Overwrite)
            .await
            .unwrap();
        want.insert(k.to_owned());
    }

    let (keys, pages) = list_all(&store, "", 1000).await;
    assert_eq!(pages, 3, "2,502 keys in pages of 1,000");
    let sorted: Vec<String> = want.iter().cloned().collect();
    assert_eq!(keys, sorted, "every key once, in key order");

    let (b, pages) = list_all(&store, "b/", 250).await;
    assert_eq!((b.len(), pages), (902, 4));
    assert!(b.iter().all(|k| k.starts_with("b/")));

    let (c, _) = list_all(&store, "c", 1000).await;
    assert_eq!(c.len(), 400);
    let page = store.list("a/", None, 5).await.unwrap();
    let first = &page.objects[0];
    assert_eq!(first.key, "a/00000.json");
    assert_eq!(first.size, 7, "{{\"i\":0}}");
    assert!(first.last_modified.is_some());
    // ETags come without quotes (s3s-fs sends none in listings, so HEAD shows it).
    let etag = store
        .head("b/api-1.json")
        .await
        .unwrap()
        .unwrap()
        .etag
        .unwrap();
    assert!(!etag.is_empty() && !etag.contains('"'), "{etag}");
    assert!(
        store
            .list("nothing/", None, 10)
            .await
            .unwrap()
            .objects
            .is_empty()
    );
}

/// Byte `i` of the big object.
fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 11)) as u8
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_a_64_mib_object_in_small_chunks() {
    const SIZE: usize = 64 << 20;
    let s = server().await;
    let store = store(&s).await;
    let body: Vec<u8> = (0..SIZE).map(pattern).collect();
    store
        .put("big/object.bin", Bytes::from(body), PutMode::Overwrite)
        .await
        .unwrap();

    let got = store.get("big/object.bin").await.unwrap();
    assert_eq!(got.meta.size, SIZE as u64);
    let mut body = got.body;
    let (mut offset, mut max_chunk, mut chunks) = (0usize, 0usize, 0usize);
    while let Some(chunk) = body.next().await {
        let chunk = chunk.unwrap();
        max_chunk = max_chunk.max(chunk.len());
        chunks += 1;
        for (j, b) in chunk.iter().enumerate() {
            assert_eq!(*b, pattern(offset + j), "byte {}", offset + j);
        }
        offset += chunk.len();
        // Only this chunk is held: dropped before the next one is read.
    }
    assert_eq!(offset, SIZE);
    assert!(
        max_chunk <= 1 << 20,
        "largest chunk held was {max_chunk} bytes ({chunks} chunks): the body is not streamed"
    );
    assert!(chunks >= 64, "{chunks} chunks");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_puts_answer_none_when_the_condition_fails() {
    let s = server().await;
    let store = store(&s).await;
    let k = "state/entry.json";
    let v1 = store
        .put(k, Bytes::from_static(b"one"), PutMode::IfAbsent)
        .await
        .unwrap()
        .expect("absent key is created");
    assert!(!v1.is_empty() && !v1.contains('"'));
    assert_eq!(
        store
            .put(k, Bytes::from_static(b"two"), PutMode::IfAbsent)
            .await
            .unwrap(),
        None,
        "If-None-Match: * on an existing key"
    );
    assert_eq!(store.head(k).await.unwrap().unwrap().etag, Some(v1.clone()));
    let v2 = store
        .put(k, Bytes::from_static(b"two"), PutMode::IfMatch(v1.clone()))
        .await
        .unwrap()
        .expect("If-Match with the current etag");
    assert_ne!(v1, v2);
    assert_eq!(
        store
            .put(k, Bytes::from_static(b"three"), PutMode::IfMatch(v1))
            .await
            .unwrap(),
        None,
        "If-Match with a stale etag"
    );
    assert_eq!(
        store
            .put(
                "state/missing",
                Bytes::from_static(b"x"),
                PutMode::IfMatch(v2.clone())
            )
            .await
            .unwrap(),
        None,
        "If-Match on a missing key"
    );
    let got = store.get(k).await.unwrap();
    assert_eq!(got.meta.etag, Some(v2));
    assert_eq!(collect_body(got.body, 100).await.unwrap(), b"two");
    store.delete(k).await.unwrap();
    store.delete(k).await.unwrap();
    assert!(store.head(k).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranged_reads_return_exactly_the_range() {
    let s = server().await;
    let store = store(&s).await;
    let body: Vec<u8> = (0..10_000usize).map(pattern).collect();
    store
        .put("r.bin", Bytes::from(body.clone()), PutMode::Overwrite)
        .await
        .unwrap();
    for (start, end) in [(0u64, 10u64), (4096, 8192), (9_992, 10_000), (5, 6)] {
        let got = store.get_range("r.bin", start, end).await.unwrap();
        assert_eq!(
            got.as_ref(),
            &body[start as usize..end as usize],
            "{start}..{end}"
        );
    }
    assert!(store.get_range("r.bin", 7, 7).await.unwrap().is_empty());
    let e = store.get_range("r.bin", 9_990, 10_010).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_name_the_object_and_have_the_right_kind() {
    let s = server().await;
    let store = store(&s).await;
    let e = store.get("no/such.json").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e:?}");
    assert!(e.to_string().contains("s3://floe-test/no/such.json"), "{e}");
    assert!(!e.is_retryable());
    assert!(store.head("no/such.json").await.unwrap().is_none());
    store.delete("no/such.json").await.unwrap();

    let mut wrong = config(&s, Provider::S3);
    wrong.secret_access_key = Some(Secret::new("not-the-secret"));
    wrong.max_attempts = 1;
    let bad = S3Store::new(wrong).await.unwrap();
    let e = bad.get("x").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Auth, "{e:?}");
    assert!(!format!("{e:?}").contains("not-the-secret"));

    let mut other = config(&s, Provider::S3);
    other.bucket = "no-such-bucket".into();
    let e = S3Store::new(other)
        .await
        .unwrap()
        .list("", None, 10)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e:?}");
}

/// The OSS flavour (checksums only when required, `oss://` URLs) speaks the same S3 API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oss_flavour_round_trips_with_checksums_when_required() {
    let s = server().await;
    let store = S3Store::new(config(&s, Provider::Oss)).await.unwrap();
    assert_eq!(store.url("a/b.json"), "oss://floe-test/a/b.json");
    store
        .put(
            "a/b.json",
            Bytes::from_static(b"{\"x\":1}"),
            PutMode::IfAbsent,
        )
        .await
        .unwrap()
        .unwrap();
    let got = store.get("a/b.json").await.unwrap();
    assert_eq!(collect_body(got.body, 100).await.unwrap(), b"{\"x\":1}");
    let e = store.get("a/none").await.unwrap_err();
    assert!(e.to_string().contains("oss://floe-test/a/none"), "{e}");
}

/// An OSS store built once keeps working when its STS token is replaced: with the platform's
/// keys it signs each request with the latest ones Function Compute handed the process.
#[tokio::test]
async fn oss_requests_carry_the_latest_platform_token() {
    use floe_signing::credentials::set_platform_credentials;
    use floe_signing::{CredentialSource, Credentials};
    use floe_testbed::servers::Linearizer;

    let s = server().await;
    let front = Linearizer::start(&s.endpoint()).await.unwrap();
    let keys = |token: &str| {
        Credentials::new(S3sFs::ACCESS_KEY_ID, S3sFs::SECRET_ACCESS_KEY).with_security_token(token)
    };
    let store = S3Store::new(
        S3StoreConfig::new(Provider::Oss, BUCKET)
            .with_endpoint(front.endpoint())
            .with_region(S3sFs::REGION)
            .with_path_style(true)
            .with_credential_source(CredentialSource::alibaba(keys("T1-from-env"))),
    )
    .await
    .unwrap();
    front.set_required_security_token(Some("T1-from-env"));
    store
        .put("a", Bytes::from_static(b"1"), PutMode::Overwrite)
        .await
        .unwrap();
    front.set_required_security_token(Some("T2-from-fc"));
    set_platform_credentials(keys("T2-from-fc"));
    store
        .put("b", Bytes::from_static(b"2"), PutMode::IfAbsent)
        .await
        .unwrap();
    assert_eq!(front.token_refusals(), 0);
}

/// A streamed upload: a small object is one PUT, a large one a multipart upload whose parts
/// are cut at the part size whatever the sizes of the writes, read back byte for byte; a
/// failed part aborts the upload and leaves no object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_stream_in_parts_and_read_back_whole() {
    let s = server().await;
    let store = store(&s).await;
    let mut small = store.upload("u/small.bin");
    small.write(b"hello ").await.unwrap();
    small.write(b"world").await.unwrap();
    small.finish().await.unwrap();
    let got = store.get("u/small.bin").await.unwrap();
    assert_eq!(collect_body(got.body, 100).await.unwrap(), b"hello world");

    // 5 MiB parts (S3's least), written in odd-sized pieces: 3 parts, the last one short.
    const PART: usize = 5 << 20;
    let body: Vec<u8> = (0..(2 * PART + 12_345)).map(pattern).collect();
    let mut big = store.upload_in_parts_of("u/big.bin", PART);
    for piece in body.chunks(777_777) {
        big.write(piece).await.unwrap();
    }
    big.finish().await.unwrap();
    let meta = store.head("u/big.bin").await.unwrap().unwrap();
    assert_eq!(meta.size, body.len() as u64);
    // A multipart object's ETag says how many parts it has (`<md5 of md5s>-<parts>`).
    assert!(
        meta.etag.as_deref().is_some_and(|e| e.ends_with("-3")),
        "{meta:?}"
    );
    let got = store.get("u/big.bin").await.unwrap();
    let back = collect_body(got.body, body.len()).await.unwrap();
    assert!(
        back == body,
        "the object read back differs from what was written"
    );

    // A part the server refuses (keys it does not know): an error naming the object, and no
    // object afterwards.
    let mut wrong = config(&s, Provider::S3);
    wrong.secret_access_key = Some(Secret::new("not-the-secret"));
    wrong.max_attempts = 1;
    let refused = S3Store::new(wrong).await.unwrap();
    let mut upload = refused.upload_in_parts_of("u/refused.bin", PART);
    let e = upload.write(&body[..PART]).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Auth, "{e:?}");
    assert!(
        e.to_string().contains("s3://floe-test/u/refused.bin"),
        "{e}"
    );
    assert!(store.head("u/refused.bin").await.unwrap().is_none());
}
