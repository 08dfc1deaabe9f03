//! The table tunnel: where it is, the headers every tunnel call carries, and the entry points to
//! upload ([`crate::upload`]) and upsert ([`crate::upsert`]) sessions.
//!
//! The endpoint is, in order: the `tunnel_endpoint` option; the host the service names for the
//! project (`GET /projects/<p>/tunnel?service`, with `quotaName` when a quota is set); or, if that
//! lookup fails for a reason other than credentials, `dt.<region>.maxcompute.aliyun.com` with the
//! REST endpoint's scheme. Every call sends `x-odps-tunnel-version: 6`,
//! `odps-tunnel-date-transform: v1`, `odps-tunnel-sdk-support-schema-evolution: true`, the
//! project in `curr_project`, and the quota in `quotaName` when one is set.

use floe_core::{Error, ErrorKind, Result};
use floe_tunnel_codec::Compression;
use reqwest::Method;

use crate::client::{MaxComputeClient, check_http_url};
use crate::http::{OdpsHttp, OdpsRequest};
use crate::meta::TableId;
use crate::partition::PartitionSpec;

/// The tunnel protocol version floe speaks.
pub const TUNNEL_VERSION: &str = "6";

/// How to open the tunnel.
#[derive(Clone, Debug, Default)]
pub struct TunnelOptions {
    /// The `tunnel_endpoint` option: used as is when set.
    pub endpoint: Option<String>,
    /// The `tunnel_name` option: the tunnel quota, sent as `quotaName`.
    pub quota_name: Option<String>,
    /// Block compression; default none. pyodps uses `deflate` when compression is on.
    pub compression: Option<Compression>,
}

/// A table tunnel client; cheap to clone.
#[derive(Clone, Debug)]
pub struct TableTunnel {
    pub(crate) http: OdpsHttp,
    pub(crate) project: String,
    pub(crate) quota_name: Option<String>,
    pub(crate) compression: Option<Compression>,
}

impl TableTunnel {
    /// Resolve the endpoint (see the module doc) and build the tunnel client.
    pub async fn connect(client: &MaxComputeClient, options: TunnelOptions) -> Result<Self> {
        let quota = options.quota_name.clone().filter(|q| !q.is_empty());
        let endpoint = match options.endpoint.as_deref().filter(|e| !e.is_empty()) {
            Some(e) => {
                check_http_url("tunnel_endpoint", e)?;
                e.trim_end_matches('/').to_owned()
            }
            None => match client.tunnel_service_endpoint(quota.as_deref()).await {
                Ok(e) => e,
                Err(e) if e.kind() == ErrorKind::Auth => return Err(e),
                Err(e) => match client.region() {
                    Some(region) => {
                        let scheme = client
                            .endpoint()
                            .split_once("://")
                            .map(|(s, _)| s)
                            .unwrap_or("https");
                        let inferred = format!("{scheme}://dt.{region}.maxcompute.aliyun.com");
                        tracing::info!(error = %e, endpoint = %inferred, "tunnel endpoint lookup failed, using the region's default");
                        inferred
                    }
                    None => {
                        return Err(
                            e.while_doing("no tunnel_endpoint is set and the region is unknown")
                        );
                    }
                },
            },
        };
        Ok(TableTunnel::with_endpoint(client, &endpoint, options))
    }

    /// A tunnel client at a known endpoint (no lookup).
    pub fn with_endpoint(
        client: &MaxComputeClient,
        endpoint: &str,
        options: TunnelOptions,
    ) -> Self {
        let headers = vec![
            (
                "x-odps-tunnel-version".to_owned(),
                TUNNEL_VERSION.to_owned(),
            ),
            ("odps-tunnel-date-transform".to_owned(), "v1".to_owned()),
            (
                "odps-tunnel-sdk-support-schema-evolution".to_owned(),
                "true".to_owned(),
            ),
        ];
        TableTunnel {
            http: client.http.with_endpoint(endpoint).with_headers(headers),
            project: client.project.clone(),
            quota_name: options.quota_name.filter(|q| !q.is_empty()),
            compression: options.compression,
        }
    }

    /// The tunnel endpoint in use.
    pub fn endpoint(&self) -> &str {
        self.http.endpoint()
    }

    /// A request on `path` with the project, quota and partition parameters set.
    pub(crate) fn request(
        &self,
        method: Method,
        path: String,
        partition: Option<&PartitionSpec>,
    ) -> OdpsRequest {
        let mut req = OdpsRequest::new(method, path).query("curr_project", self.project.clone());
        if let Some(q) = &self.quota_name {
            req = req.query("quotaName", q.clone());
        }
        if let Some(p) = partition {
            req = req.query("partition", p.to_tunnel());
        }
        req
    }
}

/// A description of a session for messages: `upload session <id> of p.t (ds='1')`.
pub(crate) fn describe(
    kind: &str,
    id: &str,
    table: &TableId,
    partition: Option<&PartitionSpec>,
) -> String {
    match partition {
        Some(p) => format!("{kind} session {id} of maxcompute table {table} ({p})"),
        None => format!("{kind} session {id} of maxcompute table {table}"),
    }
}

/// A protocol error naming `what`.
pub(crate) fn protocol(what: &str, problem: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Protocol, format!("{what}: {problem}"))
}
