//! Every payload shape in `tests/fixtures/events/` parsed into object changes.

use floe_core::event::{ParseOptions, parse_payload};
use floe_core::{Operation, Provider};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../../tests/fixtures/events/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

/// (operation, bucket, key, etag) of every change in a payload.
fn summary(name: &str, opts: &ParseOptions) -> Vec<(Operation, String, String, Option<String>)> {
    let parsed = parse_payload(&fixture(name), opts).unwrap_or_else(|e| panic!("{name}: {e}"));
    parsed
        .changes()
        .map(|c| (c.operation, c.bucket.clone(), c.key.clone(), c.etag.clone()))
        .collect()
}

#[test]
fn fc_oss_trigger_keeps_raw_keys_and_skips_parts_and_downloads() {
    let opts = ParseOptions::default();
    let parsed = parse_payload(&fixture("fc_oss_trigger.json"), &opts).unwrap();
    assert_eq!(parsed.messages.len(), 1);
    let m = &parsed.messages[0];
    let changes = m.changes.as_ref().unwrap();
    let keys: Vec<_> = changes
        .iter()
        .map(|c| (c.operation, c.key.as_str()))
        .collect();
    assert_eq!(
        keys,
        [
            (Operation::Created, "logs/2025/01/15/app events+1.json"),
            (Operation::Created, "数据/日志 2025.csv"),
            (Operation::Removed, "logs/old%2Fnot-decoded.json"),
        ]
    );
    let ignored: Vec<_> = m.ignored.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        ignored,
        ["ObjectCreated:UploadPart", "ObjectDownloaded:GetObject"]
    );
    let first = &changes[0];
    assert_eq!(first.provider, Provider::Oss);
    assert_eq!(first.region.as_deref(), Some("cn-hangzhou"));
    assert_eq!(first.size, Some(120));
    assert_eq!(
        first.etag.as_deref(),
        Some("5B3C1A2E8F0D4C6B9A7E3D2C1B0A9F8E")
    );
    assert_eq!(
        first.url(),
        "oss://floe-src/logs/2025/01/15/app events+1.json"
    );
    assert_eq!(first.file_name(), "app events+1.json");
    assert_eq!(
        first.event_time.map(|t| t.timestamp_millis()),
        Some(1_736_929_845_000)
    );
}

#[test]
fn oss_keys_can_be_declared_url_encoded() {
    let opts = ParseOptions {
        oss_keys_url_encoded: true,
    };
    let keys: Vec<_> = summary("fc_oss_trigger.json", &opts)
        .into_iter()
        .map(|s| s.2)
        .collect();
    assert_eq!(keys[0], "logs/2025/01/15/app events 1.json");
    assert_eq!(keys[2], "logs/old/not-decoded.json");
}

#[test]
fn mns_bodies_raw_and_base64_give_the_same_change() {
    let opts = ParseOptions::default();
    let raw = summary("mns_body_raw.json", &opts);
    let b64 = summary("mns_body_base64.txt", &opts);
    assert_eq!(raw, b64);
    assert_eq!(
        raw,
        [(
            Operation::Created,
            "mns-src".to_owned(),
            "in/a b+c.ndjson".to_owned(),
            Some("0CC175B9C0F1B6A831C399E269772661".to_owned())
        )]
    );
}

#[test]
fn s3_notification_decodes_keys_and_strips_etag_quotes() {
    let parsed = parse_payload(&fixture("s3_notification.json"), &ParseOptions::default()).unwrap();
    let changes: Vec<_> = parsed.changes().collect();
    assert_eq!(changes.len(), 3);
    assert_eq!(changes[0].key, "events/2025/01/my file+plus.json");
    assert_eq!(
        changes[0].url(),
        "s3://floe-src/events/2025/01/my file+plus.json"
    );
    assert_eq!(
        changes[0].version_id.as_deref(),
        Some("096fKKXTRTtl3on89fVO.nfljtsv6qko")
    );
    assert_eq!(changes[0].sequencer.as_deref(), Some("0055AED6DCD90281E5"));
    assert_eq!(changes[1].key, "日本語/データ.csv");
    assert_eq!(
        changes[1].etag.as_deref(),
        Some("9b2cf535f27731c974343645a3985328-3")
    );
    assert_eq!(changes[2].operation, Operation::Removed);
    assert_eq!(changes[2].event_name, "ObjectRemoved:DeleteMarkerCreated");
    assert_eq!(
        changes[0].sequencer_cmp(changes[1]),
        Some(std::cmp::Ordering::Less)
    );
}

#[test]
fn s3_test_event_is_ignored_not_an_error() {
    let parsed = parse_payload(&fixture("s3_test_event.json"), &ParseOptions::default()).unwrap();
    assert_eq!(parsed.messages.len(), 1);
    assert!(parsed.messages[0].changes.as_ref().unwrap().is_empty());
    assert_eq!(parsed.messages[0].ignored[0].0, "s3:TestEvent");
}

#[test]
fn sqs_event_keeps_each_message_apart() {
    let parsed = parse_payload(&fixture("sqs_event.json"), &ParseOptions::default()).unwrap();
    let ids: Vec<_> = parsed
        .messages
        .iter()
        .map(|m| (m.id.clone().unwrap(), m.changes.as_ref().map(Vec::len).ok()))
        .collect();
    assert_eq!(
        ids,
        [
            ("059f36b4-87a3-44ab-83d2-661975830a7d".to_owned(), Some(3)),
            ("2e1424d4-f796-459a-8184-9c92662be6da".to_owned(), None),
            ("a8f3b1c2-0000-4000-8000-000000000003".to_owned(), Some(0)),
            ("b9e4c2d3-0000-4000-8000-000000000004".to_owned(), Some(1)),
        ]
    );
    let bad = parsed.messages[1].changes.as_ref().unwrap_err();
    assert!(bad.to_string().contains("2e1424d4"), "{bad}");
    let moto = &parsed.messages[3].changes.as_ref().unwrap()[0];
    assert_eq!(moto.key, "dir/sub/a b.json");
    assert_eq!(
        moto.message_id.as_deref(),
        Some("b9e4c2d3-0000-4000-8000-000000000004")
    );
    assert_eq!(moto.sequencer, None);
    assert_eq!(
        moto.event_time.map(|t| t.timestamp_micros()),
        Some(1_736_929_845_123_456)
    );
    assert_eq!(
        parsed.messages[0].receipt_handle.as_deref(),
        Some("AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a...")
    );
}

#[test]
fn sns_wrapped_bodies_are_unwrapped() {
    let via_sqs = summary("sqs_sns_event.json", &ParseOptions::default());
    assert_eq!(via_sqs.len(), 1);
    assert_eq!(via_sqs[0].2, "events/2025/01/my file+plus.json");
    let via_lambda = summary("sns_lambda_event.json", &ParseOptions::default());
    assert_eq!(via_lambda.len(), 1);
    assert_eq!(via_lambda[0].2, "日本語/データ.csv");
}

#[test]
fn garbage_is_a_clear_error() {
    for (payload, want) in [
        (&b"<xml/>"[..], "neither json nor base64"),
        (&b"bm90IGpzb24="[..], "not valid json"),
        (&b"{\"hello\":1}"[..], "unrecognised event payload"),
        (&b"{\"events\":[{\"oss\":{}}]}"[..], "no eventName"),
    ] {
        let err = parse_payload(payload, &ParseOptions::default())
            .and_then(|p| p.messages.into_iter().next().unwrap().changes.map(|_| ()))
            .unwrap_err();
        assert!(err.to_string().contains(want), "{err} !~ {want}");
    }
}
