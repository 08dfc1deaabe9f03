//! MNS XML in and out: the response documents a consumer reads and the one body it writes.
//!
//! Responses are read into a small element tree (an explicit stack, so nesting depth cannot
//! overflow ours), then the fields are picked out by local name (namespaces are ignored).
//! Text keeps its exact content, entities resolved; nothing is trimmed except numbers. A
//! missing required field, a bad number or malformed XML is an [`ErrorKind::Protocol`] error,
//! never a panic: the seeded fuzz loop in `tests/` and `fuzz/fuzz_targets/mns_xml.rs` hold
//! this module to that.

use floe_core::{Error, ErrorKind, Result};
use quick_xml::Reader;
use quick_xml::escape::{escape, resolve_predefined_entity};
use quick_xml::events::Event;

use super::message::{BatchDeleteFailure, ChangedVisibility, ReceivedMessage};

/// The MNS XML namespace.
pub const NAMESPACE: &str = "http://mns.aliyuncs.com/doc/v1/";

/// Deeper documents are rejected: MNS responses nest three levels.
const MAX_DEPTH: usize = 32;

/// The `<Error>` document of a failed call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErrorBody {
    /// `Code`, e.g. `QueueNotExist`.
    pub code: String,
    /// `Message`, human-readable.
    pub message: String,
    /// `RequestId`.
    pub request_id: String,
    /// `HostId`.
    pub host_id: String,
}

/// A parsed element: local name, concatenated direct text, children.
#[derive(Debug, Default)]
struct Element {
    name: String,
    text: String,
    children: Vec<Element>,
}

impl Element {
    fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }

    fn children_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }

    fn required(&self, name: &str) -> Result<&str> {
        self.child(name).map(|c| c.text.as_str()).ok_or_else(|| {
            protocol(format!(
                "mns <{}> response has no <{name}> element",
                self.name
            ))
        })
    }

    fn optional(&self, name: &str) -> Option<String> {
        self.child(name).map(|c| c.text.clone())
    }

    fn number<T: std::str::FromStr>(&self, name: &str) -> Result<T> {
        let raw = self.required(name)?;
        raw.trim().parse().map_err(|_| {
            protocol(format!(
                "mns <{name}> is not a number: `{}`",
                raw.chars().take(40).collect::<String>()
            ))
        })
    }
}

fn protocol(message: String) -> Error {
    Error::new(ErrorKind::Protocol, message)
}

/// Parse a document into its root element.
fn parse_root(xml: &[u8]) -> Result<Element> {
    let text = std::str::from_utf8(xml)
        .map_err(|e| protocol("mns response is not utf-8".into()).with_source(e))?;
    let mut reader = Reader::from_str(text);
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    loop {
        let event = reader.read_event().map_err(|e| {
            protocol(format!(
                "mns response is not well-formed xml at byte {}",
                reader.buffer_position()
            ))
            .with_source(e)
        })?;
        match event {
            Event::Start(start) => {
                if root.is_some() {
                    return Err(protocol("mns response has content after its root".into()));
                }
                if stack.len() >= MAX_DEPTH {
                    return Err(protocol("mns response nests too deeply".into()));
                }
                stack.push(Element {
                    name: local_name(start.local_name().as_ref())?,
                    ..Element::default()
                });
            }
            Event::Empty(empty) => {
                let el = Element {
                    name: local_name(empty.local_name().as_ref())?,
                    ..Element::default()
                };
                match stack.last_mut() {
                    Some(parent) => parent.children.push(el),
                    None if root.is_none() => root = Some(el),
                    None => {
                        return Err(protocol("mns response has content after its root".into()));
                    }
                }
            }
            Event::End(_) => {
                // quick-xml checks that end tags match their start tags.
                let done = stack
                    .pop()
                    .ok_or_else(|| protocol("mns response has an unmatched end tag".into()))?;
                match stack.last_mut() {
                    Some(parent) => parent.children.push(done),
                    None => root = Some(done),
                }
            }
            Event::Text(t) => {
                let s = t.xml_content().map_err(|e| {
                    protocol("mns response text is not decodable".into()).with_source(e)
                })?;
                push_text(&mut stack, &s)?;
            }
            Event::CData(c) => {
                let s = c.xml_content().map_err(|e| {
                    protocol("mns response cdata is not decodable".into()).with_source(e)
                })?;
                push_text(&mut stack, &s)?;
            }
            Event::GeneralRef(r) => {
                let resolved = match r.resolve_char_ref() {
                    Ok(Some(c)) => c.to_string(),
                    Ok(None) => {
                        let name = r.decode().map_err(|e| {
                            protocol("mns response entity is not decodable".into()).with_source(e)
                        })?;
                        resolve_predefined_entity(&name)
                            .ok_or_else(|| {
                                protocol(format!(
                                    "mns response uses unknown entity `&{};`",
                                    name.chars().take(20).collect::<String>()
                                ))
                            })?
                            .to_owned()
                    }
                    Err(e) => {
                        return Err(
                            protocol("mns response has a bad character reference".into())
                                .with_source(e),
                        );
                    }
                };
                push_text(&mut stack, &resolved)?;
            }
            Event::Eof => break,
            Event::Decl(_) | Event::PI(_) | Event::Comment(_) | Event::DocType(_) => {}
        }
    }
    if !stack.is_empty() {
        return Err(protocol("mns response ends inside an element".into()));
    }
    root.ok_or_else(|| protocol("mns response has no root element".into()))
}

fn local_name(raw: &[u8]) -> Result<String> {
    std::str::from_utf8(raw)
        .map(str::to_owned)
        .map_err(|e| protocol("mns response element name is not utf-8".into()).with_source(e))
}

/// Text belongs to the innermost open element; outside the root only whitespace may appear.
fn push_text(stack: &mut [Element], s: &str) -> Result<()> {
    match stack.last_mut() {
        Some(el) => {
            el.text.push_str(s);
            Ok(())
        }
        None if s.trim().is_empty() => Ok(()),
        None => Err(protocol("mns response has text outside its root".into())),
    }
}

fn expect_root(root: &Element, name: &str) -> Result<()> {
    if root.name == name {
        Ok(())
    } else {
        Err(protocol(format!(
            "mns response root is <{}>, expected <{name}>",
            root.name.chars().take(40).collect::<String>()
        )))
    }
}

fn message_from(el: &Element) -> Result<ReceivedMessage> {
    Ok(ReceivedMessage {
        message_id: el.required("MessageId")?.to_owned(),
        receipt_handle: el.required("ReceiptHandle")?.to_owned(),
        body: el.required("MessageBody")?.to_owned(),
        body_md5: el.required("MessageBodyMD5")?.to_owned(),
        enqueue_time_ms: el.number("EnqueueTime")?,
        first_dequeue_time_ms: el.number("FirstDequeueTime")?,
        next_visible_time_ms: el.number("NextVisibleTime")?,
        dequeue_count: el.number("DequeueCount")?,
        priority: el.number("Priority")?,
        message_group_id: el.optional("MessageGroupId"),
    })
}

/// Parse the `<Message>` document of ReceiveMessage.
pub fn parse_message(xml: &[u8]) -> Result<ReceivedMessage> {
    let root = parse_root(xml)?;
    expect_root(&root, "Message")?;
    message_from(&root)
}

/// Parse the `<Messages>` document of BatchReceiveMessage.
pub fn parse_messages(xml: &[u8]) -> Result<Vec<ReceivedMessage>> {
    let root = parse_root(xml)?;
    expect_root(&root, "Messages")?;
    root.children_named("Message").map(message_from).collect()
}

/// Parse the `<ChangeVisibility>` document of ChangeMessageVisibility.
pub fn parse_change_visibility(xml: &[u8]) -> Result<ChangedVisibility> {
    let root = parse_root(xml)?;
    expect_root(&root, "ChangeVisibility")?;
    Ok(ChangedVisibility {
        receipt_handle: root.required("ReceiptHandle")?.to_owned(),
        next_visible_time_ms: root.number("NextVisibleTime")?,
    })
}

/// Parse an `<Error>` document. Fields that are missing are left empty.
pub fn parse_error(xml: &[u8]) -> Result<ErrorBody> {
    let root = parse_root(xml)?;
    expect_root(&root, "Error")?;
    Ok(error_from(&root))
}

fn error_from(el: &Element) -> ErrorBody {
    ErrorBody {
        code: el.optional("Code").unwrap_or_default(),
        message: el.optional("Message").unwrap_or_default(),
        request_id: el.optional("RequestId").unwrap_or_default(),
        host_id: el.optional("HostId").unwrap_or_default(),
    }
}

/// A failed call's body: one `<Error>`, or the per-handle `<Errors>` of BatchDeleteMessage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailureBody {
    /// The usual single error.
    Error(ErrorBody),
    /// BatchDeleteMessage's per-receipt-handle failures.
    BatchDelete(Vec<BatchDeleteFailure>),
}

/// Parse the body of a failed call.
pub fn parse_failure(xml: &[u8]) -> Result<FailureBody> {
    let root = parse_root(xml)?;
    match root.name.as_str() {
        "Error" => Ok(FailureBody::Error(error_from(&root))),
        "Errors" => root
            .children_named("Error")
            .map(|e| {
                Ok(BatchDeleteFailure {
                    receipt_handle: e.required("ReceiptHandle")?.to_owned(),
                    error_code: e.required("ErrorCode")?.to_owned(),
                    error_message: e.optional("ErrorMessage").unwrap_or_default(),
                })
            })
            .collect::<Result<Vec<_>>>()
            .map(FailureBody::BatchDelete),
        other => Err(protocol(format!(
            "mns error response root is <{}>, expected <Error> or <Errors>",
            other.chars().take(40).collect::<String>()
        ))),
    }
}

/// The BatchDeleteMessage request body.
pub fn receipt_handles_body(handles: &[&str]) -> String {
    let mut s =
        format!("<?xml version=\"1.0\" encoding=\"utf-8\"?><ReceiptHandles xmlns=\"{NAMESPACE}\">");
    for h in handles {
        s.push_str("<ReceiptHandle>");
        s.push_str(&escape(*h));
        s.push_str("</ReceiptHandle>");
    }
    s.push_str("</ReceiptHandles>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const MESSAGE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<Message xmlns="http://mns.aliyuncs.com/doc/v1/">
  <MessageId>5F290C926D472878-2-14D9529A8FA-200000001</MessageId>
  <ReceiptHandle>1-ODU4OTkzNDU5My0xNDMyNzI3ODI3LTItOA==</ReceiptHandle>
  <MessageBodyMD5>C5DD56A39F5F7BB8B3337C6D11B6D8C7</MessageBodyMD5>
  <MessageBody>{"a":"x &amp; y &#x4e2d;"}</MessageBody>
  <EnqueueTime>1250700979248</EnqueueTime>
  <NextVisibleTime>1250700799348</NextVisibleTime>
  <FirstDequeueTime>1250700779318</FirstDequeueTime>
  <DequeueCount>1</DequeueCount>
  <Priority>8</Priority>
</Message>"#;

    #[test]
    fn parses_a_message_keeping_the_body_exact() {
        let m = parse_message(MESSAGE.as_bytes()).unwrap();
        assert_eq!(m.body, "{\"a\":\"x & y 中\"}");
        assert_eq!(m.receipt_handle, "1-ODU4OTkzNDU5My0xNDMyNzI3ODI3LTItOA==");
        assert_eq!(m.dequeue_count, 1);
        assert_eq!(m.priority, 8);
        assert_eq!(m.enqueue_time_ms, 1_250_700_979_248);
        assert_eq!(m.message_group_id, None);
    }

    #[test]
    fn parses_batches_visibility_and_errors() {
        let inner = MESSAGE.split_once("?>").unwrap().1;
        let batch = format!("<Messages xmlns=\"{NAMESPACE}\">{inner}{inner}</Messages>");
        assert_eq!(parse_messages(batch.as_bytes()).unwrap().len(), 2);
        let cv = parse_change_visibility(
            b"<ChangeVisibility><ReceiptHandle>new</ReceiptHandle><NextVisibleTime>5</NextVisibleTime></ChangeVisibility>",
        )
        .unwrap();
        assert_eq!(
            (cv.receipt_handle.as_str(), cv.next_visible_time_ms),
            ("new", 5)
        );
        let e = parse_error(b"<Error xmlns=\"x\"><Code>QueueNotExist</Code><Message>m</Message><RequestId>r</RequestId><HostId>h</HostId></Error>").unwrap();
        assert_eq!(
            (e.code.as_str(), e.request_id.as_str()),
            ("QueueNotExist", "r")
        );
        let f = parse_failure(b"<Errors><Error><ErrorCode>ReceiptHandleError</ErrorCode><ErrorMessage>bad</ErrorMessage><ReceiptHandle>h1</ReceiptHandle></Error></Errors>").unwrap();
        assert_eq!(
            f,
            FailureBody::BatchDelete(vec![BatchDeleteFailure {
                receipt_handle: "h1".into(),
                error_code: "ReceiptHandleError".into(),
                error_message: "bad".into(),
            }])
        );
    }

    #[test]
    fn damaged_documents_are_protocol_errors() {
        for (case, xml) in [
            (
                "missing field",
                MESSAGE.replace("<Priority>8</Priority>", ""),
            ),
            ("bad number", MESSAGE.replace(">1<", ">one<")),
            ("wrong root", "<Messages/>".to_owned()),
            ("unclosed", "<Message><MessageId>x".to_owned()),
            ("mismatched", "<Message></Other>".to_owned()),
            ("unknown entity", "<Message>&nope;</Message>".to_owned()),
            ("two roots", "<Message/><Message/>".to_owned()),
            ("empty", String::new()),
            ("deep", "<a>".repeat(100)),
        ] {
            let e = parse_message(xml.as_bytes()).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Protocol, "{case}: {e}");
        }
        assert!(parse_message(&[0xff, 0xfe]).is_err());
    }

    #[test]
    fn receipt_handles_body_matches_the_sdk() {
        // The body of the `batch_delete_message` signature vector.
        assert_eq!(
            receipt_handles_body(&[
                "1-ODU4OTkzNDU5My0xNDMyNzI3ODI3LTItOA==",
                "1-ODU4OTkzNDU5My0xNDMyNzI3ODI3LTItOQ=="
            ]),
            "<?xml version=\"1.0\" encoding=\"utf-8\"?><ReceiptHandles xmlns=\"http://mns.aliyuncs.com/doc/v1/\"><ReceiptHandle>1-ODU4OTkzNDU5My0xNDMyNzI3ODI3LTItOA==</ReceiptHandle><ReceiptHandle>1-ODU4OTkzNDU5My0xNDMyNzI3ODI3LTItOQ==</ReceiptHandle></ReceiptHandles>"
        );
    }
}
