//! [`WriteError`]: why the writer could not write.

use std::io;
use std::path::{Path, PathBuf};

/// Why a recording could not be written (the recording stops there; what was written before
/// is readable).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// A file or directory operation failed: `action` is what was being done ("creating",
    /// "writing", "syncing", "deleting", "listing", …).
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// Handing a file to the invoking user (under sudo) failed.
    #[error("giving {} to uid {uid}: {source}", path.display())]
    Chown {
        /// The file or directory.
        path: PathBuf,
        /// The user it was to go to.
        uid: u32,
        /// What the system said.
        source: io::Error,
    },
    /// Neither `path` nor `dir` was given, and `HOME` is not set (nor run under sudo), so
    /// there is no `~/.ingero/traces/` to write to.
    #[error("HOME is not set; pass a directory or -o")]
    NoHome,
    /// [`RecorderConfig::compression_level`](super::RecorderConfig::compression_level) is out
    /// of range (0 to 12).
    #[error("compression level {0} is not 0..={max}", max = super::chunk::MAX_LEVEL)]
    CompressionLevel(u32),
    /// libdeflate could not compress a chunk.
    #[error("compressing a chunk of packets: {0:?}")]
    Compress(libdeflater::CompressionError),
    /// A packet was written while no file was open (after a failed rotation).
    #[error("no open trace file")]
    NoFile,
}

impl WriteError {
    /// A closure turning an I/O error of `action` on `path` into a [`WriteError::Io`].
    ///
    /// It borrows `path` and copies it only when called: `map_err` builds the closure on every
    /// write, flush and sync, and the ones that succeed need no copy.
    pub(crate) fn io<'a>(
        action: &'static str,
        path: &'a Path,
    ) -> impl FnOnce(io::Error) -> WriteError + 'a {
        move |source| Self::io_failed(action, path, source)
    }

    /// [`WriteError::io`]'s error, built cold and out of line: only a failed call gets here,
    /// and with the copy inlined into the file writes the compiler inlined the writer's hot
    /// path differently (callgrind: `Recorder::write` 0.4 % more instructions per call).
    #[cold]
    #[inline(never)]
    fn io_failed(action: &'static str, path: &Path, source: io::Error) -> WriteError {
        WriteError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// What the writer's fallible calls return.
pub type Result<T, E = WriteError> = std::result::Result<T, E>;
