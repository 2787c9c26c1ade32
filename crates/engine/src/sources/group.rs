//! Sources that are several datagram sockets read side by side, each by a reader of its own
//! ([`DatagramSource`]):
//!
//! - `udp-balancer()`, syslog-ng PE's UDP load balancer: `listeners()` UDP sockets bound to
//!   one address with `SO_REUSEPORT`, so that one port is read on every core. The kernel would
//!   pick a socket by a hash of the sender's address, which leaves one busy sender on one
//!   socket; a classic BPF program attached to the group ([`spread_evenly`]) picks one at
//!   random instead, so every listener carries a share.
//! - `system()`: the host's own log — its syslog socket and the kernel's log — each part
//!   where the host has it; a part that cannot be opened (a container without `/dev/kmsg`)
//!   is said once and left out.

use super::datagram::{spread_evenly, Bound, DatagramSource};
use super::{Context, ReaderSpec, Retire};
use crate::own_log as log;
use std::future::Future;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::watch;

/// How the sockets of a group are bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grouping {
    /// `udp-balancer()`: all to one address, spread evenly; every one must bind.
    Balanced,
    /// `system()`: each part where the host has it.
    System,
}

#[derive(Debug)]
pub struct DatagramGroup {
    pub sockets: Vec<Arc<DatagramSource>>,
    pub grouping: Grouping,
}

impl super::Source for DatagramGroup {
    fn source_name(&self) -> &Arc<str> {
        &self.sockets[0].source_name
    }

    fn place(&self) -> super::Place {
        match self.grouping {
            Grouping::Balanced => super::Place {
                kind: "udp-balancer",
                address: self.sockets[0].bind.to_string(),
            },
            Grouping::System => super::Place {
                kind: "system",
                address: "system()".to_string(),
            },
        }
    }

    fn bind(self: Arc<Self>, held: Option<super::Held>) -> std::io::Result<Box<dyn super::Ready>> {
        let listeners = match self.grouping {
            Grouping::Balanced => self.balanced(held)?,
            Grouping::System => self.system(held),
        };
        Ok(Box::new(Ready { listeners }))
    }

    fn reader(&self) -> Option<&ReaderSpec> {
        Some(&self.sockets[0].reader)
    }

    fn unix_path(&self) -> Option<&std::path::Path> {
        self.sockets.iter().find_map(|s| s.unix_path())
    }

    fn descriptors(&self) -> usize {
        self.sockets.len() * super::datagram::DESCRIPTORS
    }
}

type Listeners = Vec<(Arc<DatagramSource>, Bound)>;

impl DatagramGroup {
    /// Binds every listener, then spreads the group's datagrams over them; at a reload with
    /// as many listeners, takes over the sockets of the retiring balancer instead (what the
    /// kernel queued for them is read here).
    fn balanced(&self, held: Option<super::Held>) -> std::io::Result<Listeners> {
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
                    .map(|s| s.bind_socket())
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
        Ok(self.sockets.iter().cloned().zip(bound).collect())
    }

    /// Opens each part, or takes over the retiring `system()`'s descriptor for it at a
    /// reload; a part that cannot be opened is said and left out.
    fn system(&self, held: Option<super::Held>) -> Listeners {
        let mut held: Vec<OwnedFd> = held.map(|h| h.sockets).unwrap_or_default();
        let mut listeners = Vec::new();
        for part in &self.sockets {
            let taken = held
                .iter()
                .position(|fd| part.holds(fd))
                .map(|i| held.swap_remove(i));
            let opened = match taken {
                Some(fd) => part.adopt(fd),
                None => part.bind_socket(),
            };
            match opened {
                Ok(bound) => listeners.push((part.clone(), bound)),
                Err(e) => log::warning(format!(
                    "source {}: system() reads without {}: {e}",
                    part.source_name, part.bind
                )),
            }
        }
        listeners
    }
}

struct Ready {
    listeners: Listeners,
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
