//! Every case of `tests/vectors/sigv4_s3tables.json`, byte for byte.
//!
//! `aws-sigv4` does not return its canonical request or string to sign, so:
//! - the canonical request is captured from the `trace` event the crate emits while signing
//!   (a small `tracing` layer below) and compared with the vector byte for byte;
//! - the string to sign is checked in its four lines: the algorithm, `x-amz-date` and the scope
//!   against what the signer sent, and the hash against SHA-256 of the captured canonical
//!   request; and the whole vector string to sign, MACed with `aws-sigv4`'s own
//!   `generate_signing_key` / `calculate_signature`, must give the signature we sent.
//!
//! Nothing here re-implements SigV4.

mod common;

use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use aws_sigv4::sign::v4::{calculate_signature, generate_signing_key};
use common::{Failures, borrow, load, pairs, pinned_time, s};
use floe_signing::Credentials;
use floe_signing::sigv4::{Payload, SigV4Signer};
use sha2::{Digest, Sha256};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// Keeps the `canonical_request` field of every event.
#[derive(Clone, Default)]
struct CaptureCanonicalRequest(Arc<Mutex<Vec<String>>>);

impl<S: Subscriber> Layer<S> for CaptureCanonicalRequest {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        struct Visitor(Option<String>);
        impl Visit for Visitor {
            fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
                if field.name() == "canonical_request" {
                    self.0 = Some(format!("{value:?}"));
                }
            }
        }
        let mut v = Visitor(None);
        event.record(&mut v);
        if let Some(c) = v.0 {
            self.0.lock().unwrap().push(c);
        }
    }
}

#[test]
fn sigv4_signatures_match_botocore() {
    let v = load("sigv4_s3tables.json");
    let secret = s(&v, "secret_access_key");
    let creds = Credentials::new(s(&v, "access_key_id"), secret);
    let capture = CaptureCanonicalRequest::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let mut f = Failures::default();
    let cases = v["cases"].as_array().unwrap();
    tracing::subscriber::with_default(subscriber, || {
        for case in cases {
            let name = s(case, "name");
            let (service, region) = (s(case, "service"), s(case, "region"));
            let headers = pairs(&case["headers_in"]);
            let body = case["body"].as_str().unwrap_or("");
            capture.0.lock().unwrap().clear();
            let signed = SigV4Signer::new(service, region)
                .sign(
                    &creds,
                    s(case, "method"),
                    s(case, "url"),
                    &borrow(&headers),
                    Payload::Bytes(body.as_bytes()),
                    pinned_time(),
                )
                .unwrap();
            let auth = signed.authorization().unwrap_or_default().to_owned();
            f.check(name, "authorization", Some(&auth), s(case, "authorization"));
            f.check(
                name,
                "x-amz-date",
                signed.get("x-amz-date"),
                s(case, "x-amz-date"),
            );
            f.check(
                name,
                "no x-amz-content-sha256 (botocore adds none for this service)",
                Some(if signed.get("x-amz-content-sha256").is_none() {
                    "none"
                } else {
                    "added"
                }),
                "none",
            );

            let captured = capture.0.lock().unwrap().clone();
            let creq = captured.last().cloned();
            f.check(
                name,
                "canonical_request",
                creq.as_deref(),
                s(case, "canonical_request"),
            );

            let want_sts = s(case, "string_to_sign");
            let lines: Vec<&str> = want_sts.split('\n').collect();
            let scope = auth
                .split("Credential=")
                .nth(1)
                .and_then(|c| c.split(',').next())
                .and_then(|c| c.split_once('/'))
                .map(|(_, scope)| scope);
            let creq_hash = creq.map(|c| hex::encode(Sha256::digest(c.as_bytes())));
            f.check(
                name,
                "string_to_sign line count",
                Some(&lines.len().to_string()),
                "4",
            );
            f.check(
                name,
                "string_to_sign algorithm",
                Some(lines[0]),
                "AWS4-HMAC-SHA256",
            );
            f.check(
                name,
                "string_to_sign date",
                signed.get("x-amz-date"),
                lines[1],
            );
            f.check(name, "string_to_sign scope", scope, lines[2]);
            f.check(name, "string_to_sign hash", creq_hash.as_deref(), lines[3]);
            let key = generate_signing_key(secret, pinned_time(), region, service);
            let mac = calculate_signature(key, want_sts.as_bytes());
            let sent = auth.rsplit("Signature=").next();
            f.check(
                name,
                "signature over the vector's string_to_sign",
                sent,
                &mac,
            );
        }
    });
    f.finish(cases.len());
}
