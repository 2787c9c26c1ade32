//! The `relp()` source: RELP as rsyslog's librelp speaks it, on a listener of
//! [`super::stream`] (plain TCP or TLS).
//!
//! A connection opens with `open` (the client's offers; sluice answers with its own: RELP
//! version 0, the `syslog` command), then sends `syslog` frames, each with a transaction
//! number, and ends with `close`. Each read's `syslog` frames become one batch, dispatched as
//! a stream source's are; its acknowledgement is taken with [`Window::take_acknowledged`], so
//! every destination holds it until the messages are written or in a reliable disk buffer,
//! and only then does the responder send `rsp 200 OK` for each of the batch's transaction
//! numbers, in order. A client therefore resends, after a crash of sluice, exactly what was
//! not yet stored; what was stored is never acknowledged before it was.
//!
//! When sluice stops, the reader sends `serverclose` once what it read is acknowledged.
//!
//! A peer cannot make a connection hold more than a bounded amount: a frame may announce at
//! most [`max_frame`] bytes (refused as soon as its length is read), the responses waiting to
//! be written are at most [`REPLY_BACKLOG`] (past that the reader stops reading until the
//! peer reads them), and a command sluice does not know, or a transaction number other than
//! the one after the last, closes the connection as librelp does.

use super::{bytes_read, Context, Read, ReaderSpec, Routed};
use crate::own_log as log;
use crate::window::Window;
use bytes::BytesMut;
use sluice_model::Origin;
use sluice_protocol::framing::Frame;
use sluice_protocol::relp::{self, Command};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

/// What the responder writes, in the order the reader saw the commands.
enum Reply {
    /// An `rsp` that is ready (to `open`, to an unknown command): its transaction number
    /// and data.
    Now(u32, Vec<u8>),
    /// `rsp 200 OK` for these transaction numbers once the batch is delivered.
    /// (The batch's credits come with the news, and go back at once.)
    Delivered(oneshot::Receiver<crate::window::Delivered>, Vec<u32>),
    /// The response to `close` (or `serverclose` when `None`); the connection then ends.
    Close(Option<u32>),
}

const READ_SIZE: usize = 64 << 10;

/// Responses the reader may queue ahead of the responder; then it waits for the peer to read.
/// One is a read's batch (up to 64 KiB of frames, some 6,000 transaction numbers at most), so
/// a connection holds at most about a megabyte of reads and two of responses for a peer
/// that does not read.
const REPLY_BACKLOG: usize = 16;

/// The longest frame data a connection reads: `log-msg-size()` (longer messages are cut to
/// it), but at least librelp's 128 KiB, as rsyslog may send up to its own limit.
fn max_frame(spec: &ReaderSpec) -> usize {
    spec.log_msg_size.max(128 << 10)
}

/// Serves one RELP connection until it closes, sluice stops, or it breaks the protocol.
pub async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    origin: Arc<Origin>,
    spec: &ReaderSpec,
    window: &Window,
    ctx: &Context,
    peer: &str,
) {
    let (input, output) = tokio::io::split(stream);
    let (replies, queue) = mpsc::channel(REPLY_BACKLOG);
    let reader = read(input, origin, spec, window, ctx, peer, replies);
    tokio::join!(reader, respond(output, queue, ctx, peer));
}

/// Reads frames and dispatches the messages; hands every response to the responder.
#[allow(clippy::too_many_arguments)]
async fn read<R: AsyncRead + Unpin>(
    mut input: R,
    origin: Arc<Origin>,
    spec: &ReaderSpec,
    window: &Window,
    ctx: &Context,
    peer: &str,
    replies: mpsc::Sender<Reply>,
) {
    let mut shutdown = ctx.shutdown.clone();
    let mut routed = Routed::new(origin);
    let mut buf = BytesMut::new();
    let mut opened = false;
    // The transaction number the next command must carry, once `open` set the first.
    let mut expected: Option<u32> = None;
    let max_data = max_frame(spec);
    // What an unfinished frame holds past two reads, from the memory budget.
    let mut unfinished = crate::memory::Unfinished::default();
    loop {
        if !unfinished.room(&mut buf, READ_SIZE, &mut shutdown).await {
            let _ = replies.send(Reply::Close(None)).await;
            return;
        }
        let n = tokio::select! {
            biased;
            _ = shutdown.wait_for(|stop| *stop) => None,
            read = input.read_buf(&mut buf) => Some(bytes_read(read, peer)),
        };
        let Some(n) = n else {
            let _ = replies.send(Reply::Close(None)).await;
            return;
        };
        let eof = n == 0;
        let mut frames = Vec::new();
        let mut txnrs = Vec::new();
        let mut at = 0;
        let mut close = None;
        let mut failed = None;
        // Responses ready now, sent after this read's frames are looked at.
        let mut now = Vec::new();
        while close.is_none() {
            let (frame, used) = match relp::parse_within(&buf[at..], max_data) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    failed = Some(e.to_string());
                    break;
                }
            };
            let data = at + frame.data.start..at + frame.data.end;
            if let Some(want) = expected.filter(|&want| frame.txnr != want) {
                // Repeated or out of order: taking it could store a message twice.
                failed = Some(format!(
                    "transaction number {} where {want} was due",
                    frame.txnr
                ));
                break;
            }
            expected = Some(relp::next_txnr(frame.txnr));
            match frame.command {
                Command::Open if opened => {
                    failed = Some("a second open on an open session".into());
                }
                Command::Open => match open_response(&buf[data]) {
                    Ok(offers) => {
                        opened = true;
                        now.push(Reply::Now(frame.txnr, offers));
                    }
                    Err(why) => {
                        now.push(Reply::Now(frame.txnr, format!("500 {why}").into()));
                        failed = Some(why);
                    }
                },
                _ if !opened => failed = Some("a command before open".into()),
                Command::Syslog => {
                    let mut range = data;
                    let oversized = range.len() > spec.log_msg_size;
                    if oversized {
                        range.end = range.start + spec.log_msg_size;
                    }
                    frames.push(Frame { range, oversized });
                    txnrs.push(frame.txnr);
                }
                Command::Close => close = Some(frame.txnr),
                Command::Rsp | Command::ServerClose | Command::Other(_) => {
                    now.push(Reply::Now(
                        frame.txnr,
                        b"500 command not supported".to_vec(),
                    ));
                    failed = Some(format!(
                        "the command {:?}, which a client does not send",
                        frame.command
                    ));
                }
            }
            if failed.is_some() {
                break;
            }
            at += used;
        }
        // The responses before the batch: `open`'s comes first. The queue is bounded, so a
        // peer that does not read them stops this reader.
        for reply in now {
            if replies.send(reply).await.is_err() {
                return;
            }
        }
        if !frames.is_empty() {
            let chunk = buf.split_to(at).freeze();
            let Some(read) = Read::new(chunk, frames, &mut routed, spec, ctx, peer) else {
                return;
            };
            let (delivered, on_delivery) = oneshot::channel();
            let n = read.frames() as u32;
            let Some(ack) = ctx.credits_acknowledged(window, n, peer, delivered).await else {
                return;
            };
            read.parse_route_and_commit(&ack);
            drop(ack);
            if replies
                .send(Reply::Delivered(on_delivery, txnrs))
                .await
                .is_err()
            {
                return;
            }
        } else {
            let _ = buf.split_to(at);
        }
        if let Some(why) = failed {
            spec.counted.framing_errors.fetch_add(1, Ordering::Relaxed);
            log::error(format!("closing RELP connection from {peer}: {why}"));
            return;
        }
        if close.is_some() {
            let _ = replies.send(Reply::Close(close)).await;
            return;
        }
        if eof {
            return;
        }
    }
}

/// Checks a client's `open` offers; returns the response: `200 OK` and sluice's offers.
fn open_response(offers: &[u8]) -> Result<Vec<u8>, String> {
    let version = relp::offer(offers, "relp_version").unwrap_or_default();
    if version
        .first()
        .is_none_or(|v| v.is_empty() || !v.iter().all(u8::is_ascii_digit))
    {
        return Err("error: no relp_version offered".into());
    }
    let commands = relp::offer(offers, "commands").unwrap_or_default();
    if !commands.contains(&&b"syslog"[..]) {
        return Err("required command not supported by client".into());
    }
    Ok(format!(
        "200 OK\nrelp_version=0\nrelp_software=sluice,{},https://github.com/sluice\ncommands=syslog",
        env!("CARGO_PKG_VERSION")
    )
    .into_bytes())
}

/// Writes the responses in order: each batch's `rsp 200 OK`s once it is delivered, all
/// that are ready in one write.
async fn respond<W: AsyncWrite + Unpin>(
    mut output: W,
    mut queue: mpsc::Receiver<Reply>,
    ctx: &Context,
    peer: &str,
) {
    let mut out = Vec::new();
    while let Some(reply) = queue.recv().await {
        let mut next = Some(reply);
        let mut end = false;
        // Everything that is ready goes out together.
        while let Some(reply) = next.take() {
            match reply {
                Reply::Now(txnr, data) => relp::write(&mut out, txnr, "rsp", &data),
                Reply::Delivered(mut delivered, txnrs) => {
                    let ready = match delivered.try_recv() {
                        Ok(_credits) => true,
                        Err(oneshot::error::TryRecvError::Empty) => false,
                        Err(oneshot::error::TryRecvError::Closed) => {
                            end = true;
                            break;
                        }
                    };
                    if !ready {
                        // Send what is ready before waiting for this batch.
                        if !out.is_empty() {
                            if output.write_all(&out).await.is_err() {
                                return;
                            }
                            out.clear();
                        }
                        let done = ctx.within_grace(delivered).await;
                        if done.is_none_or(|d| d.is_err()) {
                            // Not delivered while sluice stops: the client sends it again.
                            end = true;
                            break;
                        }
                    }
                    for txnr in txnrs {
                        relp::write(&mut out, txnr, "rsp", b"200 OK");
                    }
                }
                Reply::Close(Some(txnr)) => {
                    relp::write(&mut out, txnr, "rsp", b"");
                    end = true;
                }
                Reply::Close(None) => {
                    relp::write(&mut out, 0, "serverclose", b"");
                    end = true;
                }
            }
            if end {
                break;
            }
            next = queue.try_recv().ok();
        }
        if output.write_all(&out).await.is_err() {
            log::info(format!(
                "RELP connection from {peer}: responses could not be sent"
            ));
            return;
        }
        out.clear();
        if end {
            let _ = output.shutdown().await;
            return;
        }
    }
}
