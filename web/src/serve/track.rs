//! The wrappers that keep a [`Conn`] up to date: [`Tracked`] around the socket counts bytes and
//! notes when a write must wait for the peer to read, [`Service`] around the application notes
//! when a request is being answered and when its body is awaited, and caps pipelining: after
//! [`Limits::max_pipelined`](super::Limits::max_pipelined) requests answered in a row while the
//! peer never waited for an answer (it sends requests without reading what comes back), the
//! answer carries `Connection: close` and the connection ends once it is written.

use super::conn::Conn;
use axum::Router;
use axum::http::{HeaderValue, Request, Response, header};
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tower::ServiceExt;

/// A socket whose traffic is recorded in its [`Conn`].
#[derive(Debug)]
pub struct Tracked<S> {
    inner: S,
    conn: Arc<Conn>,
}

impl<S> Tracked<S> {
    /// Wraps `inner`.
    pub fn new(inner: S, conn: Arc<Conn>) -> Tracked<S> {
        Tracked { inner, conn }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        match &r {
            Poll::Ready(Ok(())) => this.conn.read(buf.filled().len() - before),
            Poll::Pending => this.conn.read_pending(),
            Poll::Ready(Err(_)) => {}
        }
        r
    }
}

impl<S> Tracked<S> {
    fn note(&self, r: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        match &r {
            Poll::Ready(Ok(n)) => self.conn.wrote(Some(*n)),
            Poll::Pending => self.conn.wrote(None),
            Poll::Ready(Err(_)) => {}
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.note(r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.note(r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_flush(cx);
        this.note(r.map_ok(|()| 0)).map_ok(|_| ())
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// The application, serving one connection.
#[derive(Debug, Clone)]
pub struct Service {
    app: Router,
    conn: Arc<Conn>,
    max_pipelined: u32,
}

impl Service {
    /// `app` on the connection `conn`.
    pub fn new(app: Router, conn: Arc<Conn>, max_pipelined: u32) -> Service {
        Service {
            app,
            conn,
            max_pipelined,
        }
    }
}

type Answer = Result<Response<axum::body::Body>, Infallible>;

impl hyper::service::Service<Request<Incoming>> for Service {
    type Response = Response<axum::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Answer> + Send>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let conn = self.conn.clone();
        let close = conn.request_started() >= self.max_pipelined.max(1);
        let req = req.map(|inner| {
            axum::body::Body::new(Body {
                inner,
                conn: conn.clone(),
            })
        });
        let answer = self.app.clone().oneshot(req);
        Box::pin(async move {
            let mut resp = answer.await?;
            conn.answered();
            if close {
                resp.headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok(resp)
        })
    }
}

/// A request body whose waits are recorded in its [`Conn`].
#[derive(Debug)]
struct Body {
    inner: Incoming,
    conn: Arc<Conn>,
}

impl HttpBody for Body {
    type Data = <Incoming as HttpBody>::Data;
    type Error = <Incoming as HttpBody>::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_frame(cx);
        this.conn.body_waiting(r.is_pending());
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
