//! CUDA graphs as the probes see them: a stream capture counts the kernel launches made on its
//! stream, the capture's end names the graph, an instantiation names the executable graph, and a
//! graph launch is then told how many kernel nodes its capture recorded and on which stream
//! (so `explain` can tell a replay from eager launches).
//!
//! Every map is bounded: past [`MAX_ENTRIES`] the oldest graph is forgotten (counted), so a
//! program that builds graphs forever costs a fixed amount of memory.

use ingero_trace::model::{Captured, CudaArgs, CudaCall};

use crate::bounded::Bounded;

/// Most captures, graphs or executable graphs remembered (each).
pub const MAX_ENTRIES: usize = 16_384;

/// Captures in progress, captured graphs and executable graphs, per process.
#[derive(Default)]
pub struct Graphs {
    /// Kernel launches counted per capturing (pid, stream).
    capturing: Bounded<u32, MAX_ENTRIES>,
    graphs: Bounded<Captured, MAX_ENTRIES>,
    execs: Bounded<Captured, MAX_ENTRIES>,
    /// Entries forgotten because a map was full.
    pub evicted: u64,
}

impl Graphs {
    /// Follows `c` and completes its arguments (a capture's node count, a launch's capture).
    pub fn follow(&mut self, c: &mut CudaCall) {
        let pid = c.task.pid;
        // Runtime calls enter the driver: only the outermost call counts.
        if c.detail.parent.is_some() {
            return;
        }
        match &mut c.args {
            CudaArgs::CaptureBegin { stream, .. } if c.ret == 0 => {
                self.evicted += u64::from(self.capturing.insert((pid, *stream), 0));
            }
            CudaArgs::Launch { stream, .. } => {
                if let Some(n) = self.capturing.get_mut(&(pid, *stream)) {
                    *n = n.saturating_add(1);
                }
            }
            CudaArgs::CaptureEnd {
                stream,
                graph,
                kernel_nodes,
            } => {
                let nodes = self.capturing.remove(&(pid, *stream));
                *kernel_nodes = nodes;
                if let (Some(g), Some(n)) = (*graph, nodes) {
                    let captured = Captured {
                        kernel_nodes: n,
                        stream: *stream,
                    };
                    self.evicted += u64::from(self.graphs.insert((pid, g), captured));
                }
            }
            CudaArgs::GraphInstantiate {
                graph,
                graph_exec: Some(exec),
            } => {
                if let Some(captured) = self.graphs.get(&(pid, *graph)).copied() {
                    self.evicted += u64::from(self.execs.insert((pid, *exec), captured));
                }
            }
            CudaArgs::GraphLaunch {
                graph_exec,
                captured,
                ..
            } => *captured = self.execs.get(&(pid, *graph_exec)).copied(),
            _ => {}
        }
    }

    /// Forgets a process that exited.
    pub fn forget_process(&mut self, pid: u32) {
        self.capturing.retain_pid(pid);
        self.graphs.retain_pid(pid);
        self.execs.retain_pid(pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ingero_ebpf::CudaOp;

    fn call(op: CudaOp, args: CudaArgs) -> CudaCall {
        CudaCall {
            ts_ns: 1,
            duration_ns: 1,
            task: ingero_trace::synth::task(7, 7, "t"),
            op,
            ret: 0,
            args,
            detail: Default::default(),
        }
    }

    fn launch(stream: u64) -> CudaCall {
        call(
            CudaOp::LaunchKernel,
            CudaArgs::Launch {
                func: 1,
                grid: [1; 3],
                block: [1; 3],
                shared_mem: 0,
                stream,
            },
        )
    }

    #[test]
    fn a_replay_knows_what_its_capture_recorded() {
        let mut g = Graphs::default();
        let steps = [
            call(
                CudaOp::StreamBeginCapture,
                CudaArgs::CaptureBegin {
                    stream: 5,
                    mode: Some(0),
                },
            ),
            launch(5),
            launch(6),
            launch(5),
            call(
                CudaOp::StreamEndCapture,
                CudaArgs::CaptureEnd {
                    stream: 5,
                    graph: Some(0x9),
                    kernel_nodes: None,
                },
            ),
            call(
                CudaOp::GraphInstantiateWithFlags,
                CudaArgs::GraphInstantiate {
                    graph: 0x9,
                    graph_exec: Some(0xe),
                },
            ),
        ];
        for mut c in steps {
            g.follow(&mut c);
            if let CudaArgs::CaptureEnd { kernel_nodes, .. } = c.args {
                assert_eq!(
                    kernel_nodes,
                    Some(2),
                    "launches on the capturing stream only"
                );
            }
        }
        let mut replay = call(
            CudaOp::GraphLaunch,
            CudaArgs::GraphLaunch {
                graph_exec: 0xe,
                stream: 3,
                captured: None,
            },
        );
        g.follow(&mut replay);
        let CudaArgs::GraphLaunch { captured, .. } = replay.args else {
            panic!("a graph launch");
        };
        assert_eq!(
            captured,
            Some(Captured {
                kernel_nodes: 2,
                stream: 5
            })
        );
        let mut unknown = call(
            CudaOp::GraphLaunch,
            CudaArgs::GraphLaunch {
                graph_exec: 0xf,
                stream: 3,
                captured: None,
            },
        );
        g.follow(&mut unknown);
        assert!(matches!(
            unknown.args,
            CudaArgs::GraphLaunch { captured: None, .. }
        ));
        g.forget_process(7);
        g.follow(&mut replay);
        assert!(matches!(
            replay.args,
            CudaArgs::GraphLaunch { captured: None, .. }
        ));
    }

    #[test]
    fn the_maps_are_bounded() {
        let mut g = Graphs::default();
        for s in 0..(MAX_ENTRIES as u64 + 10) {
            g.follow(&mut call(
                CudaOp::StreamBeginCapture,
                CudaArgs::CaptureBegin {
                    stream: s,
                    mode: None,
                },
            ));
        }
        assert_eq!(g.capturing.len(), MAX_ENTRIES);
        assert_eq!(g.evicted, 10);
    }
}
