//! One-shot faults a test arms on the emulator, to prove recovery from failures at each step.
//!
//! A fault names where it strikes ([`FaultPoint`]) and what happens ([`FaultAction`]); the first
//! armed fault matching a request is used up by it. Dropping the connection closes the TCP
//! connection without an answer, so the client sees the request fail and cannot tell whether
//! it took effect, exactly like a crash or a network cut.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// Where a fault strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultPoint {
    /// Creating an upload session.
    CreateUpload,
    /// Writing an upload block (`Some(n)`: only block `n`).
    WriteBlock(Option<u32>),
    /// Committing an upload session.
    CommitUpload,
    /// Creating an upsert session.
    CreateUpsert,
    /// Writing an upsert bucket block.
    WriteUpsert,
    /// Committing an upsert session.
    CommitUpsert,
    /// Submitting an SQL job.
    SubmitSql,
}

/// What a fault does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultAction {
    /// Close the connection without applying the request.
    DropConnection,
    /// Apply the request, then close the connection without answering.
    DropConnectionAfterApply,
    /// Answer `status` with error `code` without applying the request.
    Fail {
        /// HTTP status.
        status: u16,
        /// Error code.
        code: String,
    },
    /// Apply the request, then answer `status` with error `code`.
    FailAfterApply {
        /// HTTP status.
        status: u16,
        /// Error code.
        code: String,
    },
}

/// An armed fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// Where.
    pub point: FaultPoint,
    /// What.
    pub action: FaultAction,
}

impl FaultPoint {
    pub(crate) fn matches(self, other: FaultPoint) -> bool {
        match (self, other) {
            (FaultPoint::WriteBlock(None), FaultPoint::WriteBlock(_)) => true,
            (a, b) => a == b,
        }
    }
}

/// The per-connection switch a handler flips to drop its connection.
#[derive(Clone, Debug, Default)]
pub(crate) struct ConnectionKill(pub Arc<AtomicBool>);

impl ConnectionKill {
    pub fn kill(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A TCP listener whose connections can be dropped from inside a handler.
pub(crate) struct KillableListener(pub TcpListener);

/// A TCP stream that fails every write and reads EOF once its switch is flipped.
pub(crate) struct KillableStream {
    inner: TcpStream,
    kill: ConnectionKill,
}

impl Listener for KillableListener {
    type Io = KillableStream;
    type Addr = ConnectionKill;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.0.accept().await {
                Ok((inner, _)) => {
                    let kill = ConnectionKill::default();
                    return (
                        KillableStream {
                            inner,
                            kill: kill.clone(),
                        },
                        kill,
                    );
                }
                Err(e) => {
                    tracing::warn!(error = %e, "maxcompute emulator accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(ConnectionKill::default())
    }
}

impl Connected<IncomingStream<'_, KillableListener>> for ConnectionKill {
    fn connect_info(stream: IncomingStream<'_, KillableListener>) -> Self {
        stream.remote_addr().clone()
    }
}

impl KillableStream {
    fn killed(&self) -> bool {
        self.kill.0.load(Ordering::SeqCst)
    }
}

impl AsyncRead for KillableStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.killed() {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for KillableStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.killed() {
            return Poll::Ready(Err(io::Error::from(io::ErrorKind::ConnectionReset)));
        }
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.killed() {
            return Poll::Ready(Err(io::Error::from(io::ErrorKind::ConnectionReset)));
        }
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
