//! Reading a configuration file into flat sections.
//!
//! Two file forms are accepted:
//! - TOML (`floe.toml`): sections as tables; inside a section, nested tables and dotted keys are
//!   the same thing, so `[iceberg.catalog] type = "sql"`, `[iceberg] catalog.type = "sql"` and
//!   `[iceberg] "catalog.type" = "sql"` all mean the key `catalog.type` of section `iceberg`.
//!   `[[routes]]` is a list of tables, each flattened the same way.
//! - Java properties (`*.properties`, or any file that is not TOML): `a.b.c = v` or `a.b.c: v`
//!   lines, as Kafka Connect configurations are written; the first segment is the section. Kafka
//!   Connect framework keys (`connector.class`, `key.converter…`, `tasks.max`, …) and JVM flags
//!   (`-D…`) are accepted and ignored, so a connector block can be used unchanged.
//!
//! String values may refer to the environment as `${env:NAME}` (secrets stay out of files).

use std::collections::BTreeMap;

use floe_core::{Error, Result};
use toml::Value;

/// A flat section: dotted keys to values.
pub type Section = BTreeMap<String, Value>;

/// The parsed file: named sections and the routes.
#[derive(Debug, Default)]
pub struct RawConfig {
    /// Top-level sections by name.
    pub sections: BTreeMap<String, Section>,
    /// `[[routes]]` entries.
    pub routes: Vec<Section>,
}

/// Kafka Connect framework keys that floe ignores in properties files.
const IGNORED_PREFIXES: &[&str] = &[
    "connector.class",
    "key.converter",
    "value.converter",
    "header.converter",
    "tasks.max",
    "topics",
    "topics.regex",
    "name",
    "errors.",
    "transforms",
    "consumer.override.",
];

/// Parse `text`; `properties` picks the Java properties form.
pub fn parse(text: &str, properties: bool) -> Result<RawConfig> {
    if properties {
        return parse_properties(text);
    }
    let doc: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| toml_error(text, &e))?;
    let mut raw = RawConfig::default();
    for (name, value) in doc {
        match (name.as_str(), value) {
            ("routes", Value::Array(items)) => {
                for (i, item) in items.into_iter().enumerate() {
                    let Value::Table(t) = item else {
                        return Err(Error::config(
                            &format!("routes[{i}]"),
                            "a route must be a table",
                        ));
                    };
                    let mut flat = Section::new();
                    flatten("", Value::Table(t), &mut flat);
                    raw.routes.push(substitute_env(flat)?);
                }
            }
            (_, Value::Table(t)) => {
                let mut flat = Section::new();
                flatten("", Value::Table(t), &mut flat);
                raw.sections.insert(name, substitute_env(flat)?);
            }
            (other, _) => {
                return Err(Error::config(
                    other,
                    "top-level keys must be sections such as [source] or [[routes]]",
                ));
            }
        }
    }
    Ok(raw)
}

/// A TOML syntax error as its position and problem only: toml's own message quotes the
/// offending line, which may hold a secret (a key pasted into the file).
fn toml_error(text: &str, e: &toml::de::Error) -> Error {
    let at = match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!(" at line {line}, column {column}")
        }
        None => String::new(),
    };
    Error::config(
        "(file)",
        format!("not valid toml{at}: {}", e.message().trim_end()),
    )
}

fn flatten(prefix: &str, value: Value, out: &mut Section) {
    match value {
        Value::Table(t) => {
            for (k, v) in t {
                let key = if prefix.is_empty() {
                    k
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        other => {
            out.insert(prefix.to_owned(), other);
        }
    }
}

fn parse_properties(text: &str) -> Result<RawConfig> {
    let mut raw = RawConfig::default();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty()
            || line.starts_with('#')
            || line.starts_with('!')
            || line.starts_with("-D")
        {
            continue;
        }
        let sep = line.find(['=', ':']).ok_or_else(|| {
            Error::config(
                &format!("line {}", n + 1),
                // The line itself is not quoted: it may be a secret pasted on its own.
                "is not `key = value` (nor a comment)",
            )
        })?;
        let key = line[..sep].trim();
        let value = line[sep + 1..].trim();
        if IGNORED_PREFIXES
            .iter()
            .any(|p| key == *p || key.starts_with(p))
        {
            continue;
        }
        let (section, rest) = key.split_once('.').ok_or_else(|| {
            Error::config(
                key,
                "properties keys are `section.key`, e.g. iceberg.catalog.type",
            )
        })?;
        raw.sections
            .entry(section.to_owned())
            .or_default()
            .insert(rest.to_owned(), Value::String(value.to_owned()));
    }
    for (name, section) in std::mem::take(&mut raw.sections) {
        raw.sections.insert(name, substitute_env(section)?);
    }
    Ok(raw)
}

fn substitute_env(section: Section) -> Result<Section> {
    section
        .into_iter()
        .map(|(k, v)| match v {
            Value::String(s) if s.contains("${env:") => {
                Ok((k.clone(), Value::String(expand(&k, &s)?)))
            }
            other => Ok((k, other)),
        })
        .collect()
}

fn expand(key: &str, s: &str) -> Result<String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("${env:") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 6..];
        let end = after
            .find('}')
            .ok_or_else(|| Error::config(key, "unterminated `${env:…}`"))?;
        let name = &after[..end];
        let value = std::env::var(name)
            .map_err(|_| Error::config(key, format!("environment variable `{name}` is not set")))?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A value as a string (numbers and booleans written plainly), for string-typed options.
pub fn as_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Integer(i) => Some(i.to_string()),
        Value::Float(f) => Some(f.to_string()),
        Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_errors_say_where_but_never_quote_the_line() {
        let secret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCY";
        let text = format!("[maxcompute]\nendpoint = \"http://x\"\naccesskey = {secret}\n");
        let e = parse(&text, false).unwrap_err();
        let shown = format!("{e} {e:?}");
        assert!(shown.contains("line 3"), "{shown}");
        assert!(!shown.contains(secret), "{shown}");
        let e = parse(&format!("iceberg.catalog.type = rest\n{secret}\n"), true).unwrap_err();
        let shown = format!("{e} {e:?}");
        assert!(shown.contains("line 2"), "{shown}");
        assert!(!shown.contains(secret), "{shown}");
    }

    #[test]
    fn toml_forms_flatten_the_same() {
        let a = parse("[iceberg.catalog]\ntype = \"sql\"\nuri = \"c.db\"\n", false).unwrap();
        let b = parse(
            "[iceberg]\ncatalog.type = \"sql\"\n\"catalog.uri\" = \"c.db\"\n",
            false,
        )
        .unwrap();
        assert_eq!(a.sections, b.sections);
        assert_eq!(a.sections["iceberg"]["catalog.type"].as_str(), Some("sql"));
        let r = parse(
            "[[routes]]\nname = \"a\"\ncsv.delimiter = \";\"\n[[routes]]\nname = \"b\"\n",
            false,
        )
        .unwrap();
        assert_eq!(r.routes.len(), 2);
        assert_eq!(r.routes[0]["csv.delimiter"].as_str(), Some(";"));
    }

    #[test]
    fn the_seed_connector_block_parses_as_properties() {
        let text = "# --- Iceberg Catalog (REST) ---\n\
            iceberg.catalog.type: rest\n\
            iceberg.catalog.uri: https://cn-hangzhou-internal.oss-tables.aliyuncs.com/iceberg\n\
            iceberg.catalog.rest.sigv4-enabled: true\n\
            iceberg.catalog.s3.path-style-access: true\n\
            key.converter: org.apache.kafka.connect.json.JsonConverter\n\
            value.converter.schemas.enable: false\n\
            \n\
            -Daws.requestChecksumCalculation=when_required\n";
        let raw = parse(text, true).unwrap();
        let ice = &raw.sections["iceberg"];
        assert_eq!(ice["catalog.type"].as_str(), Some("rest"));
        assert_eq!(
            ice["catalog.uri"].as_str(),
            Some("https://cn-hangzhou-internal.oss-tables.aliyuncs.com/iceberg")
        );
        assert_eq!(ice["catalog.rest.sigv4-enabled"].as_str(), Some("true"));
        assert_eq!(
            raw.sections.len(),
            1,
            "framework keys ignored: {:?}",
            raw.sections.keys()
        );
    }

    #[test]
    fn env_references_expand_and_name_missing_variables() {
        // SAFETY-free: set a variable only this test reads.
        let name = "FLOE_TEST_CONFIG_SECRET";
        let text = format!("[iceberg]\n\"catalog.token\" = \"Bearer ${{env:{name}}}\"\n");
        let err = parse(&text, false).unwrap_err().to_string();
        assert!(err.contains(name) && err.contains("catalog.token"), "{err}");
        let err = parse("[a]\nb = 1\nc = [1]\n", false).map(|_| ()).err();
        assert!(err.is_none());
        let err = parse("top = 1\n", false).unwrap_err().to_string();
        assert!(err.contains("`top`"), "{err}");
    }
}
