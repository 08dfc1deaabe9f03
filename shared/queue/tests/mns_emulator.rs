//! The MNS client against the MNS emulator over real HTTP on 127.0.0.1.

use std::time::{Duration, Instant};

use floe_core::ErrorKind;
use floe_queue::mns::{MnsClient, MnsConfig, is_stale_receipt_handle, mns_code, xml};
use floe_signing::Credentials;
use floe_testbed::mns::{MnsEmulator, MnsEmulatorConfig};

const QUEUE: &str = "oss-events";

fn creds() -> Credentials {
    Credentials::new(
        "LTAI5tTestAccessKeyId01",
        "TestAccessKeySecret0123456789abcdefXYZ",
    )
}

async fn emulator() -> MnsEmulator {
    MnsEmulator::start(MnsEmulatorConfig::new(creds()).with_queue(QUEUE))
        .await
        .unwrap()
}

fn client(emu: &MnsEmulator, credentials: Credentials, queue: &str) -> MnsClient {
    MnsClient::new(MnsConfig::new(emu.endpoint(), queue, credentials)).unwrap()
}

#[tokio::test]
async fn long_poll_returns_as_soon_as_a_message_arrives() {
    let emu = emulator().await;
    let c = client(&emu, creds(), QUEUE);
    let started = Instant::now();
    let poll = tokio::spawn({
        let c = c.clone();
        async move { c.batch_receive_message(16, Some(20)).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    emu.send_message(QUEUE, "{\"events\":[]}").unwrap();
    let got = poll.await.unwrap().unwrap();
    let waited = started.elapsed();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body, "{\"events\":[]}");
    assert_eq!(got[0].decoded_body().unwrap(), b"{\"events\":[]}");
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(5),
        "long poll took {waited:?}"
    );
}

#[tokio::test]
async fn an_empty_long_poll_is_no_messages() {
    let emu = emulator().await;
    let c = client(&emu, creds(), QUEUE);
    let started = Instant::now();
    assert!(
        c.batch_receive_message(16, Some(1))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "the poll did wait"
    );
    assert_eq!(c.receive_message(Some(0)).await.unwrap(), None);
    let statuses: Vec<u16> = emu.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [404, 404], "MessageNotExist on the wire");
}

#[tokio::test]
async fn batch_receive_then_batch_delete_with_a_partial_failure() {
    let emu = emulator().await;
    let c = client(&emu, creds(), QUEUE);
    for i in 0..20 {
        emu.send_message(QUEUE, &format!("{{\"n\":{i}}}")).unwrap();
    }
    let first = c.batch_receive_message(16, Some(0)).await.unwrap();
    assert_eq!(first.len(), 16);
    assert!(first.iter().all(|m| m.dequeue_count == 1));
    let handles: Vec<&str> = first.iter().map(|m| m.receipt_handle.as_str()).collect();
    assert!(c.batch_delete_message(&handles).await.unwrap().is_empty());
    assert_eq!(emu.queue_len(QUEUE), 4);

    let rest = c.batch_receive_message(16, Some(0)).await.unwrap();
    assert_eq!(rest.len(), 4);
    let mut handles: Vec<&str> = rest.iter().map(|m| m.receipt_handle.as_str()).collect();
    handles.push(first[0].receipt_handle.as_str()); // already deleted
    let failures = c.batch_delete_message(&handles).await.unwrap();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].receipt_handle, first[0].receipt_handle);
    assert_eq!(failures[0].error_code, "MessageNotExist");
    assert_eq!(emu.queue_len(QUEUE), 0);
}

#[tokio::test]
async fn visibility_expiry_redelivers_with_a_higher_dequeue_count() {
    let emu = emulator().await;
    let c = client(&emu, creds(), QUEUE);
    emu.send_message(QUEUE, "eyJhIjoxfQ==").unwrap();
    let first = c.receive_message(Some(0)).await.unwrap().unwrap();
    assert_eq!(first.dequeue_count, 1);
    assert_eq!(first.decoded_body().unwrap(), b"{\"a\":1}");
    assert_eq!(c.receive_message(Some(0)).await.unwrap(), None, "inactive");

    emu.advance_clock(Duration::from_secs(31));
    let again = c.receive_message(Some(0)).await.unwrap().unwrap();
    assert_eq!(again.message_id, first.message_id);
    assert_eq!(again.dequeue_count, 2);
    assert_eq!(again.first_dequeue_time_ms, first.first_dequeue_time_ms);
    assert_ne!(again.receipt_handle, first.receipt_handle);

    let e = c.delete_message(&first.receipt_handle).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e:?}");
    assert!(is_stale_receipt_handle(&e) && !e.is_retryable(), "{e:?}");
    c.delete_message(&again.receipt_handle).await.unwrap();
    assert_eq!(emu.queue_len(QUEUE), 0);
}

#[tokio::test]
async fn change_visibility_replaces_the_handle() {
    let emu = emulator().await;
    let c = client(&emu, creds(), QUEUE);
    emu.send_message(QUEUE, "{}").unwrap();
    let m = c.receive_message(Some(0)).await.unwrap().unwrap();
    let changed = c
        .change_message_visibility(&m.receipt_handle, 60)
        .await
        .unwrap();
    assert_ne!(changed.receipt_handle, m.receipt_handle);
    assert!(changed.next_visible_time_ms >= emu.now_ms() + 59_000);

    let e = c.delete_message(&m.receipt_handle).await.unwrap_err();
    assert!(is_stale_receipt_handle(&e), "{e:?}");
    assert!(!e.is_retryable());
    let e = c
        .change_message_visibility(&m.receipt_handle, 10)
        .await
        .unwrap_err();
    assert!(is_stale_receipt_handle(&e), "{e:?}");

    // Visibility 0: visible again at once, for a long poll already waiting too.
    let poll = tokio::spawn({
        let c = c.clone();
        async move { c.receive_message(Some(10)).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.change_message_visibility(&changed.receipt_handle, 0)
        .await
        .unwrap();
    let again = poll.await.unwrap().unwrap().unwrap();
    assert_eq!(again.dequeue_count, 2);
}

#[tokio::test]
async fn sts_token_is_sent_and_required() {
    let sts = creds().with_security_token("CAIS+TestSecurityToken/with+plus==");
    let emu = MnsEmulator::start(MnsEmulatorConfig::new(sts.clone()).with_queue(QUEUE))
        .await
        .unwrap();
    emu.send_message(QUEUE, "{}").unwrap();
    let m = client(&emu, sts, QUEUE)
        .receive_message(Some(0))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.body, "{}");
    let e = client(&emu, creds(), QUEUE)
        .receive_message(Some(0))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Auth, "{e:?}");
    let tokens: Vec<Option<String>> = emu
        .requests()
        .into_iter()
        .map(|r| r.security_token)
        .collect();
    assert_eq!(
        tokens,
        [Some("CAIS+TestSecurityToken/with+plus==".to_owned()), None]
    );
}

#[tokio::test]
async fn bad_signatures_and_missing_queues_are_not_retryable() {
    let emu = emulator().await;
    let wrong = Credentials::new("LTAI5tTestAccessKeyId01", "not-the-secret");
    let e = client(&emu, wrong, QUEUE)
        .receive_message(Some(0))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Auth);
    assert_eq!(mns_code(&e), Some("SignatureDoesNotMatch"));
    assert!(!e.is_retryable());
    assert!(e.context().iter().any(|(k, _)| *k == "request_id"), "{e:?}");

    let e = client(&emu, creds(), "no-such-queue")
        .batch_receive_message(1, Some(0))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert_eq!(mns_code(&e), Some("QueueNotExist"));
    assert!(!e.is_retryable());
}

#[tokio::test]
async fn network_failures_are_retryable() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let c = MnsClient::new(MnsConfig::new(
        format!("http://127.0.0.1:{port}"),
        QUEUE,
        creds(),
    ))
    .unwrap();
    let e = c.receive_message(Some(0)).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{e:?}");
    assert!(e.is_retryable());
}

/// The emulator's own limits, hit with hand-signed requests the client would refuse to send.
#[tokio::test]
async fn emulator_rejects_out_of_range_batches_with_error_xml() {
    let emu = emulator().await;
    let http = reqwest::Client::new();
    for (method, resource, status, code) in [
        (
            "GET",
            "/queues/oss-events/messages?numOfMessages=17",
            400,
            "InvalidArgument",
        ),
        (
            "GET",
            "/queues/oss-events/messages?numOfMessages=0",
            400,
            "InvalidArgument",
        ),
        (
            "GET",
            "/queues/oss-events/messages?numOfMessages=2&waitseconds=31",
            400,
            "InvalidArgument",
        ),
        ("GET", "/queues/nope/messages", 404, "QueueNotExist"),
        (
            "PUT",
            "/queues/oss-events/messages?ReceiptHandle=x&VisibilityTimeout=43201",
            400,
            "InvalidArgument",
        ),
    ] {
        let signed = floe_signing::mns::sign_now(&creds(), method, resource, b"", &[]).unwrap();
        let mut req = http.request(
            method.parse().unwrap(),
            format!("{}{resource}", emu.endpoint()),
        );
        for (k, v) in signed.headers() {
            req = req.header(k.as_str(), v.as_str());
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), status, "{resource}");
        let rid = resp
            .headers()
            .get("x-mns-request-id")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap();
        let body = xml::parse_error(&resp.bytes().await.unwrap()).unwrap();
        assert_eq!(body.code, code, "{resource}");
        assert_eq!(body.request_id, rid, "{resource}");
        assert!(!body.host_id.is_empty() && !body.message.is_empty());
    }
}
