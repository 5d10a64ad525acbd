//! The file-backed executable mappings of a process, from `/proc/<pid>/maps` text.

/// One executable mapping of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Mapping {
    pub(crate) start: u64,
    pub(crate) end: u64,
    /// Offset in the file of the mapping's first byte.
    pub(crate) offset: u64,
    /// The file's identity: device (major, minor) and inode, as the kernel prints them.
    pub(crate) file: FileId,
    /// The path as the process sees it (inside its mount namespace), " (deleted)" removed.
    pub(crate) path: String,
}

/// A file, by device and inode: the key of the symbol index cache (two containers' copies of
/// one library path are different files; one file mapped by many processes is indexed once).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct FileId {
    pub(crate) major: u32,
    pub(crate) minor: u32,
    pub(crate) inode: u64,
}

impl Mapping {
    pub(crate) fn contains(&self, addr: u64) -> bool {
        (self.start..self.end).contains(&addr)
    }

    /// The file offset of `addr`, which must lie in the mapping.
    pub(crate) fn file_offset(&self, addr: u64) -> u64 {
        (addr - self.start).saturating_add(self.offset)
    }
}

/// Parses every executable, file-backed line of a maps file; other lines (anonymous, heap,
/// stack, vdso, data) cannot hold a kernel's host function.
pub(crate) fn executable_mappings(maps: &str) -> Vec<Mapping> {
    maps.lines().filter_map(parse_line).collect()
}

/// `start-end perms offset major:minor inode   path`; the path may contain spaces.
fn parse_line(line: &str) -> Option<Mapping> {
    let mut fields = line.splitn(6, ' ');
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?;
    let offset = fields.next()?;
    let (major, minor) = fields.next()?.split_once(':')?;
    let inode: u64 = fields.next()?.parse().ok()?;
    let path = fields.next()?.trim_start();
    if perms.as_bytes().get(2) != Some(&b'x') || inode == 0 || !path.starts_with('/') {
        return None;
    }
    Some(Mapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        offset: u64::from_str_radix(offset, 16).ok()?,
        file: FileId {
            major: u32::from_str_radix(major, 16).ok()?,
            minor: u32::from_str_radix(minor, 16).ok()?,
            inode,
        },
        path: path.strip_suffix(" (deleted)").unwrap_or(path).to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
5581a0e00000-5581a0e01000 r--p 00000000 fd:01 1311 /opt/app/bin/train
5581a0e01000-5581a0e02000 r-xp 00001000 fd:01 1311 /opt/app/bin/train
5581a1f3c000-5581a1f5d000 rw-p 00000000 00:00 0                          [heap]
7f1c20000000-7f1c3a000000 r-xp 0280a000 103:02 998877                   /usr/lib/with space/libtorch_cuda.so
7f1c3b000000-7f1c3b001000 r-xp 00002000 00:1f 4242                       /tmp/gone.so (deleted)
7ffd5e7f2000-7ffd5e7f4000 r-xp 00000000 00:00 0                          [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
garbage line
";

    #[test]
    fn keeps_executable_file_mappings_only() {
        let maps = executable_mappings(MAPS);
        let paths: Vec<_> = maps.iter().map(|m| m.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/opt/app/bin/train",
                "/usr/lib/with space/libtorch_cuda.so",
                "/tmp/gone.so"
            ]
        );
        let torch = &maps[1];
        assert_eq!(torch.start, 0x7f1c_2000_0000);
        assert_eq!(torch.offset, 0x280_a000);
        assert_eq!(
            torch.file,
            FileId {
                major: 0x103,
                minor: 2,
                inode: 998_877
            }
        );
        assert!(torch.contains(0x7f1c_2000_0010));
        assert!(!torch.contains(0x7f1c_3a00_0000));
        assert_eq!(torch.file_offset(0x7f1c_2000_0010), 0x280_a010);
    }
}
