//! The MACs and digests the Alibaba schemes are built from.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use floe_core::{Error, Result};
use hmac::{Hmac, Mac};
use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256};

type HmacSha1 = Hmac<Sha1>;
type HmacSha256 = Hmac<Sha256>;

// HMAC takes keys of any length, so the `InvalidLength` below never happens; it is still
// mapped to an error rather than unwrapped.
fn key_error(_: hmac::digest::InvalidLength) -> Error {
    Error::unexpected("hmac rejected its key")
}

/// HMAC-SHA1 of `data` under `key`.
pub(crate) fn hmac_sha1(key: &[u8], data: &[u8]) -> Result<[u8; 20]> {
    let mut mac = <HmacSha1 as Mac>::new_from_slice(key).map_err(key_error)?;
    mac.update(data);
    Ok(mac.finalize().into_bytes().into())
}

/// HMAC-SHA256 of `data` under `key`.
pub(crate) fn hmac_sha256(key: &[u8], data: &[u8]) -> Result<[u8; 32]> {
    let mut mac = <HmacSha256 as Mac>::new_from_slice(key).map_err(key_error)?;
    mac.update(data);
    Ok(mac.finalize().into_bytes().into())
}

/// `base64(HMAC-SHA1(key, data))`: the MAC of OSS V1, MNS and ODPS.
pub(crate) fn hmac_sha1_base64(key: &[u8], data: &[u8]) -> Result<String> {
    Ok(BASE64.encode(hmac_sha1(key, data)?))
}

/// Whether `signature` (base64) is `HMAC-SHA1(key, data)`, compared in constant time.
pub(crate) fn verify_hmac_sha1_base64(key: &[u8], data: &[u8], signature: &str) -> bool {
    let Ok(sig) = BASE64.decode(signature) else {
        return false;
    };
    let Ok(mut mac) = <HmacSha1 as Mac>::new_from_slice(key) else {
        return false;
    };
    mac.update(data);
    mac.verify_slice(&sig).is_ok()
}

/// Lowercase hex SHA-256.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Lowercase hex MD5.
pub(crate) fn md5_hex(data: &[u8]) -> String {
    hex::encode(Md5::digest(data))
}

/// The Alibaba V4 signing key: HMAC-SHA256 chained over
/// `"aliyun_v4" + secret`, date, region, product and `"aliyun_v4_request"`.
pub(crate) fn aliyun_v4_signing_key(
    secret: &str,
    date: &str,
    region: &str,
    product: &str,
) -> Result<[u8; 32]> {
    let k_secret = format!("aliyun_v4{secret}");
    let k_date = hmac_sha256(k_secret.as_bytes(), date.as_bytes())?;
    let k_region = hmac_sha256(&k_date, region.as_bytes())?;
    let k_product = hmac_sha256(&k_region, product.as_bytes())?;
    hmac_sha256(&k_product, b"aliyun_v4_request")
}

/// Standard base64 of bytes.
pub(crate) fn base64(data: &[u8]) -> String {
    BASE64.encode(data)
}
