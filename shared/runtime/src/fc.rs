//! Alibaba Function Compute 3.0, custom runtime: the binary is an HTTP server on
//! `0.0.0.0:$FC_SERVER_PORT` (9000 when unset).
//!
//! | request | what it is | answer |
//! |---|---|---|
//! | `POST /invoke` (`x-fc-control-path: /invoke`) | an event: OSS / MNS / timer trigger, `InvokeFunction` | 200 + `x-fc-status: 200` and the result; on error 404 + `x-fc-status: 404` and `{"errorType","errorMessage","errorKind"}` |
//! | `POST /initialize` (`/initialize`) | the initializer hook, once per instance | 200 / 404 as above |
//! | anything else (`/http-invoke`) | an HTTP trigger request | the handler's answer + `x-fc-status: 200`; on error a status by kind ([`crate::error`]) + `x-fc-status: 404` |
//!
//! Every request carries FC's common headers: `x-fc-request-id` (on every log line of the
//! invocation, and in the `FC Invoke Start/End RequestId:` lines FC's log view splits on), and
//! the function role's temporary credentials (`x-fc-access-key-id`, `x-fc-access-key-secret`,
//! `x-fc-security-token`), handed to the handler, stored in [`SharedCredentials`] and published
//! with `floe_signing::credentials::set_platform_credentials` before the handler runs, so every
//! Alibaba client built at start signs with the keys of the latest invocation. The
//! deadline is the request's arrival plus `x-fc-function-timeout` seconds when FC sends it,
//! else `FLOE_TIMEOUT_SECS` (set it to the function's timeout; 60 when unset).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use floe_core::{Error, ErrorKind, Result, Secret};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;
use tracing::Instrument as _;

use crate::error::{FC_FAILED_STATUS, error_body, error_message, http_status};
use crate::function::{Function, HttpRequest, HttpResponse, Input, Output};
use crate::invocation::{Deadline, Invocation, Platform, SharedCredentials, StsCredentials};
use crate::invoke::invoke;
use crate::logging::invocation_span;

/// The port FC's custom runtime uses when `FC_SERVER_PORT` is unset.
pub const DEFAULT_PORT: u16 = 9000;

/// The invocation time limit used when FC does not send `x-fc-function-timeout` and
/// `FLOE_TIMEOUT_SECS` is unset (FC's default function timeout).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// `FC_SERVER_PORT`, or 9000.
pub fn port_from_env() -> Result<u16> {
    match std::env::var("FC_SERVER_PORT") {
        Ok(v) if !v.is_empty() => v.parse().map_err(|_| {
            Error::new(
                ErrorKind::Config,
                format!("environment variable FC_SERVER_PORT is not a port number: {v:?}"),
            )
        }),
        _ => Ok(DEFAULT_PORT),
    }
}

/// What every connection shares.
struct Server {
    function: Arc<dyn Function>,
    name: &'static str,
    credentials: SharedCredentials,
    timeout: Duration,
}

/// Bind `0.0.0.0:$FC_SERVER_PORT` and serve until the process is stopped.
pub async fn run(
    function: Arc<dyn Function>,
    name: &'static str,
    credentials: SharedCredentials,
) -> Result<()> {
    let port = port_from_env()?;
    let listener = TcpListener::bind(("0.0.0.0", port))
        .await
        .map_err(|e| Error::from(e).while_doing(format!("failed to listen on 0.0.0.0:{port}")))?;
    serve(listener, function, name, credentials).await
}

/// Serve requests from `listener` (tests bind their own).
pub async fn serve(
    listener: TcpListener,
    function: Arc<dyn Function>,
    name: &'static str,
    credentials: SharedCredentials,
) -> Result<()> {
    let addr: Option<SocketAddr> = listener.local_addr().ok();
    let server = Arc::new(Server {
        function,
        name,
        credentials,
        timeout: timeout_from_env()?,
    });
    let port = addr.map(|a| a.port()).unwrap_or_default();
    tracing::info!(port, function = name, "fc custom runtime listening");
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "failed to accept a connection");
                continue;
            }
        };
        let server = server.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let server = server.clone();
                async move { Ok::<_, Infallible>(respond(&server, req).await) }
            });
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
}

fn timeout_from_env() -> Result<Duration> {
    match std::env::var("FLOE_TIMEOUT_SECS") {
        Ok(v) if !v.is_empty() => v.parse::<u64>().map(Duration::from_secs).map_err(|_| {
            Error::new(
                ErrorKind::Config,
                format!("environment variable FLOE_TIMEOUT_SECS is not a number of seconds: {v:?}"),
            )
        }),
        _ => Ok(DEFAULT_TIMEOUT),
    }
}

/// Which of FC's three request kinds this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Invoke,
    Initialize,
    Http,
}

fn kind_of(method: &str, path: &str, control_path: Option<&str>) -> Kind {
    match control_path {
        Some("/invoke") => Kind::Invoke,
        Some("/initialize") => Kind::Initialize,
        Some(_) => Kind::Http,
        None => match (method, path) {
            ("POST", "/invoke") => Kind::Invoke,
            ("POST", "/initialize") => Kind::Initialize,
            _ => Kind::Http,
        },
    }
}

async fn respond(server: &Server, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let arrived = Instant::now();
    let (parts, body) = req.into_parts();
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let method = parts.method.as_str().to_owned();
    let path = parts.uri.path().to_owned();
    let kind = kind_of(&method, &path, header("x-fc-control-path"));
    let request_id = header("x-fc-request-id")
        .map(str::to_owned)
        .unwrap_or_else(local_request_id);
    let credentials = credentials_of(&header);
    if let Some(c) = &credentials {
        server.credentials.set(c.clone());
        // Every Alibaba client of the process signs its next request with these keys.
        floe_signing::credentials::set_platform_credentials(
            floe_signing::Credentials::new(&c.access_key_id, c.access_key_secret.clone())
                .with_security_token(c.security_token.clone()),
        );
    }
    let timeout_header = if kind == Kind::Initialize {
        "x-fc-initialization-timeout"
    } else {
        "x-fc-function-timeout"
    };
    let timeout = header(timeout_header)
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(server.timeout);
    let context = Invocation {
        request_id: request_id.clone(),
        platform: Platform::Fc,
        function: server.name,
        deadline: Deadline::at(arrived + timeout),
        credentials,
        metrics: Arc::default(),
    };
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            let e = Error::new(
                ErrorKind::Io,
                format!("failed to read the request body: {e}"),
            );
            return error_response(FC_FAILED_STATUS, &e);
        }
    };

    let phase = if kind == Kind::Initialize {
        "Initialize"
    } else {
        "Invoke"
    };
    println!("FC {phase} Start RequestId: {request_id}");
    let response = match kind {
        Kind::Invoke => match invoke(server.function.as_ref(), Input::Payload(body), context).await
        {
            Ok(output) => ok_response(output),
            Err(e) => error_response(FC_FAILED_STATUS, &e),
        },
        Kind::Initialize => {
            let span = invocation_span(server.name, &request_id, Platform::Fc.as_str());
            let result = server
                .function
                .initialize(&context)
                .instrument(span.clone())
                .await;
            span.in_scope(|| match &result {
                Ok(()) => tracing::info!("instance initialized"),
                Err(e) => tracing::error!(error = %error_message(e), "initialize failed"),
            });
            match result {
                Ok(()) => ok_response(Output::Json(Value::Null)),
                Err(e) => error_response(FC_FAILED_STATUS, &e),
            }
        }
        Kind::Http => {
            let request = HttpRequest {
                method,
                path,
                query: parts.uri.query().unwrap_or("").to_owned(),
                headers: headers
                    .into_iter()
                    .filter(|(k, _)| !is_credential_header(k))
                    .collect(),
                body,
            };
            match invoke(server.function.as_ref(), Input::Http(request), context).await {
                Ok(output) => ok_response(output),
                Err(e) => error_response(http_status(&e), &e),
            }
        }
    };
    println!("FC {phase} End RequestId: {request_id}");
    response
}

fn is_credential_header(name: &str) -> bool {
    matches!(
        name,
        "x-fc-access-key-id" | "x-fc-access-key-secret" | "x-fc-security-token"
    )
}

fn credentials_of<'a>(header: &impl Fn(&str) -> Option<&'a str>) -> Option<StsCredentials> {
    let id = header("x-fc-access-key-id").filter(|v| !v.is_empty())?;
    let secret = header("x-fc-access-key-secret").filter(|v| !v.is_empty())?;
    Some(StsCredentials {
        access_key_id: id.to_owned(),
        access_key_secret: Secret::new(secret),
        security_token: Secret::new(header("x-fc-security-token").unwrap_or("")),
    })
}

/// A request id for requests that came without one (a local run of the server).
fn local_request_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "local-{nanos:x}-{}",
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

fn ok_response(output: Output) -> Response<Full<Bytes>> {
    let r = match output {
        Output::Json(v) => HttpResponse::json(200, &v),
        Output::Http(r) => r,
    };
    build(r.status, &r.headers, r.body, 200)
}

fn error_response(status: u16, e: &Error) -> Response<Full<Bytes>> {
    let r = HttpResponse::json(status, &error_body(e));
    build(r.status, &r.headers, r.body, FC_FAILED_STATUS)
}

fn build(
    status: u16,
    headers: &[(String, String)],
    body: Bytes,
    fc_status: u16,
) -> Response<Full<Bytes>> {
    let mut builder = Response::builder()
        .status(status)
        .header("x-fc-status", fc_status.to_string());
    for (k, v) in headers {
        builder = builder.header(k.as_str(), v.as_str());
    }
    builder.body(Full::new(body)).unwrap_or_else(|e| {
        // Only an invalid header from a handler gets here.
        let mut r = Response::new(Full::new(Bytes::from(format!(
            "{{\"errorType\":\"NonRetryable\",\"errorMessage\":\"unexpected: invalid response: {e}\"}}"
        ))));
        *r.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
        r.headers_mut().insert(
            "x-fc-status",
            hyper::header::HeaderValue::from_static("404"),
        );
        r
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_path_decides_and_paths_are_the_fallback() {
        assert_eq!(kind_of("POST", "/invoke", None), Kind::Invoke);
        assert_eq!(kind_of("POST", "/initialize", None), Kind::Initialize);
        assert_eq!(kind_of("GET", "/invoke", None), Kind::Http);
        assert_eq!(kind_of("POST", "/backfill", None), Kind::Http);
        // An HTTP trigger request whose own path happens to be /invoke.
        assert_eq!(kind_of("POST", "/invoke", Some("/http-invoke")), Kind::Http);
        assert_eq!(kind_of("POST", "/", Some("/invoke")), Kind::Invoke);
    }

    #[test]
    fn credentials_need_an_id_and_a_secret() {
        let h = [
            ("x-fc-access-key-id", "STS.id"),
            ("x-fc-access-key-secret", "s3cr3t"),
            ("x-fc-security-token", "tok"),
        ];
        let get = |n: &str| h.iter().find(|(k, _)| *k == n).map(|(_, v)| *v);
        let c = credentials_of(&get).unwrap();
        assert_eq!(c.access_key_id, "STS.id");
        assert_eq!(c.access_key_secret.expose(), "s3cr3t");
        let none = |_: &str| None::<&str>;
        assert!(credentials_of(&none).is_none());
    }
}
