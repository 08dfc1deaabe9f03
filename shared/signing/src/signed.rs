//! What a signer returns: the headers to add and the canonical string it signed.

use std::fmt;

/// Headers a signer adds to a request, plus the strings it signed.
///
/// `Debug` shows header names only: values can hold a security token.
#[derive(Clone, PartialEq, Eq)]
pub struct SignedHeaders {
    headers: Vec<(String, String)>,
    string_to_sign: String,
    canonical_request: Option<String>,
}

impl SignedHeaders {
    pub(crate) fn new(
        headers: Vec<(String, String)>,
        string_to_sign: String,
        canonical_request: Option<String>,
    ) -> Self {
        SignedHeaders {
            headers,
            string_to_sign,
            canonical_request,
        }
    }

    /// The headers to add, in the order the signer produced them (names as the SDKs spell them).
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// Consume into the header list.
    pub fn into_headers(self) -> Vec<(String, String)> {
        self.headers
    }

    /// The value of one added header, by case-insensitive name.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The `Authorization` value.
    pub fn authorization(&self) -> Option<&str> {
        self.get("authorization")
    }

    /// The exact string the final MAC was computed over (for SigV4 this is empty: the
    /// `aws-sigv4` crate does not return it; see [`crate::sigv4`]).
    pub fn string_to_sign(&self) -> &str {
        &self.string_to_sign
    }

    /// The canonical request, for the schemes that hash one into the string to sign (OSS V4).
    pub fn canonical_request(&self) -> Option<&str> {
        self.canonical_request.as_deref()
    }
}

impl fmt::Debug for SignedHeaders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignedHeaders")
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}
