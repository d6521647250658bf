//! A job's output ring: the last `cap` bytes of everything it wrote, each byte known by its
//! absolute offset since the job started, so that a reader that comes back asks for what came
//! after the last offset it saw and is told what it missed. Its memory is its capacity,
//! allocated as output arrives, never more whatever the job writes. Owns only the bytes.

/// The last `cap` bytes of a stream, by absolute offset.
#[derive(Debug)]
pub(super) struct Ring {
    buf: Vec<u8>,
    cap: usize,
    /// Where the next byte goes in `buf` once it is full (the oldest byte is there).
    head: usize,
    /// The offset after the last byte written: everything the stream ever carried.
    end: u64,
}

/// What [`Ring::read`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Slice {
    /// The offset of `bytes[0]`: past the one asked for when those bytes left the ring.
    pub from: u64,
    pub bytes: Vec<u8>,
}

impl Ring {
    /// A ring of `cap` bytes (at least one).
    pub fn new(cap: usize) -> Ring {
        Ring {
            buf: Vec::new(),
            cap: cap.max(1),
            head: 0,
            end: 0,
        }
    }

    /// The offset after the last byte written.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// The offset of the oldest byte held.
    pub fn start(&self) -> u64 {
        self.end - self.buf.len() as u64
    }

    /// How many bytes it holds (never more than its capacity).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Appends `bytes`, dropping the oldest ones past the capacity.
    pub fn push(&mut self, bytes: &[u8]) {
        self.end += bytes.len() as u64;
        // Only the last `cap` bytes of a long write can stay.
        let bytes = &bytes[bytes.len().saturating_sub(self.cap)..];
        let room = self.cap - self.buf.len();
        let (fill, rest) = bytes.split_at(room.min(bytes.len()));
        // Grown as output comes, doubling, but never past the capacity (a plain `extend`
        // could double a nearly full buffer to twice it).
        let want = self.buf.len() + fill.len();
        if want > self.buf.capacity() {
            let target = (self.buf.capacity() * 2).max(want).min(self.cap);
            self.buf.reserve_exact(target - self.buf.len());
        }
        self.buf.extend_from_slice(fill);
        let mut rest = rest;
        while !rest.is_empty() {
            let n = rest.len().min(self.cap - self.head);
            self.buf[self.head..self.head + n].copy_from_slice(&rest[..n]);
            self.head = (self.head + n) % self.cap;
            rest = &rest[n..];
        }
    }

    /// Up to `max` bytes from offset `since` (or from the oldest byte held, when `since` left
    /// the ring; nothing when it is at or past the end).
    pub fn read(&self, since: u64, max: usize) -> Slice {
        let from = since.clamp(self.start(), self.end);
        // Both within the ring's length, which is a usize.
        let skip = usize::try_from(from - self.start()).unwrap_or(usize::MAX);
        let take = (self.buf.len().saturating_sub(skip)).min(max);
        let mut bytes = Vec::with_capacity(take);
        // The oldest byte is at `head` once the ring is full, at 0 before.
        let oldest = if self.buf.len() == self.cap {
            self.head
        } else {
            0
        };
        let at = (oldest + skip) % self.cap.max(1);
        let first = take.min(self.buf.len() - at.min(self.buf.len()));
        bytes.extend_from_slice(&self.buf[at..at + first]);
        bytes.extend_from_slice(&self.buf[..take - first]);
        Slice { from, bytes }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_by_offset_and_says_what_left() {
        let mut r = Ring::new(8);
        r.push(b"hello");
        assert_eq!(r.read(0, 100).bytes, b"hello");
        assert_eq!(r.read(3, 1).bytes, b"l");
        r.push(b" world");
        assert_eq!(r.end(), 11);
        assert_eq!(r.len(), 8);
        let s = r.read(0, 100);
        assert_eq!((s.from, s.bytes.as_slice()), (3, &b"lo world"[..]));
        assert_eq!(r.read(5, 3).bytes, b" wo");
        assert_eq!(r.read(11, 3).bytes, b"");
        assert_eq!(r.read(99, 3).from, 11);
    }

    #[test]
    fn a_write_longer_than_the_ring_keeps_its_end() {
        let mut r = Ring::new(4);
        r.push(b"ab");
        r.push(b"0123456789");
        assert_eq!(r.end(), 12);
        let s = r.read(0, 100);
        assert_eq!((s.from, s.bytes.as_slice()), (8, &b"6789"[..]));
        for i in 0..100u8 {
            r.push(&[i, i]);
        }
        assert_eq!(r.buf.capacity(), 4, "never more than its capacity");
        let s = r.read(0, 100);
        assert_eq!(s.bytes, [98, 98, 99, 99]);
        assert_eq!(s.from, r.end() - 4);
    }
}
