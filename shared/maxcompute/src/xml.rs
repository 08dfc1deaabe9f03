//! The XML the REST API speaks: responses are read into a small element tree (an explicit stack,
//! so nesting depth is bounded), and the one request document (an SQL job) is written by hand.
//!
//! Text keeps its content with entities resolved and CDATA taken verbatim; malformed XML is an
//! [`ErrorKind::Protocol`] error, never a panic.

use floe_core::{Error, ErrorKind, Result};
use quick_xml::Reader;
use quick_xml::escape::{escape, resolve_predefined_entity};
use quick_xml::events::Event;

/// Deeper documents are refused: the responses read here nest four levels.
const MAX_DEPTH: usize = 32;

/// A parsed element: local name, attributes, concatenated direct text, children.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Element {
    pub name: String,
    pub attributes: Vec<(String, String)>,
    pub text: String,
    pub children: Vec<Element>,
}

fn protocol(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Protocol, message)
}

fn local(name: &[u8]) -> String {
    let name = String::from_utf8_lossy(name);
    match name.rsplit_once(':') {
        Some((_, l)) => l.to_owned(),
        None => name.into_owned(),
    }
}

impl Element {
    /// Parse a document and return its root element.
    pub fn parse(text: &str) -> Result<Element> {
        let mut reader = Reader::from_str(text);
        let mut stack: Vec<Element> = Vec::new();
        let bad = |e: &dyn std::fmt::Display| protocol(format!("malformed xml: {e}"));
        loop {
            let event = reader.read_event().map_err(|e| bad(&e))?;
            let empty = matches!(event, Event::Empty(_));
            match event {
                Event::Start(start) | Event::Empty(start) => {
                    if stack.len() >= MAX_DEPTH {
                        return Err(protocol("xml nests too deeply"));
                    }
                    let mut el = Element {
                        name: local(start.local_name().as_ref()),
                        ..Element::default()
                    };
                    for attr in start.attributes() {
                        let attr = attr.map_err(|e| bad(&e))?;
                        let value = attr.unescape_value().map_err(|e| bad(&e))?;
                        el.attributes
                            .push((local(attr.key.local_name().as_ref()), value.into_owned()));
                    }
                    stack.push(el);
                    if empty && let Some(done) = close(&mut stack)? {
                        return Ok(done);
                    }
                }
                Event::End(_) => {
                    if let Some(done) = close(&mut stack)? {
                        return Ok(done);
                    }
                }
                Event::Text(t) => {
                    if let Some(top) = stack.last_mut() {
                        let s = t.xml_content().map_err(|e| bad(&e))?;
                        top.text.push_str(&s);
                    }
                }
                Event::GeneralRef(r) => {
                    if let Some(top) = stack.last_mut() {
                        let name = r.decode().map_err(|e| bad(&e))?;
                        if let Some(ch) = r.resolve_char_ref().map_err(|e| bad(&e))? {
                            top.text.push(ch);
                        } else if let Some(s) = resolve_predefined_entity(&name) {
                            top.text.push_str(s);
                        } else {
                            return Err(protocol(format!("unknown xml entity `&{name};`")));
                        }
                    }
                }
                Event::CData(c) => {
                    if let Some(top) = stack.last_mut() {
                        top.text.push_str(&String::from_utf8_lossy(&c));
                    }
                }
                Event::Eof => return Err(protocol("xml document ends early")),
                _ => {}
            }
        }
    }

    /// The first child named `name`.
    pub fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }

    /// All children named `name`.
    pub fn children_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }

    /// The text of the first child named `name`.
    pub fn child_text(&self, name: &str) -> Option<String> {
        self.child(name).map(|c| c.text.clone())
    }

    /// An attribute's value.
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

fn close(stack: &mut Vec<Element>) -> Result<Option<Element>> {
    let el = stack
        .pop()
        .ok_or_else(|| protocol("malformed xml: unbalanced end tag"))?;
    match stack.last_mut() {
        Some(parent) => {
            parent.children.push(el);
            Ok(None)
        }
        None => Ok(Some(el)),
    }
}

/// Text as a CDATA section (a `]]>` inside is split across two sections).
pub(crate) fn cdata(text: &str) -> String {
    format!("<![CDATA[{}]]>", text.replace("]]>", "]]]]><![CDATA[>"))
}

/// Text escaped for an element body or attribute.
pub(crate) fn text(s: &str) -> String {
    escape(s).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_attributes_text_cdata_and_entities() {
        let doc = Element::parse(
            r#"<?xml version="1.0"?><Instance><Tasks><Task Type="SQL"><Name>a &amp; b</Name>
            <Result Format="text"><![CDATA["_c0"
3
]]></Result></Task></Tasks></Instance>"#,
        )
        .unwrap();
        let task = doc.child("Tasks").unwrap().child("Task").unwrap();
        assert_eq!(task.attribute("Type"), Some("SQL"));
        assert_eq!(task.child_text("Name").unwrap(), "a & b");
        assert_eq!(task.child_text("Result").unwrap(), "\"_c0\"\n3\n");
        assert!(Element::parse("<a><b></a>").is_err());
        assert!(Element::parse("<a>").is_err());
        assert_eq!(cdata("x]]>y"), "<![CDATA[x]]]]><![CDATA[>y]]>");
    }
}
