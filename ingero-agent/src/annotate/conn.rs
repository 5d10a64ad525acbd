//! One client connection: read with an idle timeout, frame into lines
//! (resynchronising after an over-long one), detect the reply-mode hello,
//! process each line, and in reply mode answer each one.

use std::sync::Arc;

use ingero_annotate::{MAX_LINE_BYTES, is_reply_hello};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use super::framing::{Frame, LineFramer};
use super::process::LineProcessor;
use super::received::Peer;
use super::shared::Shared;

/// Bytes read per read call. Many lines fit; an idle connection's task
/// holds this buffer, so it is kept modest.
const READ_CHUNK: usize = 8 * 1024;

/// Serve one connection until EOF, error, idle timeout or shutdown (the
/// task is aborted).
pub(crate) async fn serve(mut stream: UnixStream, shared: Arc<Shared>, peer: Peer) {
    let idle = shared.idle_timeout;
    let mut processor = LineProcessor::new(shared, peer);
    // One byte of slack for a trailing '\r', which parse_line strips.
    let mut framer = LineFramer::new(MAX_LINE_BYTES + 1);
    let mut buf = vec![0u8; READ_CHUNK];
    let mut first = true;
    let mut reply_mode = false;
    let mut replies = String::new();
    loop {
        let n = match tokio::time::timeout(idle, stream.read(&mut buf)).await {
            Err(_) => {
                tracing::debug!(?peer, "closing idle annotation connection");
                return;
            }
            Ok(Err(e)) => {
                tracing::debug!(?peer, error = %e, "annotation connection read failed");
                return;
            }
            Ok(Ok(n)) => n,
        };
        if n == 0 {
            if let Some(tail) = framer.finish() {
                let outcome = if first && is_reply_hello(tail) {
                    None
                } else {
                    Some(processor.process(tail))
                };
                if let (true, Some(o)) = (reply_mode, outcome) {
                    // The writer may have shut down only its sending side.
                    let _ = stream.write_all(o.reply().as_bytes()).await;
                }
            }
            return;
        }
        framer.feed(&buf[..n], |frame| {
            let outcome = match frame {
                Frame::TooLong => processor.too_long(),
                Frame::Line(line) => {
                    if std::mem::take(&mut first) && is_reply_hello(line) {
                        reply_mode = true;
                        return;
                    }
                    processor.process(line)
                }
            };
            first = false;
            if reply_mode {
                replies.push_str(&outcome.reply());
            }
        });
        if !replies.is_empty() {
            // A tool that stops reading its answers only stalls itself; the
            // idle timeout bounds how long.
            match tokio::time::timeout(idle, stream.write_all(replies.as_bytes())).await {
                Ok(Ok(())) => replies.clear(),
                _ => return,
            }
        }
    }
}
