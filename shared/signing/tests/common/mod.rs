//! Helpers shared by the vector tests: loading a vector file and the pinned clock.

#![allow(dead_code)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// Load `tests/vectors/<name>` from the workspace root.
pub fn load(name: &str) -> Value {
    let path = format!("{}/../../tests/vectors/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {path}: {e}"))
}

/// 2025-01-15T08:30:45Z, the time every vector was pinned to.
pub fn pinned_time() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_736_929_845)
}

/// A JSON string field.
pub fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("field `{key}` is not a string in {v}"))
}

/// A JSON object of string → string as header pairs.
pub fn pairs(v: &Value) -> Vec<(String, String)> {
    v.as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// Borrow owned pairs.
pub fn borrow(p: &[(String, String)]) -> Vec<(&str, &str)> {
    p.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// Collects mismatches so a table-driven test reports every failing case at once.
#[derive(Default)]
pub struct Failures(Vec<String>);

impl Failures {
    /// Record a mismatch of `what` in case `case`.
    pub fn check(&mut self, case: &str, what: &str, got: Option<&str>, want: &str) {
        if got != Some(want) {
            self.0.push(format!(
                "case `{case}`: {what}\n   got: {got:?}\n  want: {want:?}"
            ));
        }
    }

    /// Panic listing every mismatch, if any.
    pub fn finish(self, checked: usize) {
        assert!(checked > 0, "no cases were checked");
        assert!(self.0.is_empty(), "\n{}", self.0.join("\n"));
    }
}
