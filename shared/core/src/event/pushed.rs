//! Payloads pushed to a function, read into the messages they carry: [`pushed_messages`].
//!
//! [`parse_payload`] reads every payload whose document is the object event itself (FC OSS
//! trigger, an MNS body raw or base64, S3, SQS, SNS). FC's MNS triggers wrap the body once more
//! ([`mns_messages`] unwraps them):
//!
//! | trigger | payload | body |
//! |---|---|---|
//! | MNS queue trigger (EventBridge), one message | `{"type":"mns:Queue:SendMessage","data":{"messageId","messageBody"},…}` | `data.messageBody` |
//! | MNS queue trigger, batched (event stream) | `[ {…as above…}, … ]` | each `data.messageBody` |
//! | MNS topic trigger, JSON format | `{"TopicName","Message","MessageId",…}` | `Message` |
//! | MNS topic trigger, STREAM format | the body itself | (no envelope: `parse_payload` reads it) |

use serde_json::Value;

use super::{ObjectChange, ParseOptions, parse_payload};
use crate::{Error, Result};

/// One message of a pushed payload and the changes it carried.
#[derive(Debug)]
pub struct Pushed {
    /// The message id (SQS, MNS), when the payload names one.
    pub id: Option<String>,
    /// Whether it came from an SQS event source (which takes partial batch answers).
    pub sqs: bool,
    /// Its changes, or why its body could not be read.
    pub changes: Result<Vec<ObjectChange>>,
    /// Events it carried that land nothing (test events, downloads): (event name, why).
    pub ignored: Vec<(String, &'static str)>,
}

/// Read a pushed payload (any trigger's: OSS, MNS queue or topic, S3, SQS, SNS, an HTTP body of
/// any of these) into its messages.
pub fn pushed_messages(payload: &[u8], opts: &ParseOptions) -> Result<Vec<Pushed>> {
    let mut out = Vec::new();
    if let Some(messages) = mns_messages(payload)? {
        for m in messages {
            let mut ignored = Vec::new();
            let changes = parse_payload(&m.body, opts).and_then(|parsed| {
                let mut changes = Vec::new();
                for inner in parsed.messages {
                    ignored.extend(inner.ignored);
                    changes.extend(inner.changes?);
                }
                for c in &mut changes {
                    c.message_id = c.message_id.take().or_else(|| m.id.clone());
                }
                Ok(changes)
            });
            out.push(Pushed {
                id: m.id,
                sqs: false,
                changes,
                ignored,
            });
        }
        return Ok(out);
    }
    for m in parse_payload(payload, opts)?.messages {
        out.push(Pushed {
            sqs: m.receipt_handle.is_some(),
            id: m.id,
            changes: m.changes,
            ignored: m.ignored,
        });
    }
    Ok(out)
}

/// One MNS message out of an FC trigger envelope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MnsMessage {
    /// The MNS message id.
    pub id: Option<String>,
    /// The message body (OSS event JSON, raw or base64).
    pub body: Vec<u8>,
}

/// The messages of an FC MNS trigger payload, or `None` when the payload is no such envelope.
pub fn mns_messages(payload: &[u8]) -> Result<Option<Vec<MnsMessage>>> {
    let trimmed = payload.trim_ascii();
    // Only JSON documents can be envelopes; anything else (a base64 body) is not one.
    if !matches!(trimmed.first(), Some(b'{') | Some(b'[')) {
        return Ok(None);
    }
    let Ok(doc) = serde_json::from_slice::<Value>(trimmed) else {
        return Ok(None);
    };
    match &doc {
        Value::Array(items) if !items.is_empty() && items.iter().all(is_cloud_event) => items
            .iter()
            .map(cloud_event_message)
            .collect::<Result<Vec<_>>>()
            .map(Some),
        v if is_cloud_event(v) => Ok(Some(vec![cloud_event_message(v)?])),
        v if v.get("TopicName").is_some() && v.get("Message").is_some() => {
            let body = v.get("Message").and_then(Value::as_str).ok_or_else(|| {
                Error::invalid_input("mns topic notification Message is not a string")
            })?;
            Ok(Some(vec![MnsMessage {
                id: v
                    .get("MessageId")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                body: body.as_bytes().to_vec(),
            }]))
        }
        _ => Ok(None),
    }
}

fn is_cloud_event(v: &Value) -> bool {
    v.get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| t.starts_with("mns:"))
        && v.get("data")
            .is_some_and(|d| d.get("messageBody").is_some())
}

fn cloud_event_message(v: &Value) -> Result<MnsMessage> {
    let data = &v["data"];
    let body = match &data["messageBody"] {
        Value::String(s) => s.as_bytes().to_vec(),
        // A JSON body delivered as a JSON value rather than as its text.
        Value::Object(_) | Value::Array(_) => data["messageBody"].to_string().into_bytes(),
        _ => {
            return Err(Error::invalid_input(
                "mns trigger event data.messageBody is neither text nor json",
            ));
        }
    };
    Ok(MnsMessage {
        id: data
            .get("messageId")
            .or_else(|| v.get("id"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = r#"{"events":[{"eventName":"ObjectCreated:PutObject","oss":{"bucket":{"name":"b"},"object":{"key":"k","eTag":"E","size":1}},"region":"cn-hangzhou"}]}"#;

    fn cloud_event(id: &str, body: &str) -> Value {
        serde_json::json!({
            "id": "c2g71017", "source": "MNS-Function-mnstrigger", "specversion": "1.0",
            "type": "mns:Queue:SendMessage", "datacontenttype": "application/json; charset=utf-8",
            "subject": "acs:mns:cn-hangzhou:1649015465:queues/zeus",
            "data": {"requestId": "606EA307", "messageId": id, "messageBody": body}
        })
    }

    #[test]
    fn envelopes_are_unwrapped() {
        let one = cloud_event("m1", BODY).to_string();
        let got = mns_messages(one.as_bytes()).unwrap().unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].id.as_deref(), Some("m1"));
        assert_eq!(got[0].body, BODY.as_bytes());

        let batch =
            serde_json::json!([cloud_event("m1", BODY), cloud_event("m2", "eyJ9")]).to_string();
        let got = mns_messages(batch.as_bytes()).unwrap().unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].id.as_deref(), Some("m2"));
        assert_eq!(&got[1].body[..], b"eyJ9");

        let topic = serde_json::json!({
            "TopicOwner": "1186", "Message": BODY, "Subscriber": "1186",
            "PublishTime": 1550216302888u64, "SubscriptionName": "floe", "MessageMD5": "BA4B",
            "TopicName": "oss-events", "MessageId": "2F5B"
        })
        .to_string();
        let got = mns_messages(topic.as_bytes()).unwrap().unwrap();
        assert_eq!(got[0].id.as_deref(), Some("2F5B"));
        assert_eq!(got[0].body, BODY.as_bytes());
    }

    #[test]
    fn other_payloads_are_not_envelopes() {
        for payload in [
            BODY,
            r#"{"Records":[]}"#,
            "eyJldmVudHMiOltdfQ==",
            r#"{"triggerTime":"2025-01-15T08:00:00Z","triggerName":"t","payload":""}"#,
            "[]",
        ] {
            assert!(
                mns_messages(payload.as_bytes()).unwrap().is_none(),
                "{payload}"
            );
        }
    }
}
