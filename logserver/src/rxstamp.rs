//! Frames stamped with the kernel's receive time: the connection's read half reads with
//! [`p5_rxstamp::recv`], so each frame's `t_s` is when its packet arrived, not when the server
//! woke up to read it (on this machine's debug build 16 µs later than a client reads an ack,
//! which would put the offset estimate off by half the difference).

use crate::clock::RunClock;
use p5_rxstamp::{enable, recv};
use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, Interest, ReadBuf};
use tokio::net::tcp::OwnedReadHalf;

/// The read half of a client connection, reading with [`recv`]: after each read that returned
/// bytes, `receipt` holds when the newest packet among them arrived, on the run clock (the
/// kernel's stamp, else the time of the read). Frames take their `t_s` from it.
#[derive(Debug)]
pub struct StampedRead {
    half: OwnedReadHalf,
    clock: Arc<RunClock>,
    receipt: Arc<AtomicU64>,
}

impl StampedRead {
    /// Wraps `half`, asking the kernel for receive stamps; `receipt` is shared with the
    /// frame receiver.
    pub fn new(half: OwnedReadHalf, clock: Arc<RunClock>, receipt: Arc<AtomicU64>) -> Self {
        enable(half.as_ref().as_raw_fd());
        StampedRead {
            half,
            clock,
            receipt,
        }
    }
}

impl AsyncRead for StampedRead {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let stream = me.half.as_ref();
        loop {
            ready!(stream.poll_read_ready(cx))?;
            let fd = stream.as_raw_fd();
            let dst = buf.initialize_unfilled();
            match stream.try_io(Interest::READABLE, || recv(fd, dst)) {
                Ok((n, age)) => {
                    let now = me.clock.now_ns();
                    me.receipt
                        .store(now.saturating_sub(age.unwrap_or(0)), Ordering::Release);
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}
