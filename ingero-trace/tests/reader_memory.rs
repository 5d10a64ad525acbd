//! The reader's memory does not follow what a damaged or hostile file claims: measured peak
//! heap while reading stays under [`FIXED`] plus [`PER_BYTE`] per byte of the file, however
//! large a length field, an interning id, a sequence id or a track uuid says it is.
//!
//! - [`FIXED`] (12 MiB) is what the reader holds for any file: its 1 MiB read buffer, and
//!   with the helper thread the helper's read buffer and at most `AHEAD + 4` = 6 inflate
//!   buffers of 1 MiB in circulation, the decoder's own among them (`read/ahead.rs`): 8 MiB,
//!   and 4 MiB of room for the decoder's tables and for a damaged container that inflates to
//!   more than 1 MiB before it fails. (Measured: 1.1 MiB for plain packets, 7 to 8 MiB for
//!   the writer's compressed recordings, whose containers inflate to at most two of its
//!   256 KiB chunks.)
//! - [`PER_BYTE`] (128) covers what a file can make the decoder keep in proportion to its
//!   size: sequences, tracks, interned names and strings, open slices, launch
//!   configurations, each declared by a few bytes of the file and costing one entry, not the
//!   table slots up to its id (a packet naming sequence 1048575 or interning iid 1048575
//!   costs one entry). Measured on files of nothing but such packets: about 70 bytes of heap
//!   per byte of file for new sequences (7-byte packets, a sequence's state is about 250
//!   bytes in a vector that doubles), 50 for new thread tracks, less for the others.
//! - A packet's length is trusted only as far as the file's bytes back it: a header claiming
//!   4 GiB, or 64 MiB (just under the reader's `MAX_PACKET`), in a file of a few bytes
//!   allocates a read buffer no bigger than the bytes that follow it.
//!
//! Not covered: a `compressed_packets` container may inflate to `MAX_PACKET` (64 MiB), about
//! 1032 times its size at most (deflate's limit); such a zlib bomb costs memory in proportion
//! to the bytes that make it, and random damage does not make one.
//!
//! Measured with a counting `#[global_allocator]` (current and peak bytes of every thread,
//! the helper's included, as the system allocator was asked for them); a test binary of its
//! own, since the allocator sees the whole process, whose tests run one at a time (a lock
//! each holds throughout) so that each measures only itself.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use common::{WATCHDOG, framed, mutation, noise, within, workload, write_recording};
use ingero_trace::model::ReadRecord;
use ingero_trace::proto::varint;
use ingero_trace::read::{ExpandedPackets, TimeRange, TraceReader, empty_record};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;

/// Heap the reader may hold whatever the file (see the module docs).
const FIXED: usize = 12 << 20;
/// Heap the reader may hold per byte of the file (see the module docs).
const PER_BYTE: usize = 128;

/// Counts the bytes allocated and not yet freed, and their peak, on top of the system
/// allocator.
struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = CURRENT.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

fn shrank(by: usize) {
    CURRENT.fetch_sub(by, Ordering::Relaxed);
}

// SAFETY: every method hands its arguments unchanged to `System`, which upholds
// `GlobalAlloc`'s contract; the counting only reads sizes and touches atomics (it never
// allocates, so it cannot recurse into the allocator).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's `layout` goes to `System` as received.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller guarantees `ptr` came from this allocator (so from `System`)
        // with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `ptr` came from `System` with `layout` and that
        // `new_size` is valid for it.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // While it moves, both blocks exist: count the new one before the old one goes.
            grew(new_size);
            shrank(layout.size());
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The counters are the whole process's: every test of this binary holds this for its whole
/// run (generating its inputs included), so that it measures nothing of another's.
static ONE_TEST: Mutex<()> = Mutex::new(());

fn one_test_at_a_time() -> MutexGuard<'static, ()> {
    // A test that failed while holding the lock leaves it poisoned: the counters are still
    // good.
    ONE_TEST.lock().unwrap_or_else(|e| e.into_inner())
}

/// Peak heap, above what was held before, while `f` runs (the caller holds
/// [`one_test_at_a_time`]).
fn peak_during(f: impl FnOnce()) -> usize {
    let before = CURRENT.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    f();
    PEAK.load(Ordering::Relaxed).saturating_sub(before)
}

/// The bound for a file of `len` bytes.
fn bound(len: usize) -> usize {
    FIXED + PER_BYTE * len
}

/// Reads `bytes` as a file to the end (or its error) with and without the helper thread,
/// records dropped as they come (with one reused record, as a scan does): the peak heap of
/// the reading alone, the file's bytes and path excluded.
fn peak_reading(bytes: &[u8]) -> usize {
    let file = common::TmpFile::new("memory", bytes);
    let mut worst = 0;
    for ahead in [false, true] {
        let path = file.0.clone();
        let peak = peak_during(|| {
            within(WATCHDOG, move || {
                let mut reader =
                    TraceReader::from_files(vec![path], TimeRange::all()).inflate_ahead(ahead);
                let mut rec: ReadRecord = empty_record();
                // An error ends the reading like the end of the file: only memory counts here.
                while let Ok(true) = reader.next_into(&mut rec) {}
            })
        });
        worst = worst.max(peak);
    }
    worst
}

fn assert_bounded(what: &str, bytes: &[u8]) {
    let peak = peak_reading(bytes);
    assert!(
        peak <= bound(bytes.len()),
        "{what}: {peak} bytes of heap reading {} bytes (bound {})",
        bytes.len(),
        bound(bytes.len())
    );
}

/// A file of a valid packet, then a packet header claiming `claim` bytes followed by a few.
fn lying_file(tag: u8, claim: u64) -> Vec<u8> {
    let mut file = Vec::new();
    framed(&mut file, &[0x40, 0x01]);
    file.push(tag);
    varint::put(&mut file, claim);
    file.extend_from_slice(b"only these");
    file
}

#[test]
fn a_length_field_claiming_gigabytes_allocates_no_more_than_the_bytes_behind_it() {
    let _one = one_test_at_a_time();
    for claim in [
        4 << 30,
        u64::MAX,
        (64 << 20) - 1,
        63 << 20,
        16 << 20,
        (2 << 20) + 1,
    ] {
        // A packet, and another length-delimited top-level field the reader skips.
        for tag in [0x0A, 0x12] {
            let file = lying_file(tag, claim);
            let peak = peak_reading(&file);
            assert!(
                peak <= FIXED,
                "a {tag:#x} header claiming {claim} bytes: {peak} bytes of heap"
            );
        }
    }
    // What proptest found first: a 5-byte file claiming 64 MiB - 1 made the reader and the
    // helper allocate 64 MiB each.
    let peak = peak_reading(&[0x0A, 0xFF, 0xFF, 0xFF, 0x1F]);
    assert!(peak <= FIXED, "{peak} bytes of heap");
}

#[test]
fn the_packet_by_packet_readers_trust_a_length_no_further_than_its_bytes() {
    let _one = one_test_at_a_time();
    for claim in [(64 << 20) - 1, 16 << 20] {
        let file = lying_file(0x0A, claim);
        let peak = peak_during(|| {
            let mut packets = ExpandedPackets::new(&file[..]);
            let mut out = Vec::new();
            while let Ok(true) = packets.next_into(&mut out) {}
            assert!(packets.truncated(), "the claimed packet is cut short");
        });
        assert!(
            peak < 1 << 20,
            "a header claiming {claim} bytes: {peak} bytes of heap"
        );
    }
}

/// `fields` (already encoded) as one framed packet.
fn packet(fields: &[u8]) -> Vec<u8> {
    let mut file = Vec::new();
    framed(&mut file, fields);
    file
}

/// A varint field `num` = `v`.
fn varint_field(out: &mut Vec<u8>, num: u64, v: u64) {
    varint::put(out, num << 3);
    varint::put(out, v);
}

/// A length-delimited field `num` holding `inner`.
fn bytes_field(out: &mut Vec<u8>, num: u64, inner: &[u8]) {
    varint::put(out, num << 3 | 2);
    varint::put(out, inner.len() as u64);
    out.extend_from_slice(inner);
}

#[test]
fn a_huge_id_costs_one_entry_not_a_table_up_to_it() {
    let _one = one_test_at_a_time();
    let big = (1u64 << 20) - 1;
    // `TracePacket.trusted_packet_sequence_id` (10) with interned data (12) holding an event
    // name (2), a debug annotation name (3) and a string value (29), each {iid: big, name}.
    let mut name = Vec::new();
    varint_field(&mut name, 1, big);
    bytes_field(&mut name, 2, b"cudaMalloc");
    let mut interned = Vec::new();
    for num in [2, 3, 29] {
        bytes_field(&mut interned, num, &name);
    }
    let mut file = Vec::new();
    for seq in [big, big - 1, 1 << 19, 77] {
        let mut p = Vec::new();
        varint_field(&mut p, 10, seq);
        varint_field(&mut p, 13, 1); // SEQ_INCREMENTAL_STATE_CLEARED
        bytes_field(&mut p, 12, &interned);
        file.extend(packet(&p));
    }
    // `TracePacket.track_descriptor` (60) with uuid (1) = big, for a thread (4).
    for uuid in [big, big - 2, 1 << 19] {
        let mut thread = Vec::new();
        varint_field(&mut thread, 1, 5);
        varint_field(&mut thread, 2, 6);
        let mut desc = Vec::new();
        varint_field(&mut desc, 1, uuid);
        bytes_field(&mut desc, 4, &thread);
        let mut p = Vec::new();
        bytes_field(&mut p, 60, &desc);
        file.extend(packet(&p));
    }
    assert_bounded("huge ids", &file);
    // What proptest found: a 6-byte packet naming sequence 2^20 - 1 made the decoder allocate
    // 2^20 sequence states (195 MB).
    assert_bounded("a huge sequence id", &[0x0A, 0x04, 0x50, 0xFF, 0xFF, 0x3F]);
}

#[test]
fn a_packet_bigger_than_the_read_buffer_reads_whole_in_a_buffer_its_size() {
    let _one = one_test_at_a_time();
    // A packet of 5 MiB (an unknown field the decoder skips), then a small one: the read
    // buffer grows to hold it, doubling as the bytes arrive.
    let mut big = Vec::new();
    varint::put(&mut big, 1000 << 3 | 2);
    varint::put(&mut big, 5 << 20);
    big.resize(big.len() + (5 << 20), 0x5A);
    let mut file = Vec::new();
    framed(&mut file, &big);
    framed(&mut file, &[0x40, 0x01]);
    let tmp = common::TmpFile::new("big-packet", &file);
    for ahead in [false, true] {
        let path = tmp.0.clone();
        let mut packets = 0;
        let peak = peak_during(|| {
            let mut reader =
                TraceReader::from_files(vec![path], TimeRange::all()).inflate_ahead(ahead);
            let mut rec = empty_record();
            while reader.next_into(&mut rec).expect("a whole file") {}
            assert!(reader.truncated_files().is_empty());
            packets = reader.packets();
        });
        assert_eq!(packets, 2, "ahead {ahead}");
        // The reader's buffer, and the helper's, each at most twice the packet.
        assert!(
            peak <= FIXED + 4 * file.len(),
            "ahead {ahead}: {peak} bytes of heap for a {} byte packet",
            big.len()
        );
    }
}

/// Runs `test` on `cases` inputs from `strategy`, holding [`one_test_at_a_time`] throughout.
fn check<S: Strategy>(cases: u32, strategy: S, test: impl Fn(S::Value)) {
    let _one = one_test_at_a_time();
    let result = TestRunner::new(common::config(cases)).run(&strategy, |v| {
        test(v);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn packet_shaped_noise_reads_in_bounded_memory() {
    check(96, noise(), |bytes| assert_bounded("noise", &bytes));
}

#[test]
fn a_damaged_recording_reads_in_bounded_memory() {
    let strategy = (workload(), prop::collection::vec(mutation(), 1..3));
    check(96, strategy, |(w, mutations)| {
        let mut file = write_recording(&w);
        for m in &mutations {
            m.apply(&mut file);
        }
        assert_bounded("damaged recording", &file);
    });
}

/// Writes the fields of the `i`-th packet of a generated file into the buffer.
type Packet = fn(&mut Vec<u8>, u64);

/// A thread track descriptor for `uuid` (tid `tid`).
fn thread_track(p: &mut Vec<u8>, uuid: u64, tid: u64) {
    let mut thread = Vec::new();
    varint_field(&mut thread, 1, 5);
    varint_field(&mut thread, 2, tid);
    let mut desc = Vec::new();
    varint_field(&mut desc, 1, uuid);
    bytes_field(&mut desc, 4, &thread);
    bytes_field(p, 60, &desc);
}

#[test]
fn the_heap_grows_with_the_file_only_by_what_its_packets_declare() {
    let _one = one_test_at_a_time();
    // Files of nothing but the smallest packets that each make the decoder keep something:
    // where [`PER_BYTE`] comes from.
    let kinds: [(&str, Packet); 4] = [
        ("a new thread track", |p, i| thread_track(p, i, i)),
        ("a new interned name", |p, i| {
            let mut name = Vec::new();
            varint_field(&mut name, 1, i);
            bytes_field(&mut name, 2, b"x");
            let mut interned = Vec::new();
            bytes_field(&mut interned, 2, &name);
            varint_field(p, 10, 1);
            bytes_field(p, 12, &interned);
        }),
        ("a new sequence", |p, i| {
            varint_field(p, 10, i);
            varint_field(p, 13, 1);
        }),
        ("a slice begun and never ended", |p, i| {
            if i == 1 {
                return thread_track(p, 1, 6);
            }
            let mut event = Vec::new();
            varint_field(&mut event, 9, 1);
            varint_field(&mut event, 11, 1);
            bytes_field(&mut event, 23, b"n");
            varint_field(p, 8, i);
            bytes_field(p, 11, &event);
        }),
    ];
    for (what, make) in kinds {
        let mut file = Vec::new();
        for i in 1..10_000 {
            let mut p = Vec::new();
            make(&mut p, i);
            framed(&mut file, &p);
        }
        assert_bounded(what, &file);
    }
}
