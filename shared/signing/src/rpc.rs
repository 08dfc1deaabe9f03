//! Alibaba Cloud's RPC-style API signature (signature version 1.0, `HMAC-SHA1`): what STS
//! `AssumeRole` takes, and every other "POP" API whose parameters travel as a query or form.
//!
//! ```text
//! Signature    = base64(HMAC-SHA1(AccessKeySecret + "&", StringToSign))
//! StringToSign = METHOD "&" enc("/") "&" enc(Canonicalized)
//! Canonicalized = enc(k1) "=" enc(v1) "&" enc(k2) "=" enc(v2) …   (sorted by key, bytewise)
//! ```
//! - `enc` is percent-encoding of the UTF-8 bytes with only `A-Z a-z 0-9 - _ . ~` left as they
//!   are (so a space is `%20`, `*` is `%2A`, `~` stays).
//! - The parameters are all of the request's, query and form body together, without
//!   `Signature` itself. The common ones come from [`common_params`]: `AccessKeyId`,
//!   `SignatureMethod`, `SignatureVersion`, `SignatureNonce`, `Timestamp` (UTC,
//!   `YYYY-MM-DDThh:mm:ssZ`), `Format`, `Version`, and `SecurityToken` when the keys have one.
//!
//! [`sign`] returns the signature; [`verify`] is the server side (the test stand-in of STS).

use floe_core::Result;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::credentials::Credentials;
use crate::crypto;

/// Everything but `A-Z a-z 0-9 - _ . ~` is encoded.
const RPC_ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The RPC percent-encoding of `s`.
pub fn encode(s: &str) -> String {
    utf8_percent_encode(s, RPC_ENCODE).to_string()
}

/// The common parameters of a signed call (without `Signature`): `version` is the API's
/// (`2015-04-01` for STS), `timestamp` is `YYYY-MM-DDThh:mm:ssZ`, `nonce` unique per request.
pub fn common_params(
    credentials: &Credentials,
    version: &str,
    timestamp: &str,
    nonce: &str,
) -> Vec<(String, String)> {
    let mut p = vec![
        ("Format".to_owned(), "JSON".to_owned()),
        ("Version".to_owned(), version.to_owned()),
        (
            "AccessKeyId".to_owned(),
            credentials.access_key_id().to_owned(),
        ),
        ("SignatureMethod".to_owned(), "HMAC-SHA1".to_owned()),
        ("SignatureVersion".to_owned(), "1.0".to_owned()),
        ("SignatureNonce".to_owned(), nonce.to_owned()),
        ("Timestamp".to_owned(), timestamp.to_owned()),
    ];
    if let Some(token) = credentials.security_token() {
        p.push(("SecurityToken".to_owned(), token.expose().to_owned()));
    }
    p
}

/// The string to sign for `method` and every parameter of the request (any order).
pub fn string_to_sign<K: AsRef<str>, V: AsRef<str>>(method: &str, params: &[(K, V)]) -> String {
    let mut pairs: Vec<(String, String)> = params
        .iter()
        .filter(|(k, _)| k.as_ref() != "Signature")
        .map(|(k, v)| (encode(k.as_ref()), encode(v.as_ref())))
        .collect();
    pairs.sort();
    let canonical = pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    format!("{method}&{}&{}", encode("/"), encode(&canonical))
}

/// The `Signature` parameter for a request with these parameters.
pub fn sign<K: AsRef<str>, V: AsRef<str>>(
    secret: &str,
    method: &str,
    params: &[(K, V)],
) -> Result<String> {
    crypto::hmac_sha1_base64(
        format!("{secret}&").as_bytes(),
        string_to_sign(method, params).as_bytes(),
    )
}

/// Whether `params` (which include `Signature`) are signed with `secret`.
pub fn verify<K: AsRef<str>, V: AsRef<str>>(secret: &str, method: &str, params: &[(K, V)]) -> bool {
    let Some((_, signature)) = params.iter().find(|(k, _)| k.as_ref() == "Signature") else {
        return false;
    };
    crypto::verify_hmac_sha1_base64(
        format!("{secret}&").as_bytes(),
        string_to_sign(method, params).as_bytes(),
        signature.as_ref(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_leaves_only_the_unreserved_characters() {
        assert_eq!(encode("a b*c~d/e=f&g+h"), "a%20b%2Ac~d%2Fe%3Df%26g%2Bh");
        assert_eq!(encode("ü"), "%C3%BC");
    }

    #[test]
    fn a_signature_verifies_and_a_changed_parameter_does_not() {
        let creds = Credentials::new("AKID", "secret").with_security_token("tok");
        let mut params = common_params(&creds, "2015-04-01", "2026-12-02T13:00:00Z", "n-1");
        params.push(("Action".into(), "AssumeRole".into()));
        params.push(("RoleArn".into(), "acs:ram::1:role/r".into()));
        let signature = sign("secret", "POST", &params).unwrap();
        params.push(("Signature".into(), signature));
        assert!(verify("secret", "POST", &params));
        assert!(!verify("other", "POST", &params));
        assert!(!verify("secret", "GET", &params));
        params[0].1 = "XML".into();
        assert!(!verify("secret", "POST", &params));
        assert!(
            string_to_sign("POST", &[("b", "2"), ("a", "x y")]).starts_with("POST&%2F&a%3Dx%2520y")
        );
    }
}
