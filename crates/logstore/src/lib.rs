//! sluice's forensic archive, `logstore()`: what a destination's template made of each
//! message, kept compressed, encrypted, chained and sealed, and searchable without decrypting
//! what a search cannot match.
//!
//! An archive file is a sequence of frames ([`frame`]): a **segment** starts each run of the
//! writer over the file (its keys: [`segment`], [`keys`]), **chunks** hold records compressed
//! together and encrypted (index and data apart: [`chunk`], [`crypt`]), a **close** ends a
//! run. Every frame links to the one before by a SHA-256 chain and carries a forward-secure
//! seal, so a frame altered, removed, moved or added is found with its offset; a frame's CRC
//! lets a reader step over damage and keep reading what is intact.
//!
//! Writing: [`entry`] (the fields a reader thread hands over), [`writer::Store`]. Reading:
//! [`reader::Walk`].

pub mod authority;
pub mod chunk;
pub mod crypt;
pub mod entry;
pub mod frame;
pub mod keys;
pub mod reader;
pub mod segment;
pub mod timestamp;
pub mod wire;
pub mod writer;

pub use entry::{Entry, EntryWriter};
pub use keys::{DecryptionKey, Recipient, SealKey, VerifyKey};
pub use reader::{Item, Keys, Problem, Severity, Walk};
pub use writer::{Opened, Store, StoreOptions};

#[cfg(test)]
mod tests;
