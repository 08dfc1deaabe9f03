//! Payload parsing: see the module doc of [`crate::event`] for the shapes.

use base64::Engine as _;
use chrono::{DateTime, NaiveDateTime, Utc};
use serde_json::Value;

use super::key::decode_form_component;
use super::{ObjectChange, Operation, Provider};
use crate::error::{Error, Result};

/// Choices that the payload itself cannot tell.
#[derive(Clone, Debug, Default)]
pub struct ParseOptions {
    /// Decode OSS keys as form-URL-encoded (default false: OSS keys are taken as sent).
    pub oss_keys_url_encoded: bool,
}

/// One delivered message (an SQS record, an SNS record) or the whole payload when it was not
/// wrapped, with what it held. A message that fails to parse does not fail its siblings: its
/// `changes` is the error, so the caller can report just that message as failed.
#[derive(Debug)]
pub struct Message {
    /// The delivering message's id (`messageId` for SQS, `MessageId` for SNS), if any.
    pub id: Option<String>,
    /// The SQS receipt handle, if any.
    pub receipt_handle: Option<String>,
    /// The changes it carried, or why it could not be read.
    pub changes: Result<Vec<ObjectChange>>,
    /// Events it carried that floe does not act on (test events, downloads, multipart parts),
    /// as `(event name, reason)`.
    pub ignored: Vec<(String, &'static str)>,
}

/// A parsed payload: one entry per delivered message.
#[derive(Debug)]
pub struct Parsed {
    /// The messages, in payload order.
    pub messages: Vec<Message>,
}

impl Parsed {
    /// All changes of all messages that parsed, in order.
    pub fn changes(&self) -> impl Iterator<Item = &ObjectChange> {
        self.messages
            .iter()
            .filter_map(|m| m.changes.as_ref().ok())
            .flatten()
    }
}

/// Decode an MNS message body: trimmed; JSON when it starts with `{`, else base64 of JSON.
pub fn decode_mns_body(body: &[u8]) -> Result<Vec<u8>> {
    let trimmed = body.trim_ascii();
    if trimmed.first() == Some(&b'{') {
        return Ok(trimmed.to_vec());
    }
    let compact: Vec<u8> = trimmed
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(&compact)
        .map_err(|e| {
            Error::invalid_input("mns message body is neither json nor base64").with_source(e)
        })
}

/// Parse any payload floe receives into messages of object changes.
///
/// The outer document must be JSON (or an MNS base64 body of JSON); a payload that is not is an
/// error. Errors inside one SQS/SNS record stay in that record's [`Message`].
pub fn parse_payload(payload: &[u8], opts: &ParseOptions) -> Result<Parsed> {
    let bytes = decode_mns_body(payload)?;
    let doc: Value = serde_json::from_slice(&bytes)
        .map_err(|e| Error::invalid_input("event payload is not valid json").with_source(e))?;
    let mut messages = Vec::new();
    if let Some(records) = doc.get("Records").and_then(Value::as_array) {
        let wrapped = records
            .iter()
            .any(|r| matches!(source_of(r).as_deref(), Some("aws:sqs") | Some("aws:sns")));
        if wrapped {
            for record in records {
                messages.push(parse_wrapped_record(record, opts));
            }
            return Ok(Parsed { messages });
        }
    }
    messages.push(parse_document(&doc, None, None, opts));
    Ok(Parsed { messages })
}

fn source_of(record: &Value) -> Option<String> {
    record
        .get("eventSource")
        .or_else(|| record.get("EventSource"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// One record of an SQS or SNS Lambda event.
fn parse_wrapped_record(record: &Value, opts: &ParseOptions) -> Message {
    let source = source_of(record);
    let (id, receipt, body) = if source.as_deref() == Some("aws:sns") {
        let sns = record.get("Sns");
        (
            sns.and_then(|s| s.get("MessageId"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            None,
            sns.and_then(|s| s.get("Message")).and_then(Value::as_str),
        )
    } else {
        (
            record
                .get("messageId")
                .and_then(Value::as_str)
                .map(str::to_owned),
            record
                .get("receiptHandle")
                .and_then(Value::as_str)
                .map(str::to_owned),
            record.get("body").and_then(Value::as_str),
        )
    };
    let Some(body) = body else {
        return Message {
            id: id.clone(),
            receipt_handle: receipt,
            changes: Err(Error::invalid_input(format!(
                "message {} has no body",
                id.as_deref().unwrap_or("?")
            ))),
            ignored: Vec::new(),
        };
    };
    match serde_json::from_str::<Value>(body) {
        Ok(inner) => parse_document(&inner, id, receipt, opts),
        Err(e) => Message {
            changes: Err(Error::invalid_input(format!(
                "body of message {} is not valid json",
                id.as_deref().unwrap_or("?")
            ))
            .with_source(e)),
            id,
            receipt_handle: receipt,
            ignored: Vec::new(),
        },
    }
}

/// An unwrapped document: S3 records, OSS events, an SNS envelope, or a test event.
fn parse_document(
    doc: &Value,
    id: Option<String>,
    receipt: Option<String>,
    opts: &ParseOptions,
) -> Message {
    let mut ignored = Vec::new();
    let changes = (|| -> Result<Vec<ObjectChange>> {
        // SNS envelope (SQS body when SNS is in between and raw delivery is off).
        if doc.get("Type").and_then(Value::as_str) == Some("Notification") {
            let inner = doc
                .get("Message")
                .and_then(Value::as_str)
                .ok_or_else(|| Error::invalid_input("sns notification has no Message"))?;
            let inner: Value = serde_json::from_str(inner).map_err(|e| {
                Error::invalid_input("sns Message is not valid json").with_source(e)
            })?;
            let nested = parse_document(&inner, id.clone(), None, opts);
            ignored.extend(nested.ignored);
            return nested.changes;
        }
        if let Some(event) = doc.get("Event").and_then(Value::as_str)
            && event.ends_with("TestEvent")
        {
            ignored.push((event.to_owned(), "test event"));
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        if let Some(events) = doc.get("events").and_then(Value::as_array) {
            for ev in events {
                oss_event(ev, id.as_deref(), opts, &mut out, &mut ignored)?;
            }
            return Ok(out);
        }
        if let Some(records) = doc.get("Records").and_then(Value::as_array) {
            for rec in records {
                s3_record(rec, id.as_deref(), &mut out, &mut ignored)?;
            }
            return Ok(out);
        }
        Err(Error::invalid_input(
            "unrecognised event payload: expected `events` (OSS), `Records` (S3/SQS/SNS), an SNS notification or an S3 test event",
        ))
    })();
    Message {
        id,
        receipt_handle: receipt,
        changes,
        ignored,
    }
}

/// Map an event name (prefix already stripped) to what floe does with it.
fn classify(name: &str) -> std::result::Result<Operation, &'static str> {
    let (group, action) = name.split_once(':').unwrap_or((name, ""));
    match group {
        "ObjectCreated" => match action {
            "InitiateMultipartUpload" | "UploadPart" | "UploadPartCopy" => {
                Err("multipart part; the completion event carries the object")
            }
            _ => Ok(Operation::Created),
        },
        "ObjectRemoved" => match action {
            "AbortMultipartUpload" => Err("aborted multipart upload"),
            _ => Ok(Operation::Removed),
        },
        "LifecycleExpiration" => Ok(Operation::Removed),
        "ObjectReplication" => match action {
            "ObjectCreated" | "ObjectModified" => Ok(Operation::Created),
            "ObjectRemoved" => Ok(Operation::Removed),
            _ => Err("replication status event"),
        },
        "ObjectDownloaded" => Err("download event"),
        _ => Err("unknown event name"),
    }
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(*p)?;
    }
    cur.as_str()
}

fn u64_at(v: &Value, path: &[&str]) -> Option<u64> {
    let mut cur = v;
    for p in path {
        cur = cur.get(*p)?;
    }
    cur.as_u64()
        .or_else(|| cur.as_str().and_then(|s| s.parse().ok()))
}

/// Event times: RFC 3339 (`…Z`, `…+08:00`), or moto's zone-less form taken as UTC.
fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f")
        .ok()
        .map(|n| n.and_utc())
}

fn strip_etag(s: &str) -> String {
    s.trim_matches('"').to_owned()
}

fn oss_event(
    ev: &Value,
    message_id: Option<&str>,
    opts: &ParseOptions,
    out: &mut Vec<ObjectChange>,
    ignored: &mut Vec<(String, &'static str)>,
) -> Result<()> {
    let raw_name = str_at(ev, &["eventName"])
        .ok_or_else(|| Error::invalid_input("oss event has no eventName"))?;
    let name = raw_name.strip_prefix("oss:").unwrap_or(raw_name);
    let operation = match classify(name) {
        Ok(op) => op,
        Err(reason) => {
            ignored.push((name.to_owned(), reason));
            return Ok(());
        }
    };
    let bucket = str_at(ev, &["oss", "bucket", "name"])
        .ok_or_else(|| Error::invalid_input(format!("oss event {name} has no oss.bucket.name")))?;
    let raw_key = str_at(ev, &["oss", "object", "key"])
        .ok_or_else(|| Error::invalid_input(format!("oss event {name} has no oss.object.key")))?;
    let key = if opts.oss_keys_url_encoded {
        decode_form_component(raw_key)
    } else {
        raw_key.to_owned()
    };
    let region = str_at(ev, &["region"]).map(|r| r.strip_prefix("oss-").unwrap_or(r).to_owned());
    out.push(ObjectChange {
        operation,
        provider: Provider::Oss,
        bucket: bucket.to_owned(),
        key,
        region,
        size: u64_at(ev, &["oss", "object", "size"]),
        etag: str_at(ev, &["oss", "object", "eTag"]).map(strip_etag),
        version_id: str_at(ev, &["oss", "object", "versionId"]).map(str::to_owned),
        sequencer: None,
        event_time: str_at(ev, &["eventTime"]).and_then(parse_time),
        event_name: name.to_owned(),
        message_id: message_id.map(str::to_owned),
    });
    Ok(())
}

fn s3_record(
    rec: &Value,
    message_id: Option<&str>,
    out: &mut Vec<ObjectChange>,
    ignored: &mut Vec<(String, &'static str)>,
) -> Result<()> {
    let raw_name = str_at(rec, &["eventName"])
        .ok_or_else(|| Error::invalid_input("s3 record has no eventName"))?;
    let name = raw_name.strip_prefix("s3:").unwrap_or(raw_name);
    let operation = match classify(name) {
        Ok(op) => op,
        Err(reason) => {
            ignored.push((name.to_owned(), reason));
            return Ok(());
        }
    };
    let bucket = str_at(rec, &["s3", "bucket", "name"])
        .ok_or_else(|| Error::invalid_input(format!("s3 record {name} has no s3.bucket.name")))?;
    let raw_key = str_at(rec, &["s3", "object", "key"])
        .ok_or_else(|| Error::invalid_input(format!("s3 record {name} has no s3.object.key")))?;
    out.push(ObjectChange {
        operation,
        provider: Provider::S3,
        bucket: bucket.to_owned(),
        key: decode_form_component(raw_key),
        region: str_at(rec, &["awsRegion"]).map(str::to_owned),
        size: u64_at(rec, &["s3", "object", "size"]),
        etag: str_at(rec, &["s3", "object", "eTag"]).map(strip_etag),
        version_id: str_at(rec, &["s3", "object", "versionId"])
            .filter(|v| !v.is_empty())
            .map(str::to_owned),
        sequencer: str_at(rec, &["s3", "object", "sequencer"]).map(str::to_owned),
        event_time: str_at(rec, &["eventTime"]).and_then(parse_time),
        event_name: name.to_owned(),
        message_id: message_id.map(str::to_owned),
    });
    Ok(())
}
