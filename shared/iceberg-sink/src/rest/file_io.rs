//! The FileIO a table's files are read and written with, chosen by the table location's scheme.
//!
//! | scheme | storage |
//! |---|---|
//! | `file` | iceberg's `LocalFsStorageFactory` |
//! | `s3`, `s3a`, `s3n` | floe's S3 client ([`S3StorageFactory`], `floe-storage` on aws-sdk-s3) |
//! | `oss` | the same client, pointed at OSS's S3-compatible endpoint |
//! | `memory` | iceberg's in-memory storage (tests) |
//!
//! `oss://bucket/key` is what OSS Tables hands out; the Kafka Connect seed forces Java's
//! `S3FileIO` onto it, and floe does the same: an `oss://bucket/key` path becomes an S3 API
//! request for `key` in `bucket` at `s3.endpoint` (when that is
//! not set, `https://oss-<client.region>.aliyuncs.com`). Path-style or virtual-host addressing
//! follows `s3.path-style-access`, as for S3; an endpoint on an IP address or `localhost`
//! defaults to path style (virtual hosts cannot exist there).
//!
//! Checksums: OSS refuses the flexible checksums newer AWS SDKs send by default, which is why the
//! seed runs Java with `aws.requestChecksumCalculation=when_required` and
//! `aws.responseChecksumValidation=when_required`; floe's client on `oss://` is configured the
//! same way ([`floe_storage::ChecksumPolicy::WhenRequired`]). The `oss_file_io_*` tests check the
//! requests on the wire.
//!
//! Table properties are merged from the catalog's FileIO properties, then the `config` a REST
//! server returns with the table, then the matching `storage-credentials` (longest prefix wins).

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::io::{
    FileIO, FileIOBuilder, LocalFsStorageFactory, MemoryStorageFactory, StorageFactory,
};
use iceberg::{Error, ErrorKind, Result};

pub use super::s3_storage::{S3StorageFactory, StoreCache};

/// FileIO property: the S3 endpoint (iceberg's `s3.endpoint`).
pub const S3_ENDPOINT: &str = "s3.endpoint";

/// FileIO property: path-style addressing (iceberg's `s3.path-style-access`).
pub const S3_PATH_STYLE_ACCESS: &str = "s3.path-style-access";

/// The scheme of a location (`s3` of `s3://b/k`), lowercased; `file` for a bare absolute path.
fn scheme_of(location: &str) -> Result<String> {
    if location.starts_with('/') {
        return Ok("file".to_owned());
    }
    match location.split_once("://") {
        Some((scheme, _)) if !scheme.is_empty() => Ok(scheme.to_ascii_lowercase()),
        _ => match location.split_once(":/") {
            Some((scheme, _)) if !scheme.is_empty() => Ok(scheme.to_ascii_lowercase()),
            _ => Err(Error::new(
                ErrorKind::DataInvalid,
                format!("table location `{location}` has no scheme"),
            )),
        },
    }
}

/// The FileIO for files under `location`, configured with `props` (see the module doc), with
/// a client of its own; a catalog opens its tables' FileIOs through its [`TableFileIo`].
pub fn table_file_io(location: &str, props: &HashMap<String, String>) -> Result<FileIO> {
    TableFileIo::default().open(location, props)
}

/// Opens the FileIOs of one catalog's tables: those on S3 or OSS share the clients they built
/// ([`StoreCache`]), so a table loaded again (every commit pass loads its tables) reuses the
/// connections of the last load.
#[derive(Clone, Debug, Default)]
pub struct TableFileIo {
    stores: StoreCache,
}

impl TableFileIo {
    /// The clients kept.
    pub fn clients(&self) -> usize {
        self.stores.len()
    }

    /// [`table_file_io`], reusing this catalog's clients.
    pub fn open(&self, location: &str, props: &HashMap<String, String>) -> Result<FileIO> {
        open_file_io(location, props, &self.stores)
    }
}

fn open_file_io(
    location: &str,
    props: &HashMap<String, String>,
    stores: &StoreCache,
) -> Result<FileIO> {
    let scheme = scheme_of(location)?;
    let mut props = props.clone();
    let factory: Arc<dyn StorageFactory> = match scheme.as_str() {
        "file" => Arc::new(LocalFsStorageFactory),
        "memory" => Arc::new(MemoryStorageFactory),
        "s3" | "s3a" | "s3n" => Arc::new(S3StorageFactory {
            oss: false,
            stores: stores.clone(),
        }),
        "oss" => {
            if !props.contains_key(S3_ENDPOINT) {
                let region = props
                    .get("client.region")
                    .or_else(|| props.get("s3.region"))
                    .ok_or_else(|| {
                        Error::new(
                            ErrorKind::DataInvalid,
                            format!(
                                "`{location}` is on oss: set `s3.endpoint` to the oss s3-compatible \
                                 endpoint (or `client.region`)"
                            ),
                        )
                    })?;
                props.insert(S3_ENDPOINT.to_owned(), oss_endpoint(region));
            }
            Arc::new(S3StorageFactory {
                oss: true,
                stores: stores.clone(),
            })
        }
        other => {
            return Err(Error::new(
                ErrorKind::FeatureUnsupported,
                format!("table location `{location}`: storage scheme `{other}` is not supported"),
            ));
        }
    };
    // Virtual-host addressing cannot work on an IP address or `localhost` (there is no
    // `bucket.127.0.0.1`): such an endpoint means path style unless the properties say otherwise,
    // as the AWS SDKs' S3 endpoint rules decide for IP endpoints.
    if props.get(S3_ENDPOINT).is_some_and(|e| is_local_endpoint(e))
        && !props.contains_key(S3_PATH_STYLE_ACCESS)
    {
        props.insert(S3_PATH_STYLE_ACCESS.to_owned(), "true".to_owned());
    }
    Ok(FileIOBuilder::new(factory).with_props(props).build())
}

/// OSS's S3-compatible endpoint in `region`.
pub fn oss_endpoint(region: &str) -> String {
    format!("https://oss-{region}.aliyuncs.com")
}

/// Whether `endpoint` is on an IP address or `localhost`, where buckets cannot be virtual hosts.
pub fn is_local_endpoint(endpoint: &str) -> bool {
    let host = endpoint_host(endpoint);
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok()
}

/// The host of an endpoint URL (`127.0.0.1` of `http://127.0.0.1:9000/`, `::1` of `http://[::1]:9000`).
pub fn endpoint_host(endpoint: &str) -> String {
    let rest = endpoint.split_once("://").map_or(endpoint, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next().unwrap_or(v6).to_owned();
    }
    authority
        .rsplit_once(':')
        .map_or(authority, |(h, _)| h)
        .to_owned()
}

/// Catalog FileIO properties, overlaid with a table's `config`, then with the `config` of the
/// storage credential whose prefix is the longest one `location` starts with.
pub fn merge_table_props(
    catalog: &HashMap<String, String>,
    table_config: &HashMap<String, String>,
    storage_credentials: &[(String, HashMap<String, String>)],
    location: &str,
) -> HashMap<String, String> {
    let mut props = catalog.clone();
    props.extend(table_config.iter().map(|(k, v)| (k.clone(), v.clone())));
    if let Some((_, config)) = storage_credentials
        .iter()
        .filter(|(prefix, _)| location.starts_with(prefix.as_str()))
        .max_by_key(|(prefix, _)| prefix.len())
    {
        props.extend(config.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    props
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_hosts() {
        assert_eq!(endpoint_host("http://127.0.0.1:9000/"), "127.0.0.1");
        assert_eq!(endpoint_host("http://[::1]:9000"), "::1");
        assert_eq!(
            endpoint_host("https://s3.us-east-1.amazonaws.com"),
            "s3.us-east-1.amazonaws.com"
        );
        assert_eq!(endpoint_host("localhost:4566"), "localhost");
    }

    fn props(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn schemes() {
        for (loc, want) in [
            ("s3://b/k", Some("s3")),
            ("S3A://b/k", Some("s3a")),
            ("oss://b/k", Some("oss")),
            ("file:///tmp/x", Some("file")),
            ("file:/tmp/x", Some("file")),
            ("/tmp/x", Some("file")),
            ("relative/x", None),
        ] {
            assert_eq!(scheme_of(loc).ok().as_deref(), want, "{loc}");
        }
    }

    #[test]
    fn oss_needs_an_endpoint_or_a_region() {
        let e = table_file_io("oss://b/t", &HashMap::new()).unwrap_err();
        assert!(e.message().contains("s3.endpoint"), "{e}");
        let io = table_file_io("oss://b/t", &props(&[("client.region", "cn-hangzhou")])).unwrap();
        assert_eq!(
            io.config().props().get(S3_ENDPOINT).map(String::as_str),
            Some("https://oss-cn-hangzhou.aliyuncs.com")
        );
        let io =
            table_file_io("oss://b/t", &props(&[(S3_ENDPOINT, "http://127.0.0.1:9")])).unwrap();
        assert_eq!(
            io.config().props().get(S3_ENDPOINT).map(String::as_str),
            Some("http://127.0.0.1:9")
        );
        let e = table_file_io("gs://b/t", &HashMap::new()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::FeatureUnsupported);
    }

    #[test]
    fn table_config_and_longest_credential_prefix_win() {
        let merged = merge_table_props(
            &props(&[("s3.region", "a"), ("s3.access-key-id", "catalog")]),
            &props(&[("s3.region", "b")]),
            &[
                (
                    "s3://bucket/".to_owned(),
                    props(&[("s3.access-key-id", "short")]),
                ),
                (
                    "s3://bucket/t/".to_owned(),
                    props(&[("s3.access-key-id", "long")]),
                ),
                (
                    "s3://other/".to_owned(),
                    props(&[("s3.access-key-id", "other")]),
                ),
            ],
            "s3://bucket/t/x",
        );
        assert_eq!(merged["s3.region"], "b");
        assert_eq!(merged["s3.access-key-id"], "long");
    }
}
