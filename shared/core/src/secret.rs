//! Secrets (access key secrets, tokens, passwords) in a type that never prints its value.
//!
//! `Debug` and `Display` print `***`, serde serializes `***`, and the only way to the value is
//! [`Secret::expose`], which keeps each use greppable.

use std::fmt;

/// A secret string; see the module doc.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    /// Wrap a value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The value, for the one place that must send or sign with it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the secret is empty (not set).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Self {
        Secret(s)
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Self {
        Secret(s.to_owned())
    }
}

impl serde::Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("***")
    }
}

impl<'de> serde::Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Secret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_prints_its_value() {
        let s = Secret::new("wJalrXUtnFEMI");
        assert_eq!(format!("{s:?} {s} {s:#?}"), "*** *** ***");
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"***\"");
        assert_eq!(s.expose(), "wJalrXUtnFEMI");
        #[derive(Debug)]
        #[allow(dead_code)]
        struct Creds {
            id: String,
            secret: Secret,
        }
        let c = Creds {
            id: "AK".into(),
            secret: s,
        };
        assert!(!format!("{c:?}").contains("wJal"));
    }
}
