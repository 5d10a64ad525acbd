//! A process's rank and run id, from the environment its launcher gave it.
//!
//! Distributed launchers tell each process who it is through environment variables, and a
//! process's initial environment stays readable in `/proc/<pid>/environ` (what it was at
//! `exec`; later `setenv` calls do not show, which is what we want: the launcher's values).
//! Several launchers can be stacked (torchrun inside a Slurm allocation), so the most specific
//! one wins: torchrun's per-process `RANK` over Open MPI's, MPICH/PMI's, and last Slurm's task
//! id (under torchrun, `SLURM_PROCID` numbers the node's launcher, not the process).

use ingero_trace::vocab::ProcessLabel;
use std::io::Read;
use std::path::Path;

/// At most this much of an environment is read: a real one is a few KiB, and a process
/// cannot make the agent read an unbounded file.
pub const ENVIRON_MAX_BYTES: usize = 256 * 1024;

/// Label keys the agent writes (the vocabulary's [`ProcessLabel`]s).
pub const RANK: &str = ProcessLabel::Rank.text();
pub const LOCAL_RANK: &str = ProcessLabel::LocalRank.text();
pub const WORLD_SIZE: &str = ProcessLabel::WorldSize.text();
pub const RUN_ID: &str = ProcessLabel::RunId.text();

/// Each label and the variables that carry it, most specific launcher first.
const SOURCES: [(&str, &[&str]); 4] = [
    (
        RANK,
        &["RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"],
    ),
    (
        LOCAL_RANK,
        &["LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"],
    ),
    (
        WORLD_SIZE,
        &[
            "WORLD_SIZE",
            "OMPI_COMM_WORLD_SIZE",
            "PMI_SIZE",
            "SLURM_NTASKS",
        ],
    ),
    (RUN_ID, &["TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"]),
];

/// Values torchelastic uses for "no run id given", which name no run.
const NO_RUN_ID: [&str; 2] = ["", "none"];

/// An annotation value's limit (the wire contract's).
const MAX_VALUE_BYTES: usize = 256;

/// The labels found in an environment (`NUL`-separated `KEY=VALUE` entries), in
/// [`SOURCES`] order; empty when the process was not started by a launcher. Numbers must be
/// decimal integers and a run id a valid label value, else the next source is tried.
pub fn parse(environ: &[u8]) -> Vec<(String, String)> {
    let mut found: [Option<(usize, &str)>; SOURCES.len()] = [None; SOURCES.len()];
    for entry in environ.split(|b| *b == 0) {
        let Some(eq) = entry.iter().position(|b| *b == b'=') else {
            continue;
        };
        let (name, value) = (&entry[..eq], &entry[eq + 1..]);
        for (i, (label, vars)) in SOURCES.iter().enumerate() {
            let Some(rank) = vars.iter().position(|v| v.as_bytes() == name) else {
                continue;
            };
            if found[i].is_some_and(|(r, _)| r < rank) {
                continue;
            }
            let Ok(value) = std::str::from_utf8(value) else {
                continue;
            };
            if valid(label, value) {
                found[i] = Some((rank, value));
            }
        }
    }
    SOURCES
        .iter()
        .zip(found)
        .filter_map(|((label, _), v)| v.map(|(_, v)| ((*label).to_owned(), v.to_owned())))
        .collect()
}

fn valid(label: &str, value: &str) -> bool {
    if label == RUN_ID {
        !NO_RUN_ID.contains(&value)
            && value.len() <= MAX_VALUE_BYTES
            && !value.chars().any(char::is_control)
    } else {
        value.parse::<u32>().is_ok()
    }
}

/// Reads at most [`ENVIRON_MAX_BYTES`] of `<proc_root>/<pid>/environ`; the flag says the
/// environment was longer (its tail is not looked at).
pub fn read(proc_root: &Path, pid: u32) -> std::io::Result<(Vec<u8>, bool)> {
    let file = std::fs::File::open(proc_root.join(pid.to_string()).join("environ"))?;
    let mut bytes = Vec::new();
    // One byte more than kept tells a full read from a cut one.
    file.take(ENVIRON_MAX_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    let cut = bytes.len() > ENVIRON_MAX_BYTES;
    bytes.truncate(ENVIRON_MAX_BYTES);
    Ok((bytes, cut))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        for v in vars {
            out.extend_from_slice(v.as_bytes());
            out.push(0);
        }
        out
    }

    fn labels(vars: &[&str]) -> Vec<(String, String)> {
        parse(&env(vars))
    }

    fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn torchrun_variables_give_every_label() {
        let got = labels(&[
            "PATH=/usr/bin",
            "TORCHELASTIC_RUN_ID=job-7",
            "WORLD_SIZE=8",
            "LOCAL_RANK=3",
            "RANK=11",
        ]);
        assert_eq!(
            got,
            kv(&[
                ("rank", "11"),
                ("local_rank", "3"),
                ("world_size", "8"),
                ("run_id", "job-7")
            ])
        );
    }

    #[test]
    fn each_launcher_is_understood() {
        assert_eq!(
            labels(&[
                "SLURM_PROCID=5",
                "SLURM_LOCALID=1",
                "SLURM_NTASKS=16",
                "SLURM_JOB_ID=991"
            ]),
            kv(&[
                ("rank", "5"),
                ("local_rank", "1"),
                ("world_size", "16"),
                ("run_id", "991")
            ])
        );
        assert_eq!(
            labels(&[
                "OMPI_COMM_WORLD_RANK=2",
                "OMPI_COMM_WORLD_LOCAL_RANK=0",
                "OMPI_COMM_WORLD_SIZE=4"
            ]),
            kv(&[("rank", "2"), ("local_rank", "0"), ("world_size", "4")])
        );
        assert_eq!(
            labels(&["PMI_RANK=6", "PMI_SIZE=7"]),
            kv(&[("rank", "6"), ("world_size", "7")])
        );
    }

    #[test]
    fn the_most_specific_launcher_wins_whatever_the_order() {
        // torchrun inside a Slurm step: SLURM_PROCID numbers the node's launcher.
        let vars = [
            "SLURM_PROCID=1",
            "SLURM_JOB_ID=44",
            "RANK=9",
            "TORCHELASTIC_RUN_ID=none",
            "PMI_RANK=1",
        ];
        let want = kv(&[("rank", "9"), ("run_id", "44")]);
        assert_eq!(labels(&vars), want);
        let mut reversed = vars;
        reversed.reverse();
        assert_eq!(labels(&reversed), want);
    }

    #[test]
    fn malformed_values_and_entries_are_skipped() {
        assert!(labels(&[]).is_empty());
        assert!(labels(&["PATH=/bin", "HOME=/root"]).is_empty());
        assert_eq!(
            labels(&[
                "RANK=three",
                "SLURM_PROCID=4",
                "=x",
                "RANK",
                "WORLD_SIZE=-1"
            ]),
            kv(&[("rank", "4")])
        );
        let long = format!("TORCHELASTIC_RUN_ID={}", "x".repeat(300));
        assert!(labels(&[&long, "TORCHELASTIC_RUN_ID=a\tb"]).is_empty());
        // Not UTF-8, and a value with an '=' in it.
        let mut bytes = env(&["SLURM_JOB_ID=a=b"]);
        bytes.extend_from_slice(b"RANK=\xff\0");
        assert_eq!(parse(&bytes), kv(&[("run_id", "a=b")]));
        // Names are matched whole, not as prefixes.
        assert!(labels(&["RANKS=1", "MY_RANK=2", "LOCAL_RANK_X=3"]).is_empty());
    }

    #[test]
    fn reading_is_bounded_and_says_when_it_cut() {
        let dir = std::env::temp_dir().join(format!("ingero-environ-{}", std::process::id()));
        let pid_dir = dir.join("77");
        std::fs::create_dir_all(&pid_dir).expect("mkdir");
        std::fs::write(pid_dir.join("environ"), env(&["RANK=1"])).expect("write");
        let (bytes, cut) = read(&dir, 77).expect("read");
        assert_eq!((parse(&bytes), cut), (kv(&[("rank", "1")]), false));
        let mut big = env(&["RANK=2"]);
        big.resize(ENVIRON_MAX_BYTES + 10, b'x');
        std::fs::write(pid_dir.join("environ"), &big).expect("write");
        let (bytes, cut) = read(&dir, 77).expect("read");
        assert_eq!((bytes.len(), cut), (ENVIRON_MAX_BYTES, true));
        assert_eq!(parse(&bytes), kv(&[("rank", "2")]));
        assert!(read(&dir, 78).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn our_own_environment_is_readable() {
        let (bytes, _) = read(Path::new("/proc"), std::process::id()).expect("own environ");
        assert!(!bytes.is_empty());
    }
}
