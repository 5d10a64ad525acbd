//! Ranks against a fake `/proc`: read once per pid incarnation, again after an exec that
//! changed the environment, forgotten at exit, failures counted, the cache bounded.

use std::path::{Path, PathBuf};

use ingero_trace::model::{Comm, Event, ProcessEvent, ProcessOp, Task};

use super::*;

/// A fake `/proc` under the temporary directory, removed on drop.
struct FakeProc(PathBuf);

impl FakeProc {
    fn new(name: &str) -> FakeProc {
        let dir = std::env::temp_dir().join(format!("ingero-ranks-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        FakeProc(dir)
    }

    /// A process with a start time and environment variables.
    fn process(&self, pid: u32, start_time: u64, vars: &[&str]) {
        let dir = self.0.join(pid.to_string());
        std::fs::create_dir_all(&dir).expect("mkdir");
        let mut stat = format!("{pid} (py thon) S");
        for field in 4..22 {
            stat.push_str(&format!(" {field}"));
        }
        stat.push_str(&format!(" {start_time} 0 0\n"));
        std::fs::write(dir.join("stat"), stat).expect("stat");
        let mut env = Vec::new();
        for v in vars {
            env.extend_from_slice(v.as_bytes());
            env.push(0);
        }
        std::fs::write(dir.join("environ"), env).expect("environ");
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for FakeProc {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn event(pid: u32, ts_ns: u64, op: ProcessOp) -> Event {
    Event::Process(ProcessEvent {
        ts_ns,
        task: Task {
            pid,
            tid: pid,
            comm: Comm::from_str_lossy("python"),
            cgroup_id: 1,
            cpu: 0,
        },
        op,
        other_pid: 0,
        clone_flags_known: true,
        text: String::new(),
    })
}

fn labels(a: &AnnotationRecord) -> Vec<(&str, &str)> {
    a.labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

#[test]
fn the_first_event_of_a_ranked_process_makes_one_scoped_agent_annotation() {
    let proc = FakeProc::new("first");
    proc.process(
        10,
        555,
        &["RANK=1", "WORLD_SIZE=2", "TORCHELASTIC_RUN_ID=r"],
    );
    let mut ranks = Ranks::new(proc.path().to_path_buf());
    let a = ranks
        .observe(&event(10, 1_000, ProcessOp::ThreadStart))
        .expect("annotation");
    assert_eq!(
        labels(&a),
        [("rank", "1"), ("world_size", "2"), ("run_id", "r")]
    );
    assert_eq!(
        a.scope,
        Some(Scope {
            pid: 10,
            start_time: 555
        })
    );
    assert_eq!((a.ts_ns, a.end_ns), (1_000, None));
    assert_eq!(a.provenance_pid, Some(std::process::id()));
    assert!(a.stamped_by_agent);
    assert!(a.realtime_ns > a.ts_ns, "realtime is unix time");
    // Later events of the same process cost a lookup and make nothing.
    for ts in [2_000, 3_000] {
        assert!(ranks.observe(&event(10, ts, ProcessOp::Fork)).is_none());
    }
    assert_eq!(ranks.stats.labelled, 1);
}

#[test]
fn processes_without_launcher_variables_are_remembered_silently() {
    let proc = FakeProc::new("plain");
    proc.process(11, 1, &["PATH=/bin"]);
    let mut ranks = Ranks::new(proc.path().to_path_buf());
    assert!(ranks.observe(&event(11, 5, ProcessOp::Fork)).is_none());
    assert_eq!(ranks.len(), 1);
    assert_eq!(ranks.stats, RankStats::default());
}

#[test]
fn exec_rereads_and_exit_forgets() {
    let proc = FakeProc::new("exec");
    proc.process(12, 7, &["SLURM_PROCID=0"]);
    let mut ranks = Ranks::new(proc.path().to_path_buf());
    assert!(ranks.observe(&event(12, 1, ProcessOp::Fork)).is_some());
    // An exec with the same environment: nothing new.
    assert!(ranks.observe(&event(12, 2, ProcessOp::Exec)).is_none());
    // An exec that brought another rank.
    proc.process(12, 7, &["SLURM_PROCID=0", "RANK=4"]);
    let a = ranks
        .observe(&event(12, 3, ProcessOp::Exec))
        .expect("changed");
    assert_eq!(labels(&a), [("rank", "4")]);
    assert!(ranks.observe(&event(12, 4, ProcessOp::Exit)).is_none());
    // A record of the exited process read after its exit (from the other ring) reads
    // nothing again.
    assert!(
        ranks
            .observe(&event(12, 5, ProcessOp::ThreadExit))
            .is_none()
    );
    assert_eq!(ranks.len(), 1);
    ranks.forget(12);
    assert!(ranks.is_empty());
    // The pid reused by another process is read afresh.
    proc.process(12, 99, &["RANK=4"]);
    let a = ranks
        .observe(&event(12, 6, ProcessOp::Fork))
        .expect("new incarnation");
    assert_eq!(a.scope.map(|s| s.start_time), Some(99));
}

#[test]
fn unreadable_processes_are_counted_once_and_the_cache_is_bounded() {
    let proc = FakeProc::new("gone");
    let mut ranks = Ranks::new(proc.path().to_path_buf());
    for ts in 0..3 {
        assert!(ranks.observe(&event(13, ts, ProcessOp::Fork)).is_none());
    }
    assert_eq!(ranks.stats.unreadable, 1, "a failed pid is not retried");
    for pid in 0..MAX_PROCESSES as u32 {
        ranks
            .seen
            .insert(1_000_000 + pid, Seen { labels: Vec::new() });
    }
    proc.process(14, 1, &["RANK=0"]);
    assert!(ranks.observe(&event(14, 1, ProcessOp::Fork)).is_none());
    assert_eq!(ranks.stats.cache_full, 1);
    assert!(ranks.len() <= MAX_PROCESSES + 1);
}
