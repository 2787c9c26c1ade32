//! The content of a segment frame: how its chunks are sealed, encrypted and compressed, and
//! how it follows what the file held before it.
//!
//! ```text
//! version u8 | segment id (16) | created i64 (µs) | cipher u8 | compression u8
//! | seal u8 [ | sealing key id (8) | index j u64 ]
//! | recipients: count, each: wrapping u8 | key id (32) | wrapped key (length, bytes)
//! | follows u8 | torn tail: offset u64 | length u64
//! ```

use crate::keys::{KeyId, SealId};
use crate::wire::{put_bytes, put_varint, Cursor, Malformed};

pub const VERSION: u8 = 1;
pub const CIPHER_NONE: u8 = 0;
pub const CIPHER_AES_256_GCM: u8 = 1;
pub const COMPRESSION_NONE: u8 = 0;
pub const COMPRESSION_ZSTD: u8 = 1;

/// How a segment follows what came before it in its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Follows {
    /// The file was new.
    Nothing = 0,
    /// The file's last frame, whose chain it continues.
    Frame = 1,
    /// Bytes that were no frame: the chain starts again.
    Damage = 2,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub id: [u8; 16],
    pub created: i64,
    pub cipher: u8,
    pub compression: u8,
    /// The sealing key and the index of `S(j)` this segment was sealed from.
    pub seal: Option<(SealId, u64)>,
    pub recipients: Vec<(u8, KeyId, Vec<u8>)>,
    pub follows: Follows,
    /// A tail cut short by a crash that the writer found when it opened the file: its offset
    /// and length (it stays where it was; readers skip it).
    pub torn: Option<(u64, u64)>,
}

impl Segment {
    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(VERSION);
        out.extend_from_slice(&self.id);
        out.extend_from_slice(&self.created.to_le_bytes());
        out.push(self.cipher);
        out.push(self.compression);
        match self.seal {
            None => out.push(0),
            Some((id, j)) => {
                out.push(1);
                out.extend_from_slice(&id);
                out.extend_from_slice(&j.to_le_bytes());
            }
        }
        put_varint(out, self.recipients.len() as u64);
        for (how, id, wrapped) in &self.recipients {
            out.push(*how);
            out.extend_from_slice(id);
            put_bytes(out, wrapped);
        }
        out.push(self.follows as u8);
        let (at, len) = self.torn.unwrap_or_default();
        out.extend_from_slice(&at.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
    }

    pub fn read(bytes: &[u8]) -> Result<Segment, Malformed> {
        let mut c = Cursor::new(bytes);
        let version = c.u8("segment version")?;
        if version != VERSION {
            return Err(Malformed {
                what: "segment version (a newer sluice wrote it?)",
                at: 0,
            });
        }
        let id = c.array("segment")?;
        let created = c.i64("segment")?;
        let cipher = c.u8("segment")?;
        let compression = c.u8("segment")?;
        if cipher > CIPHER_AES_256_GCM || compression > COMPRESSION_ZSTD {
            return Err(Malformed {
                what: "segment cipher or compression",
                at: c.at(),
            });
        }
        let seal = match c.u8("segment seal")? {
            0 => None,
            1 => Some((c.array("segment seal")?, c.u64("segment seal")?)),
            _ => {
                return Err(Malformed {
                    what: "segment seal",
                    at: c.at(),
                })
            }
        };
        let n = c.len("segment recipients")?;
        let mut recipients = Vec::with_capacity(n);
        for _ in 0..n {
            recipients.push((
                c.u8("segment recipient")?,
                c.array("segment recipient")?,
                c.bytes("segment recipient")?.to_vec(),
            ));
        }
        let follows = match c.u8("segment follows")? {
            0 => Follows::Nothing,
            1 => Follows::Frame,
            2 => Follows::Damage,
            _ => {
                return Err(Malformed {
                    what: "segment follows",
                    at: c.at(),
                })
            }
        };
        let torn = (c.u64("segment torn")?, c.u64("segment torn")?);
        Ok(Segment {
            id,
            created,
            cipher,
            compression,
            seal,
            recipients,
            follows,
            torn: (torn.1 > 0).then_some(torn),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_reads_back_and_a_cut_one_is_an_error() {
        let s = Segment {
            id: [7; 16],
            created: 1_700_000_000_000_000,
            cipher: CIPHER_AES_256_GCM,
            compression: COMPRESSION_ZSTD,
            seal: Some(([1; 8], 42)),
            recipients: vec![(1, [2; 32], vec![3; 256])],
            follows: Follows::Damage,
            torn: Some((100, 17)),
        };
        let mut out = Vec::new();
        s.write(&mut out);
        assert_eq!(Segment::read(&out), Ok(s));
        for cut in 0..out.len() {
            assert!(Segment::read(&out[..cut]).is_err());
        }
    }
}
