//! A table's FileIO on `s3://` against a real s3s-fs server: metadata-sized writes, a data file
//! streamed in parts, ranged reads, and the deletes maintenance makes.

use std::collections::HashMap;

use bytes::Bytes;
use floe_iceberg::rest::table_file_io;
use floe_testbed::servers::S3sFs;
use futures::StreamExt;

const BUCKET: &str = "lake";

fn props(s: &S3sFs) -> HashMap<String, String> {
    [
        ("s3.endpoint", s.endpoint()),
        ("s3.region", S3sFs::REGION.to_owned()),
        ("s3.path-style-access", "true".to_owned()),
        ("s3.access-key-id", S3sFs::ACCESS_KEY_ID.to_owned()),
        ("s3.secret-access-key", S3sFs::SECRET_ACCESS_KEY.to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_are_written_streamed_read_by_range_and_deleted() {
    let s = S3sFs::start().await.expect("start s3s-fs");
    s.create_bucket(BUCKET).unwrap();
    let io = table_file_io("s3://lake/warehouse/t", &props(&s)).unwrap();

    let meta = "s3://lake/warehouse/t/metadata/00000-a.metadata.json";
    let out = io.new_output(meta).unwrap();
    assert!(!out.exists().await.unwrap());
    out.write(Bytes::from_static(b"{\"format-version\":2}"))
        .await
        .unwrap();
    let input = io.new_input(meta).unwrap();
    assert!(input.exists().await.unwrap());
    assert_eq!(&input.read().await.unwrap()[..], b"{\"format-version\":2}");

    // A data file larger than a part (8 MiB), written in the Parquet writer's way: many writes.
    let body: Vec<u8> = (0..(20usize << 20)).map(|i| (i % 251) as u8).collect();
    let data = "s3a://lake/warehouse/t/data/part-0.parquet";
    let mut w = io.new_output(data).unwrap().writer().await.unwrap();
    for piece in body.chunks(1 << 20) {
        w.write(Bytes::copy_from_slice(piece)).await.unwrap();
    }
    w.close().await.unwrap();
    let input = io.new_input(data).unwrap();
    assert_eq!(input.metadata().await.unwrap().size, body.len() as u64);
    let reader = input.reader().await.unwrap();
    let len = body.len() as u64;
    for range in [0..8, (len - 8)..len, 8_388_600..8_388_700] {
        let got = reader.read(range.clone()).await.unwrap();
        let want = &body[range.start as usize..range.end as usize];
        assert_eq!(&got[..], want, "{range:?}");
    }
    assert!(input.read().await.unwrap() == body, "whole read");

    // Deletes: one file, a stream of them, a prefix; a missing file deletes as done.
    io.delete(meta).await.unwrap();
    io.delete(meta).await.unwrap();
    assert!(!io.exists(meta).await.unwrap());
    let names: Vec<String> = (0..30)
        .map(|i| format!("s3://lake/warehouse/t/data/orphan-{i}.parquet"))
        .collect();
    for n in &names {
        io.new_output(n).unwrap().write(Bytes::new()).await.unwrap();
    }
    io.delete_stream(futures::stream::iter(names[..10].to_vec()).boxed())
        .await
        .unwrap();
    assert!(!io.exists(&names[0]).await.unwrap() && io.exists(&names[10]).await.unwrap());
    io.delete_prefix("s3://lake/warehouse/t/data")
        .await
        .unwrap();
    assert!(!io.exists(&names[29]).await.unwrap() && !io.exists(data).await.unwrap());

    // A missing file and a path of another bucket's scheme are errors naming them.
    let Err(e) = io.new_input(data).unwrap().metadata().await else {
        panic!("{data} was deleted")
    };
    assert!(e.to_string().contains("part-0.parquet"), "{e}");
    let e = io
        .new_input("oss://lake/x")
        .unwrap()
        .read()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("oss://lake/x"), "{e}");
}

/// The FileIOs a catalog opens for its tables share one client per endpoint and keys: a table
/// loaded again does not build a new client (nor open new connections).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalogs_file_ios_share_their_clients() {
    let s = S3sFs::start().await.expect("start s3s-fs");
    s.create_bucket(BUCKET).unwrap();
    let file_ios = floe_iceberg::rest::TableFileIo::default();
    for table in ["a", "b", "a"] {
        let io = file_ios
            .open(&format!("s3://lake/warehouse/{table}"), &props(&s))
            .unwrap();
        let path = format!("s3://lake/warehouse/{table}/metadata/v.json");
        io.new_output(&path)
            .unwrap()
            .write(Bytes::from_static(b"{}"))
            .await
            .unwrap();
        assert!(io.exists(&path).await.unwrap());
    }
    assert_eq!(file_ios.clients(), 1);
    // Other keys (a catalog vending new ones for a load) are another client.
    let mut vended = props(&s);
    vended.insert("s3.session-token".into(), "next".into());
    let io = file_ios.open("s3://lake/warehouse/a", &vended).unwrap();
    let _ = io.exists("s3://lake/warehouse/a/metadata/v.json").await;
    assert_eq!(file_ios.clients(), 2);
}
