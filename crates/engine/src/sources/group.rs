//! `udp-balancer()`: syslog-ng PE's UDP load balancer. `listeners()` UDP sockets bound to one
//! address with `SO_REUSEPORT`, each read by a reader of its own ([`DatagramSource`]), so that
//! one port is read on every core. The kernel would pick a socket by a hash of the sender's
//! address, which leaves one busy sender on one socket; a classic BPF program attached to the
//! group ([`spread_evenly`]) picks one at random instead, so every listener carries a share.

use super::datagram::{spread_evenly, Bound, DatagramSource};
use super::{Context, ReaderSpec, Retire};
use std::future::Future;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::watch;

#[derive(Debug)]
pub struct BalancerSource {
    /// One per listener, all bound to the same address.
    pub sockets: Vec<Arc<DatagramSource>>,
}

impl super::Source for BalancerSource {
    fn source_name(&self) -> &Arc<str> {
        &self.sockets[0].source_name
    }

    fn place(&self) -> super::Place {
        super::Place {
            kind: "udp-balancer",
            address: self.sockets[0].bind.to_string(),
        }
    }

    /// Binds every listener, then spreads the group's datagrams over them; at a reload with
    /// as many listeners, takes over the sockets of the retiring balancer instead (what the
    /// kernel queued for them is read here).
    fn prepare(
        self: Arc<Self>,
        held: Option<super::Held>,
    ) -> std::io::Result<Box<dyn super::Ready>> {
        let bound: Vec<Bound> = match held {
            Some(held) if held.sockets.len() == self.sockets.len() => self
                .sockets
                .iter()
                .zip(held.sockets)
                .map(|(s, fd)| s.adopt(fd))
                .collect::<std::io::Result<_>>()?,
            _ => {
                let bound = self
                    .sockets
                    .iter()
                    .map(|s| s.bind())
                    .collect::<std::io::Result<Vec<_>>>()?;
                spread_evenly(&bound[0], bound.len() as u32).map_err(|e| {
                    std::io::Error::new(
                        e.kind(),
                        format!("spreading datagrams over the listeners (SO_ATTACH_REUSEPORT_CBPF): {e}"),
                    )
                })?;
                bound
            }
        };
        Ok(Box::new(Ready {
            listeners: self.sockets.iter().cloned().zip(bound).collect(),
        }))
    }

    fn reader(&self) -> Option<&ReaderSpec> {
        Some(&self.sockets[0].reader)
    }

    fn descriptors(&self) -> usize {
        self.sockets.len()
    }
}

struct Ready {
    listeners: Vec<(Arc<DatagramSource>, Bound)>,
}

impl super::Ready for Ready {
    fn hand_over(&self) -> Vec<OwnedFd> {
        self.listeners
            .iter()
            .flat_map(|(_, bound)| {
                std::os::fd::AsFd::as_fd(bound)
                    .try_clone_to_owned()
                    .into_iter()
            })
            .collect()
    }

    /// Reads every listener until retired; each reader on a task of its own.
    fn run(
        self: Box<Self>,
        ctx: Context,
        retire: watch::Receiver<Retire>,
    ) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            let readers: Vec<_> = self
                .listeners
                .into_iter()
                .map(|(source, bound)| {
                    tokio::spawn(source.serve(bound, ctx.clone(), retire.clone()))
                })
                .collect();
            for r in readers {
                let _ = r.await;
            }
        })
    }
}
