//! The emulator's XML: responses written by hand (independently of the client's parser) and
//! the BatchDeleteMessage body read with quick-xml.

use quick_xml::Reader;
use quick_xml::escape::escape;
use quick_xml::events::Event;

use super::queue::StoredMessage;

const NS: &str = "http://mns.aliyuncs.com/doc/v1/";
const DECL: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";

fn message_fields(m: &StoredMessage) -> String {
    format!(
        "<MessageId>{}</MessageId><ReceiptHandle>{}</ReceiptHandle>\
         <MessageBodyMD5>{}</MessageBodyMD5><MessageBody>{}</MessageBody>\
         <EnqueueTime>{}</EnqueueTime><FirstDequeueTime>{}</FirstDequeueTime>\
         <NextVisibleTime>{}</NextVisibleTime><DequeueCount>{}</DequeueCount>\
         <Priority>{}</Priority>",
        escape(m.id.as_str()),
        escape(m.handle.as_deref().unwrap_or("")),
        m.body_md5,
        escape(m.body.as_str()),
        m.enqueue_ms,
        m.first_dequeue_ms.unwrap_or(m.enqueue_ms),
        m.next_visible_ms,
        m.dequeue_count,
        m.priority,
    )
}

/// ReceiveMessage's `<Message>`.
pub(crate) fn message(m: &StoredMessage) -> String {
    format!(
        "{DECL}<Message xmlns=\"{NS}\">{}</Message>",
        message_fields(m)
    )
}

/// BatchReceiveMessage's `<Messages>`.
pub(crate) fn messages(ms: &[StoredMessage]) -> String {
    let mut s = format!("{DECL}<Messages xmlns=\"{NS}\">");
    for m in ms {
        s.push_str("<Message>");
        s.push_str(&message_fields(m));
        s.push_str("</Message>");
    }
    s.push_str("</Messages>");
    s
}

/// ChangeMessageVisibility's `<ChangeVisibility>`.
pub(crate) fn change_visibility(handle: &str, next_visible_ms: i64) -> String {
    format!(
        "{DECL}<ChangeVisibility xmlns=\"{NS}\"><ReceiptHandle>{}</ReceiptHandle>\
         <NextVisibleTime>{next_visible_ms}</NextVisibleTime></ChangeVisibility>",
        escape(handle)
    )
}

/// The `<Error>` document.
pub(crate) fn error(code: &str, message: &str, request_id: &str, host_id: &str) -> String {
    format!(
        "{DECL}<Error xmlns=\"{NS}\"><Code>{}</Code><Message>{}</Message>\
         <RequestId>{}</RequestId><HostId>{}</HostId></Error>",
        escape(code),
        escape(message),
        escape(request_id),
        escape(host_id)
    )
}

/// BatchDeleteMessage's `<Errors>`: (code, message, handle) per failed handle.
pub(crate) fn batch_delete_errors(failures: &[(&str, &str, String)]) -> String {
    let mut s = format!("{DECL}<Errors xmlns=\"{NS}\">");
    for (code, message, handle) in failures {
        s.push_str(&format!(
            "<Error><ErrorCode>{}</ErrorCode><ErrorMessage>{}</ErrorMessage>\
             <ReceiptHandle>{}</ReceiptHandle></Error>",
            escape(*code),
            escape(*message),
            escape(handle.as_str())
        ));
    }
    s.push_str("</Errors>");
    s
}

/// The handles in a `<ReceiptHandles>` body; `None` if it is not one.
pub(crate) fn receipt_handles(body: &[u8]) -> Option<Vec<String>> {
    let text = std::str::from_utf8(body).ok()?;
    let mut reader = Reader::from_str(text);
    let mut handles = Vec::new();
    let mut saw_root = false;
    let mut current: Option<String> = None;
    loop {
        match reader.read_event().ok()? {
            Event::Start(e) => match e.local_name().as_ref() {
                b"ReceiptHandles" => saw_root = true,
                b"ReceiptHandle" if saw_root => current = Some(String::new()),
                _ => return None,
            },
            Event::Text(t) => {
                if let Some(c) = current.as_mut() {
                    c.push_str(&t.xml_content().ok()?);
                }
            }
            Event::GeneralRef(r) => {
                let c = current.as_mut()?;
                match r.resolve_char_ref().ok()? {
                    Some(ch) => c.push(ch),
                    None => c.push_str(quick_xml::escape::resolve_predefined_entity(
                        &r.decode().ok()?,
                    )?),
                }
            }
            Event::End(e) if e.local_name().as_ref() == b"ReceiptHandle" => {
                handles.push(current.take()?);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    saw_root.then_some(handles)
}
