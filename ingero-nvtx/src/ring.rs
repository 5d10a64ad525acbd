//! The per-thread single-producer single-consumer byte ring: the application thread writes
//! whole records and publishes each with one release store of `head`; the sender thread copies
//! them out and frees the space with one release store of `tail`. Neither side ever waits.
//!
//! Records are contiguous: one that does not fit before the end of the buffer starts at
//! offset 0, and the bytes skipped are marked by a size of 0 (or are fewer than a header, which
//! the reader skips by the same rule). `head` and `tail` count bytes written and read since the
//! ring was created, so `head - tail` is the fill level.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::wire::HEADER_LEN;

/// Bytes of a ring.
pub const RING_BYTES: usize = 256 * 1024;
const MASK: usize = RING_BYTES - 1;
const _: () = assert!(RING_BYTES.is_power_of_two());

/// An index kept on its own cache line so the two sides do not share one.
#[repr(align(64))]
struct Padded(AtomicUsize);

/// One thread's ring.
pub struct Ring {
    buf: *mut u8,
    head: Padded,
    tail: Padded,
    /// The owning thread has exited: once drained, the sender frees the ring.
    pub closed: AtomicBool,
}

// SAFETY: the producer writes only bytes in [head, tail + RING_BYTES) and the consumer reads
// only bytes in [tail, head); each side publishes its index with Release and reads the other's
// with Acquire, so a byte is never accessed by both at once.
unsafe impl Send for Ring {}
// SAFETY: as above.
unsafe impl Sync for Ring {}

/// What a write did.
#[derive(Debug, PartialEq, Eq)]
pub enum Written {
    /// Published.
    Ok,
    /// Published, and the ring just passed half full: worth waking the sender.
    HalfFull,
    /// No room: nothing written.
    Full,
}

impl Ring {
    /// An empty ring (allocates `RING_BYTES`).
    pub fn new() -> Ring {
        let buf = Box::into_raw(vec![0u8; RING_BYTES].into_boxed_slice()).cast::<u8>();
        Ring {
            buf,
            head: Padded(AtomicUsize::new(0)),
            tail: Padded(AtomicUsize::new(0)),
            closed: AtomicBool::new(false),
        }
    }

    /// Producer: reserves `max` contiguous bytes, lets `fill` write a record of at most `max`
    /// bytes and return its size, and publishes it. Only the owning thread calls this.
    pub fn write(&self, max: usize, fill: impl FnOnce(&mut [u8]) -> usize) -> Written {
        let head = self.head.0.load(Ordering::Relaxed);
        let tail = self.tail.0.load(Ordering::Acquire);
        let used = head.wrapping_sub(tail);
        let pos = head & MASK;
        let to_end = RING_BYTES - pos;
        let (start, skip) = if to_end >= max { (pos, 0) } else { (0, to_end) };
        if max > RING_BYTES || used + skip + max > RING_BYTES {
            return Written::Full;
        }
        if skip >= 2 {
            // SAFETY: [pos, pos + 2) lies in the buffer and in the producer's free region
            // (used + skip <= RING_BYTES).
            unsafe { self.buf.add(pos).cast::<[u8; 2]>().write_unaligned([0, 0]) };
        }
        // SAFETY: [start, start + max) lies in the buffer (start + max <= RING_BYTES) and in
        // the free region the consumer does not read until `head` is published below.
        let slot = unsafe { std::slice::from_raw_parts_mut(self.buf.add(start), max) };
        let n = fill(slot).min(max);
        let new_head = head + skip + n;
        self.head.0.store(new_head, Ordering::Release);
        let half = RING_BYTES / 2;
        if used < half && new_head.wrapping_sub(tail) >= half {
            Written::HalfFull
        } else {
            Written::Ok
        }
    }

    /// Consumer: the published end, to drain up to.
    pub fn head(&self) -> usize {
        self.head.0.load(Ordering::Acquire)
    }

    /// Consumer: passes each record in [tail, upto) to `each`, then frees the space. `upto`
    /// comes from [`Ring::head`]. Returns the number of records.
    pub fn drain(&self, upto: usize, mut each: impl FnMut(&[u8])) -> usize {
        let mut tail = self.tail.0.load(Ordering::Relaxed);
        let mut n = 0;
        while upto.wrapping_sub(tail) > 0 && upto.wrapping_sub(tail) <= RING_BYTES {
            let pos = tail & MASK;
            let to_end = RING_BYTES - pos;
            if to_end < HEADER_LEN {
                tail += to_end;
                continue;
            }
            // SAFETY: [pos, pos + to_end) is in the buffer and, being before `upto`, was
            // published by the producer (the Acquire load of head in `Ring::head`).
            let rest = unsafe { std::slice::from_raw_parts(self.buf.add(pos), to_end) };
            let size = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
            if size == 0 {
                tail += to_end;
                continue;
            }
            let Some(rec) = rest
                .get(..size)
                .filter(|_| size >= HEADER_LEN && size <= upto.wrapping_sub(tail))
            else {
                // Cannot happen with this file's producer; drop the rest rather than loop.
                tail = upto;
                break;
            };
            each(rec);
            n += 1;
            tail += size;
        }
        self.tail.0.store(tail, Ordering::Release);
        n
    }

    /// Whether everything published has been drained.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.head() == self.tail.0.load(Ordering::Acquire)
    }
}

impl Default for Ring {
    fn default() -> Self {
        Ring::new()
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        let slice = std::ptr::slice_from_raw_parts_mut(self.buf, RING_BYTES);
        // SAFETY: `buf` came from Box::into_raw of a RING_BYTES boxed slice in `new` and is
        // freed only here, once.
        drop(unsafe { Box::from_raw(slice) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Record, encode, records};
    use std::sync::Arc;

    fn pop(i: u64) -> Vec<u8> {
        let mut v = Vec::new();
        encode(
            &Record::Pop {
                ts_ns: i,
                tid: 1,
                domain: i,
            },
            &mut v,
        );
        v
    }

    #[test]
    fn records_cross_the_wrap_in_order_and_a_full_ring_refuses() {
        let ring = Ring::new();
        let mut next_write = 0u64;
        let mut next_read = 0u64;
        // Odd sizes so records meet the end of the buffer at every offset.
        for round in 0..50 {
            for _ in 0..(1000 + round * 37) {
                let rec = {
                    let mut r = pop(next_write);
                    r.extend(std::iter::repeat_n(0, (next_write % 7) as usize));
                    let n = r.len() as u16;
                    r[..2].copy_from_slice(&n.to_le_bytes());
                    r
                };
                match ring.write(rec.len(), |buf| {
                    buf[..rec.len()].copy_from_slice(&rec);
                    rec.len()
                }) {
                    Written::Full => break,
                    _ => next_write += 1,
                }
            }
            ring.drain(ring.head(), |r| {
                assert_eq!(u16::from_le_bytes([r[0], r[1]]) as usize, r.len());
                let ts = u64::from_le_bytes(r[8..16].try_into().unwrap());
                assert_eq!(ts, next_read);
                next_read += 1;
            });
        }
        assert_eq!(next_read, next_write);
        assert!(ring.is_empty());
        // Fill it: the write that does not fit is refused and nothing is torn.
        let rec = pop(0);
        let mut accepted = 0;
        let mut half = 0;
        loop {
            match ring.write(rec.len(), |b| {
                b[..24].copy_from_slice(&rec);
                24
            }) {
                Written::Full => break,
                Written::HalfFull => half += 1,
                Written::Ok => {}
            }
            accepted += 1;
        }
        assert_eq!(half, 1);
        assert!(accepted >= RING_BYTES / 24 - 1);
        let mut seen = 0;
        ring.drain(ring.head(), |r| {
            assert!(records(r).all(|x| x.is_ok()));
            seen += 1;
        });
        assert_eq!(seen, accepted);
    }

    #[test]
    fn a_producer_and_a_consumer_thread_agree() {
        let ring = Arc::new(Ring::new());
        let total = 200_000u64;
        let producer = {
            let ring = Arc::clone(&ring);
            std::thread::spawn(move || {
                let mut i = 0;
                while i < total {
                    let rec = pop(i);
                    if ring.write(24, |b| {
                        b.copy_from_slice(&rec);
                        24
                    }) != Written::Full
                    {
                        i += 1;
                    }
                }
            })
        };
        let mut expect = 0u64;
        while expect < total {
            ring.drain(ring.head(), |r| {
                let Some(Ok(Record::Pop { domain, .. })) = records(r).next() else {
                    panic!()
                };
                assert_eq!(domain, expect);
                expect += 1;
            });
        }
        producer.join().unwrap();
    }
}
