//! The integers of the archive format: fixed little-endian fields, LEB128 varints, zigzag for
//! signed deltas, and [`Cursor`], which reads them from untrusted bytes with an error instead
//! of a panic.

use std::fmt;

/// Bytes that do not read as the format says: what was expected, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    pub what: &'static str,
    pub at: usize,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed {} at byte {}", self.what, self.at)
    }
}

impl std::error::Error for Malformed {}

pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub fn unzigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

/// Appends `bytes` after their length as a varint.
pub fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Reads fields off the front of untrusted bytes.
pub struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { bytes, at: 0 }
    }

    pub fn at(&self) -> usize {
        self.at
    }

    pub fn is_empty(&self) -> bool {
        self.at >= self.bytes.len()
    }

    pub fn rest(&self) -> &'a [u8] {
        &self.bytes[self.at..]
    }

    fn bad(&self, what: &'static str) -> Malformed {
        Malformed { what, at: self.at }
    }

    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], Malformed> {
        if self.bytes.len() - self.at < n {
            return Err(self.bad(what));
        }
        let s = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], Malformed> {
        Ok(self.take(N, what)?.try_into().expect("length taken"))
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8, Malformed> {
        Ok(self.take(1, what)?[0])
    }

    pub fn u16(&mut self, what: &'static str) -> Result<u16, Malformed> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    pub fn u32(&mut self, what: &'static str) -> Result<u32, Malformed> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub fn u64(&mut self, what: &'static str) -> Result<u64, Malformed> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    pub fn i64(&mut self, what: &'static str) -> Result<i64, Malformed> {
        Ok(i64::from_le_bytes(self.array(what)?))
    }

    pub fn varint(&mut self, what: &'static str) -> Result<u64, Malformed> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8(what)?;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                if shift == 63 && b > 1 {
                    return Err(self.bad(what));
                }
                return Ok(v);
            }
        }
        Err(self.bad(what))
    }

    /// A varint that must fit in `usize` and in what is left: a length.
    pub fn len(&mut self, what: &'static str) -> Result<usize, Malformed> {
        let v = self.varint(what)?;
        if v > (self.bytes.len() - self.at) as u64 {
            return Err(self.bad(what));
        }
        Ok(v as usize)
    }

    /// A varint that must fit in `usize` and be at most `most`: a length of bytes elsewhere.
    pub fn len_of(&mut self, most: usize, what: &'static str) -> Result<usize, Malformed> {
        let v = self.varint(what)?;
        if v > most as u64 {
            return Err(self.bad(what));
        }
        Ok(v as usize)
    }

    pub fn bytes(&mut self, what: &'static str) -> Result<&'a [u8], Malformed> {
        let n = self.len(what)?;
        self.take(n, what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_zigzag_round_trip_and_refuse_overlong() {
        let mut out = Vec::new();
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            out.clear();
            put_varint(&mut out, v);
            assert_eq!(Cursor::new(&out).varint("v"), Ok(v));
        }
        for v in [0, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert!(Cursor::new(&[0xff; 11]).varint("v").is_err());
        assert!(Cursor::new(&[0x80]).varint("v").is_err());
        assert!(Cursor::new(&[5, 1, 2]).bytes("b").is_err());
    }
}
