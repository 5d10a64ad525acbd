//! [`InflateAhead`]: a helper thread that inflates a file's `compressed_packets` containers
//! ahead of the decoder, so that on a machine with a spare core inflating (about 40 % of a
//! scan's time) overlaps decoding instead of preceding it.
//!
//! The helper reads the same file through its own handle and framing, inflates every
//! container in file order, and hands the outputs over through a channel of at most
//! [`AHEAD`] containers. The decoder gives its spent buffers back, and the helper makes a new
//! one only when none has come back, so at most `AHEAD + 4` buffers exist (1 MiB each, more
//! only for a container that inflates to more).
//!
//! The decoder takes an output only if it is the one it is at: the containers are numbered
//! in file order and each output carries its container's compressed length and zlib
//! checksum. Anything else (the helper ended early, at an unreadable or cut packet, or the
//! file changed under it) makes the decoder inflate that container itself, and the rest of
//! the file, as it does without a helper: the records and their order never depend on the
//! helper.

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};
use std::thread::JoinHandle;

use super::error::InflateError;
use super::expand::compressed;
use super::framing::ChunkedPackets;
use super::inflate::Inflater;

/// Containers inflated and not yet taken, at most (each about 256 KiB inflated).
pub const AHEAD: usize = 2;

/// One container's output, and what identifies the container.
struct Inflated {
    /// The container's number in file order (0 for the first).
    ordinal: u64,
    /// The compressed stream's length and its last four bytes (the zlib checksum).
    zlen: usize,
    tail: [u8; 4],
    /// The buffer and the length of its inflated part, or why it could not be inflated.
    out: Result<(Vec<u8>, usize), InflateError>,
}

/// What identifies a container's compressed stream for [`Inflated`].
fn tail(z: &[u8]) -> [u8; 4] {
    let mut t = [0; 4];
    let n = z.len().min(4);
    t[4 - n..].copy_from_slice(&z[z.len() - n..]);
    t
}

/// The decoder's end of a helper inflating one file's containers.
pub struct InflateAhead {
    outputs: Option<Receiver<Inflated>>,
    spent: Sender<Vec<u8>>,
    /// Set when the decoder no longer wants outputs: the helper checks it between packets
    /// (it may read many plain packets between two sends).
    hung_up: Arc<AtomicBool>,
    helper: Option<JoinHandle<()>>,
    /// The number of the next container the decoder will meet.
    next: u64,
}

impl InflateAhead {
    /// Starts a helper on `path` (opened again, so the decoder's own reading is untouched).
    #[cfg(test)]
    pub fn spawn(path: &Path) -> std::io::Result<InflateAhead> {
        Self::spawn_at(path, 0, None)
    }

    /// Starts a helper on the packets of `path` from file offset `from` (a packet's start) up
    /// to `until` (a later packet's start; `None`: the end): the containers a reader seeking
    /// to a window decodes (`read::seek`), numbered from the first one at `from`.
    pub fn spawn_at(path: &Path, from: u64, until: Option<u64>) -> std::io::Result<InflateAhead> {
        let mut file = File::open(path)?;
        file.seek(SeekFrom::Start(from))?;
        let packets = ChunkedPackets::new_at(file, from);
        let until = until.unwrap_or(u64::MAX);
        let (out_tx, out_rx) = sync_channel(AHEAD);
        let (spent_tx, spent_rx) = channel();
        let hung_up = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&hung_up);
        let helper = std::thread::Builder::new()
            .name("ingero-inflate".into())
            .spawn(move || inflate_file(packets, until, &out_tx, &spent_rx, &stop))?;
        Ok(InflateAhead {
            outputs: Some(out_rx),
            spent: spent_tx,
            hung_up,
            helper: Some(helper),
            next: 0,
        })
    }

    /// The output for the next container of the file, whose compressed stream is `z`: its
    /// buffer and inflated length, or why it could not be inflated. `None` when the helper
    /// has no output for it (it ended, or is out of step with the decoder); the caller then
    /// inflates `z` itself, and this returns `None` from then on.
    pub fn take(&mut self, z: &[u8]) -> Option<Result<(Vec<u8>, usize), InflateError>> {
        let ordinal = self.next;
        self.next += 1;
        let got = self.outputs.as_ref()?.recv().ok();
        match got {
            Some(i) if i.ordinal == ordinal && i.zlen == z.len() && i.tail == tail(z) => {
                Some(i.out)
            }
            _ => {
                self.stop();
                None
            }
        }
    }

    /// Gives a spent buffer back to the helper for a later container.
    pub fn give_back(&self, buf: Vec<u8>) {
        // The helper may have ended: the buffer is then simply dropped.
        let _ = self.spent.send(buf);
    }

    /// Ends the helper: it sees the flag at its next packet, and dropping the receiver makes
    /// a send it is blocked in fail.
    fn stop(&mut self) {
        self.hung_up.store(true, Ordering::Relaxed);
        self.outputs = None;
        if let Some(h) = self.helper.take() {
            // A panic in the helper has nothing left to report: its outputs are not used.
            let _ = h.join();
        }
    }
}

impl Drop for InflateAhead {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The helper's loop: every container from where `packets` is in order, until the end of
/// the file or offset `until`, a packet it cannot frame, or the decoder hanging up.
fn inflate_file(
    mut packets: ChunkedPackets<File>,
    until: u64,
    outputs: &SyncSender<Inflated>,
    spent: &Receiver<Vec<u8>>,
    hung_up: &AtomicBool,
) {
    let mut inf = Inflater::default();
    let mut ordinal = 0u64;
    // An error (a packet too large, a read failure) is the decoder's to report when it
    // reaches that packet: the helper just stops.
    while packets.offset() < until {
        let Ok(Some(range)) = packets.next_range() else {
            return;
        };
        if hung_up.load(Ordering::Relaxed) {
            return;
        }
        let Some(z) = compressed(&packets.buf()[range]) else {
            continue;
        };
        // A spent buffer if the decoder gave one back, else one sized on first use.
        let spare = spent.try_recv().unwrap_or_default();
        let out = inf.inflate(z).map(|n| (inf.swap_buf(spare), n));
        let sent = outputs.send(Inflated {
            ordinal,
            zlen: z.len(),
            tail: tail(z),
            out,
        });
        if sent.is_err() {
            return;
        }
        ordinal += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::tests::{container, frame, tmp_dir};

    fn file_of(containers: &[Vec<u8>]) -> Vec<u8> {
        let mut file = Vec::new();
        for c in containers {
            frame(&mut file, c);
        }
        file
    }

    /// The zlib stream inside a container built by `container`.
    fn stream(c: &[u8]) -> &[u8] {
        compressed(c).expect("a container")
    }

    #[test]
    fn hands_over_each_container_in_order_and_reuses_buffers() {
        let dir = tmp_dir("ahead");
        let a = container(&[b"first".to_vec(), b"packet".to_vec()]);
        let b = container(&[b"second".to_vec()]);
        let path = dir.join("f.pftrace");
        std::fs::write(&path, file_of(&[a.clone(), b.clone()])).expect("write");
        let mut ahead = InflateAhead::spawn(&path).expect("spawn");
        let (buf, n) = ahead.take(stream(&a)).expect("output").expect("inflated");
        assert_eq!(&buf[..n], b"\x0a\x05first\x0a\x06packet");
        ahead.give_back(buf);
        let (buf, n) = ahead.take(stream(&b)).expect("output").expect("inflated");
        assert_eq!(&buf[..n], b"\x0a\x06second");
        // Past the last container the helper has ended.
        assert!(ahead.take(stream(&b)).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_helper_from_an_offset_numbers_its_containers_from_there_and_stops_at_the_end_given() {
        let dir = tmp_dir("ahead-at");
        let (a, b, c) = (
            container(&[b"first".to_vec()]),
            container(&[b"second".to_vec()]),
            container(&[b"third".to_vec()]),
        );
        let bytes = file_of(&[a.clone(), b.clone(), c.clone()]);
        let path = dir.join("f.pftrace");
        std::fs::write(&path, &bytes).expect("write");
        // `b` starts where the framed `a` ends; `c` where `b` does.
        let at_b = (bytes.len() - file_of(&[b.clone(), c.clone()]).len()) as u64;
        let at_c = (bytes.len() - file_of(std::slice::from_ref(&c)).len()) as u64;
        let mut ahead = InflateAhead::spawn_at(&path, at_b, Some(at_c)).expect("spawn");
        let (buf, n) = ahead.take(stream(&b)).expect("output").expect("inflated");
        assert_eq!(&buf[..n], b"\x0a\x06second");
        assert!(ahead.take(stream(&c)).is_none(), "nothing past `until`");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_container_out_of_step_stops_the_helper() {
        let dir = tmp_dir("ahead-out-of-step");
        let a = container(&[b"first".to_vec()]);
        let b = container(&[b"second".to_vec()]);
        let path = dir.join("f.pftrace");
        std::fs::write(&path, file_of(&[a.clone(), b.clone(), a.clone()])).expect("write");
        let mut ahead = InflateAhead::spawn(&path).expect("spawn");
        // The decoder says it is at `b` where the helper has `a`: no output, now or later.
        assert!(ahead.take(stream(&b)).is_none());
        assert!(ahead.take(stream(&b)).is_none());
        assert!(ahead.helper.is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_corrupt_container_comes_over_as_its_error() {
        let dir = tmp_dir("ahead-corrupt");
        let mut a = container(&[b"first packet here".to_vec()]);
        let mid = a.len() - 6;
        a[mid] ^= 0x55;
        let path = dir.join("f.pftrace");
        std::fs::write(&path, file_of(std::slice::from_ref(&a))).expect("write");
        let mut ahead = InflateAhead::spawn(&path).expect("spawn");
        let got = ahead.take(stream(&a)).expect("output");
        assert_eq!(got.map(|(_, n)| n), Err(InflateError::Corrupt));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_helper_told_to_stop_reads_no_further() {
        let dir = tmp_dir("ahead-hung-up");
        // Plain packets, then a container: the helper has nothing to send for a long while.
        let mut file = Vec::new();
        for _ in 0..100 {
            frame(&mut file, b"\x40\x01");
        }
        frame(&mut file, &container(&[b"late".to_vec()]));
        let path = dir.join("f.pftrace");
        std::fs::write(&path, &file).expect("write");
        let open = || ChunkedPackets::new(File::open(&path).expect("open"));
        let (tx, rx) = sync_channel(AHEAD);
        let (_spent_tx, spent_rx) = channel();
        inflate_file(open(), u64::MAX, &tx, &spent_rx, &AtomicBool::new(false));
        assert!(rx.try_recv().is_ok(), "the container is sent");
        inflate_file(open(), u64::MAX, &tx, &spent_rx, &AtomicBool::new(true));
        assert!(rx.try_recv().is_err(), "stopped before reaching it");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn dropping_it_ends_a_helper_blocked_on_a_full_channel() {
        let dir = tmp_dir("ahead-drop");
        let c = container(&[b"packet".to_vec()]);
        let path = dir.join("f.pftrace");
        std::fs::write(&path, file_of(&vec![c; 4 * AHEAD])).expect("write");
        let ahead = InflateAhead::spawn(&path).expect("spawn");
        // Returns only once the helper has: the test would hang otherwise.
        drop(ahead);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
