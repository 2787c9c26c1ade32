//! Flow control by credits, as syslog-ng's `log-iw-size()` window.
//!
//! Invariant: a reader holds one credit for every message it accepted that is not yet written
//! by every destination it was routed to. A reader takes credits before dispatching a batch
//! and waits when there are none, so it stops reading its socket (backpressure) instead of
//! growing memory. Credits come back through [`Ack`]: one per dispatched batch, cloned into
//! every destination queue that got part of the batch; when the last clone is dropped —
//! after the last write — the batch's credits return to the window. A batch whose sender
//! waits to be told of its delivery ([`Window::take_acknowledged`]) hands its credits to that
//! sender instead, as [`Delivered`]: a reader that keeps its place (a file, the journal) gives
//! them back once it kept the place, so it never reads more than a window past it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};

/// The credits of one reader (a connection, a datagram socket, stdin).
#[derive(Clone, Debug)]
pub struct Window {
    credits: Arc<Semaphore>,
    size: u32,
    flow: Flow,
    /// A source's reader: it also waits while the memory budget is spent
    /// ([`crate::memory`]). sluice's own messages and correlation's do not.
    budgeted: bool,
}

/// What the windows of one source show of flow control (gauges in the statistics): the
/// credits its readers hold, and how many of them wait for credits — paused, not reading —
/// since when.
#[derive(Clone, Debug, Default)]
pub struct Flow {
    /// Credits taken and not back: messages read and not yet delivered (`window_in_use`).
    pub in_use: Arc<AtomicU64>,
    /// Readers waiting for credits now (`paused_readers`).
    pub paused: Arc<AtomicU64>,
    /// When the source went from no reader waiting to some, in seconds since the epoch; 0
    /// while none waits (`paused_since`).
    pub paused_since: Arc<AtomicU64>,
}

impl Flow {
    fn pause(&self) {
        if self.paused.fetch_add(1, Ordering::Relaxed) == 0 {
            let now = crate::clock::unix_now().max(1);
            self.paused_since.store(now, Ordering::Relaxed);
        }
    }

    fn resume(&self) {
        if self.paused.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.paused_since.store(0, Ordering::Relaxed);
        }
    }
}

/// Counts a reader as paused while it waits for credits, even if the wait is cancelled.
struct Paused<'a>(&'a Flow);

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        self.0.resume();
    }
}

impl Window {
    pub fn new(size: u32) -> Window {
        Window {
            budgeted: false,
            ..Window::watched(size, Flow::default())
        }
    }

    /// A window whose credits and waits show in `flow` (its source's gauges).
    pub fn watched(size: u32, flow: Flow) -> Window {
        let size = size.max(1);
        Window {
            credits: Arc::new(Semaphore::new(size as usize)),
            size,
            flow,
            budgeted: true,
        }
    }

    pub fn size(&self) -> u32 {
        self.size
    }

    /// Waits for `n` credits and returns the acknowledgement that gives them back. A batch
    /// takes at most half the window, so that a busy reader has two batches in flight (one
    /// being written while the next is parsed); memory stays bounded by the window or two
    /// batches, whichever is larger.
    pub async fn take(&self, n: u32) -> Ack {
        self.take_with(n, None).await
    }

    /// As [`Window::take`], for a source that acknowledges to its sender (RELP): `delivered`
    /// is told when the last clone of the acknowledgement is dropped, and destinations hold
    /// it until the messages are written (or in a reliable disk buffer) whatever the path's
    /// flags say — as if the path had `flags(flow-control)`. The credits come back when the
    /// [`Delivered`] it is told with is dropped.
    pub async fn take_acknowledged(&self, n: u32, delivered: oneshot::Sender<Delivered>) -> Ack {
        self.take_with(n, Some(delivered)).await
    }

    async fn take_with(&self, n: u32, delivered: Option<oneshot::Sender<Delivered>>) -> Ack {
        let n = n.clamp(1, (self.size / 2).max(1));
        let budget = crate::memory::budget();
        if self.budgeted && budget.spent() {
            self.flow.pause();
            let _paused = Paused(&self.flow);
            crate::memory::room().await;
        }
        match self.credits.try_acquire_many(n) {
            Ok(permit) => permit.forget(),
            Err(_) => {
                self.flow.pause();
                let _paused = Paused(&self.flow);
                self.credits
                    .acquire_many(n)
                    .await
                    .expect("window semaphores are never closed")
                    .forget();
            }
        }
        self.flow.in_use.fetch_add(u64::from(n), Ordering::Relaxed);
        Ack {
            credits: Arc::new(Credits {
                window: self.credits.clone(),
                in_use: self.flow.in_use.clone(),
                n,
                delivered,
                failed: Default::default(),
                loan: Loan::default(),
            }),
        }
    }

    /// Waits until every credit has come back: everything this reader accepted is written.
    pub async fn drained(&self) {
        let all = self
            .credits
            .acquire_many(self.size)
            .await
            .expect("window semaphores are never closed");
        drop(all);
    }
}

#[derive(Debug)]
struct Credits {
    window: Arc<Semaphore>,
    /// The source's `window_in_use`, which the credits leave when they go back.
    in_use: Arc<AtomicU64>,
    n: u32,
    delivered: Option<oneshot::Sender<Delivered>>,
    /// A destination gave up part of the batch undelivered ([`Ack::fail`]): its sender is
    /// not told it was delivered.
    failed: std::sync::atomic::AtomicBool,
    /// The bytes the batch's read borrowed from its source's [`ReadBudget`].
    loan: Loan,
}

impl Drop for Credits {
    fn drop(&mut self) {
        let credits = Delivered {
            window: self.window.clone(),
            in_use: self.in_use.clone(),
            n: self.n,
        };
        if let Some(delivered) = self.delivered.take() {
            if !self.failed.load(std::sync::atomic::Ordering::SeqCst) {
                // A sender that is gone drops them at once.
                let _ = delivered.send(credits);
            }
        }
    }
}

/// What a sender waiting for delivery is told: the batch's credits, back to the window when
/// this is dropped.
#[derive(Debug)]
pub struct Delivered {
    window: Arc<Semaphore>,
    in_use: Arc<AtomicU64>,
    n: u32,
}

impl Drop for Delivered {
    fn drop(&mut self) {
        self.in_use.fetch_sub(u64::from(self.n), Ordering::Relaxed);
        self.window.add_permits(self.n as usize);
    }
}

/// Owed by whoever still has to write part of a batch; dropping the last clone returns the
/// batch's credits.
#[derive(Clone, Debug)]
pub struct Ack {
    credits: Arc<Credits>,
}

impl Ack {
    /// The sender is told when the batch is delivered ([`Window::take_acknowledged`]):
    /// destinations must hold this until then, as on a flow-controlled path.
    pub fn acknowledged(&self) -> bool {
        self.credits.delivered.is_some()
    }

    /// A destination gives up its part of the batch without delivering it (stopping with
    /// no server, a file that could not be written): the credits still go back, but a
    /// sender waiting to be told of delivery (RELP, a file source keeping its position) is
    /// not told.
    pub fn fail(&self) {
        self.credits
            .failed
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// The batch's read borrowed `loan`: it goes back with the credits.
    pub fn carry(&mut self, loan: Loan) {
        Arc::get_mut(&mut self.credits)
            .expect("a loan is carried before the acknowledgement is shared")
            .loan = loan;
    }
}

/// The bytes the readers of one source may hold in large reads on their way to the
/// destinations. A window counts messages, one per connection; this counts bytes across all
/// of a source's connections, so that a thousand busy connections do not each hold their
/// largest read (256 KiB, and its formatted copy) at once: without it, 1,000 connections
/// peaked at 800 MB. A reader waits for data with its smallest buffer, which it never
/// borrows, and borrows the rest of a large read only once data is there: a quiet
/// connection holds nothing of the budget.
#[derive(Clone, Debug)]
pub struct ReadBudget {
    bytes: Arc<Semaphore>,
}

impl ReadBudget {
    pub fn new(bytes: usize) -> ReadBudget {
        ReadBudget {
            bytes: Arc::new(Semaphore::new(bytes)),
        }
    }

    /// Waits until `n` bytes can be lent (in turn: the semaphore is fair).
    pub async fn lend(&self, n: usize) -> Loan {
        let n = u32::try_from(n).expect("a read is smaller than 4 GiB");
        let permit = self
            .bytes
            .clone()
            .acquire_many_owned(n)
            .await
            .expect("read budgets are never closed");
        crate::memory::budget().hold(u64::from(n));
        Loan(Some(permit))
    }
}

/// Bytes lent to one read by its source's [`ReadBudget`]; they go back when it is dropped.
/// They are drawn from the memory budget too ([`crate::memory`]) while lent.
#[derive(Debug, Default)]
pub struct Loan(Option<OwnedSemaphorePermit>);

impl Loan {
    /// Keeps `n` bytes of the loan and gives the rest back now.
    pub fn keep(&mut self, n: usize) {
        if let Some(permit) = &mut self.0 {
            if let Some(rest) = permit.num_permits().checked_sub(n) {
                if permit.split(rest).is_some() {
                    crate::memory::budget().release(rest as u64);
                }
            }
        }
    }
}

impl Drop for Loan {
    fn drop(&mut self) {
        if let Some(permit) = &self.0 {
            crate::memory::budget().release(permit.num_permits() as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn credits_return_when_the_last_ack_is_dropped() {
        let w = Window::new(10);
        let a = w.take(4).await;
        let b = a.clone();
        assert_eq!(w.credits.available_permits(), 6);
        drop(a);
        assert_eq!(w.credits.available_permits(), 6);
        drop(b);
        assert_eq!(w.credits.available_permits(), 10);
        let big = w.take(50).await; // clamped to half the window
        assert_eq!(w.credits.available_permits(), 5);
        let second = w.take(50).await;
        assert_eq!(w.credits.available_permits(), 0);
        drop((big, second));
        w.drained().await;
    }

    #[tokio::test]
    async fn a_sender_told_of_delivery_holds_the_credits_until_it_lets_go() {
        let w = Window::new(10);
        let (delivered, told) = oneshot::channel();
        let ack = w.take_acknowledged(4, delivered).await;
        drop(ack);
        assert_eq!(w.credits.available_permits(), 6, "back before it was kept");
        let credits = told.await.expect("delivered");
        assert_eq!(w.credits.available_permits(), 6);
        drop(credits);
        assert_eq!(w.credits.available_permits(), 10);

        // Undelivered, or with nobody to tell: back at once.
        let (delivered, told) = oneshot::channel();
        let ack = w.take_acknowledged(4, delivered).await;
        ack.fail();
        drop(ack);
        assert!(told.await.is_err());
        let (delivered, told) = oneshot::channel();
        drop(told);
        drop(w.take_acknowledged(4, delivered).await);
        assert_eq!(w.credits.available_permits(), 10);
    }

    #[tokio::test]
    async fn a_loan_returns_what_it_does_not_keep_and_the_rest_with_its_ack() {
        let budget = ReadBudget::new(100);
        let mut loan = budget.lend(60).await;
        assert_eq!(budget.bytes.available_permits(), 40);
        loan.keep(25);
        assert_eq!(budget.bytes.available_permits(), 75);
        let w = Window::new(10);
        let mut ack = w.take(1).await;
        ack.carry(loan);
        let copy = ack.clone();
        drop(ack);
        assert_eq!(budget.bytes.available_permits(), 75);
        drop(copy);
        assert_eq!(budget.bytes.available_permits(), 100);
        // A read waits while others hold the budget, and goes on when they give it back.
        let held = budget.lend(90).await;
        let waiting = tokio::spawn({
            let budget = budget.clone();
            async move { budget.lend(20).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(held);
        let _second = waiting.await.unwrap();
        assert_eq!(budget.bytes.available_permits(), 80);
    }
}
