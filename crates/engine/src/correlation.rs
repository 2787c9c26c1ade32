//! The clock of the parsers that keep state (a `db-parser()` whose rules correlate): once a
//! second the wall clock moves their clocks while no message does, and what the contexts
//! that ended make goes on in its log path from the parser that made it
//! ([`sluice_model::Router::resume`]).
//!
//! Messages made here hold credits of a window of their own, as a source's do: a flood of
//! ending contexts waits for the destinations instead of growing memory.

use crate::sources::Context;
use crate::window::Window;
use std::time::Duration;

/// Messages made by ending contexts that may be on their way to the destinations at once.
const WINDOW: u32 = 10_000;

/// Ticks the clocks of the running configuration's stateful parsers until sluice stops.
pub async fn run(ctx: Context) {
    let window = Window::new(WINDOW);
    let mut every = tokio::time::interval(Duration::from_secs(1));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut shutdown = ctx.shutdown.clone();
    loop {
        tokio::select! {
            _ = every.tick() => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        let dispatcher = ctx.dispatcher.get();
        if dispatcher.router.stateful().is_empty() {
            continue;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        let window = window.clone();
        // Ending many contexts formats many messages: off the readers' threads.
        let ticked = tokio::task::spawn_blocking(move || {
            let runtime = tokio::runtime::Handle::current();
            for stateful in dispatcher.router.stateful() {
                stateful.tick(Some(now), &mut |by, made| {
                    while !made.is_empty() {
                        let n = made.len().min(WINDOW as usize / 2);
                        let mut msgs: Vec<_> = made.drain(..n).collect();
                        let ack = runtime.block_on(window.take(n as u32));
                        dispatcher.resume(stateful, by, &mut msgs, &ack);
                    }
                });
            }
        });
        let _ = ticked.await;
    }
}
