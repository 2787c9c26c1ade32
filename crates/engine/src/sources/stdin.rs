//! `stdin()`: reads the process's standard input; at end of input, waits until everything it
//! read is written and then asks sluice to stop, as syslog-ng does.

use super::{read_stream, Context, ReaderSpec};
use crate::dns::{self, NameOptions};
use crate::window::Window;
use sluice_model::values::name_id;
use sluice_model::Origin;
use sluice_protocol::Text;
use std::sync::Arc;
use tokio::sync::mpsc;

#[derive(Clone, Debug)]
pub struct StdinSource {
    pub reader: ReaderSpec,
    pub names: NameOptions,
    pub source_name: Arc<str>,
    pub source_id: u16,
}

impl StdinSource {
    /// Reads to the end; then sends on `done` once all of it is written.
    pub async fn serve(self: Arc<Self>, ctx: Context, done: mpsc::Sender<()>) {
        let origin = Arc::new(Origin {
            source_name: self.source_name.clone(),
            source_id: self.source_id,
            peer: None,
            host_from: dns::local_name(self.names.use_fqdn),
            local: true,
            // syslog-ng's `stdin()` is a file source named `-`.
            pairs: vec![(name_id("FILE_NAME"), Text::Static(b"-"))],
            endpoints: Default::default(),
        });
        let window = Window::new(self.reader.window);
        read_stream(
            tokio::io::stdin(),
            origin,
            &self.reader,
            &window,
            &ctx,
            "stdin",
        )
        .await;
        ctx.drained(&window).await;
        if !*ctx.shutdown.borrow() {
            let _ = done.send(()).await;
        }
    }
}
