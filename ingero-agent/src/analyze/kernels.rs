//! Kernels and graphs: `query --group-by kernel` (one row per launched kernel, by name, or by
//! host function when no name is known; one row per executable graph replayed) and the split
//! between eager launches and graph replays that `explain` reports.

use std::collections::HashMap;
use std::sync::Arc;

use ingero_trace::model::{CudaArgs, CudaCallRecord};
use ingero_trace::vocab::ptr_text;
use serde::Serialize;

use super::fmt;
use super::table::{Table, host_cell, host_header};

/// The grouping key that selects this report.
pub const KERNEL_KEY: &str = "kernel";

/// Most distinct rows kept; launches past it are counted in [`KernelTable::overflow`].
pub const MAX_ROWS: usize = 65_536;

/// What a row stands for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    /// A kernel known by name (demangled).
    Named(Arc<str>),
    /// A launch whose kernel has no known name: its host function or handle.
    Func(u64),
    /// Replays of one executable graph.
    Graph(u64),
}

/// One row's running totals.
#[derive(Clone, Debug, Default)]
struct Totals {
    mangled: Option<Arc<str>>,
    source: Option<&'static str>,
    launches: u64,
    errors: u64,
    api_time_ns: u64,
    max_ns: u64,
    kernel_nodes: Option<u32>,
}

/// Launches by kernel and replays by graph, over the selection.
#[derive(Clone, Debug, Default)]
pub struct KernelTable {
    rows: HashMap<Key, Totals>,
    /// Kernel launches that were not graph replays.
    pub eager_launches: u64,
    /// Graph launches, and the kernel nodes they replayed where the capture was seen.
    pub graph_launches: u64,
    pub graph_kernels: u64,
    /// Launches not given a row because [`MAX_ROWS`] were already kept.
    pub overflow: u64,
}

impl KernelTable {
    /// Counts a kernel or graph launch (other calls are ignored).
    pub fn add(&mut self, c: &CudaCallRecord) {
        let key = match &c.args {
            CudaArgs::Launch { func, .. } => {
                self.eager_launches += 1;
                match &c.detail.kernel {
                    Some(k) => Key::Named(k.demangled.clone()),
                    None => Key::Func(*func),
                }
            }
            CudaArgs::GraphLaunch {
                graph_exec,
                captured,
                ..
            } => {
                self.graph_launches += 1;
                self.graph_kernels += captured.map_or(0, |c| u64::from(c.kernel_nodes));
                Key::Graph(*graph_exec)
            }
            _ => return,
        };
        let full = self.rows.len() >= MAX_ROWS;
        let t = match self.rows.get_mut(&key) {
            Some(t) => t,
            None if full => {
                self.overflow += 1;
                return;
            }
            None => self.rows.entry(key).or_default(),
        };
        t.launches += 1;
        t.errors += u64::from(c.ret != 0);
        let d = c.real_duration_ns();
        t.api_time_ns = t.api_time_ns.saturating_add(d);
        t.max_ns = t.max_ns.max(d);
        if let Some(k) = &c.detail.kernel {
            t.mangled.get_or_insert_with(|| k.mangled.clone());
            t.source.get_or_insert(k.source.as_str());
        }
        if let CudaArgs::GraphLaunch {
            captured: Some(cap),
            ..
        } = &c.args
        {
            t.kernel_nodes = Some(cap.kernel_nodes);
        }
    }

    /// The rows, most API time first.
    pub fn rows(&self) -> Vec<KernelRow> {
        let mut rows: Vec<KernelRow> = self
            .rows
            .iter()
            .map(|(key, t)| {
                let (kind, kernel) = match key {
                    Key::Named(n) => ("kernel", n.to_string()),
                    Key::Func(f) => ("kernel", format!("func {}", ptr_text(*f))),
                    Key::Graph(g) => ("graph", format!("graph exec {}", ptr_text(*g))),
                };
                KernelRow {
                    host: None,
                    kind,
                    kernel,
                    kernel_mangled: t.mangled.as_deref().map(str::to_owned),
                    kernel_source: t.source,
                    launches: t.launches,
                    errors: t.errors,
                    api_time_ns: t.api_time_ns,
                    mean_ns: t.api_time_ns / t.launches.max(1),
                    max_ns: t.max_ns,
                    kernel_nodes: t.kernel_nodes,
                }
            })
            .collect();
        rows.sort_by(|a, b| {
            b.api_time_ns
                .cmp(&a.api_time_ns)
                .then_with(|| a.kernel.cmp(&b.kernel))
        });
        rows
    }
}

/// One kernel (or graph) of `query --group-by kernel`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct KernelRow {
    /// The host, when the recordings read are several hosts' (`fleet`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// `kernel` or `graph`.
    pub kind: &'static str,
    /// The demangled name; `func 0x…` when unknown; `graph exec 0x…` for a graph.
    pub kernel: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_mangled: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_source: Option<&'static str>,
    pub launches: u64,
    pub errors: u64,
    pub api_time_ns: u64,
    pub mean_ns: u64,
    pub max_ns: u64,
    /// Graphs: the kernel nodes its capture recorded, when the capture was traced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_nodes: Option<u32>,
}

/// The rows as a table.
pub fn table(rows: &[KernelRow]) -> Table {
    let with_host = rows.iter().any(|r| r.host.is_some());
    let mut h = host_header(with_host);
    h.extend(["kernel", "launches", "api", "mean", "max", "errors"]);
    let mut t = Table::new(&h);
    for r in rows {
        let name = match r.kernel_nodes {
            Some(n) => format!("{} ({n} kernels)", r.kernel),
            None => r.kernel.clone(),
        };
        let mut cells = host_cell(with_host, &r.host);
        cells.extend([
            name,
            r.launches.to_string(),
            fmt::dur(r.api_time_ns),
            fmt::dur(r.mean_ns),
            fmt::dur(r.max_ns),
            r.errors.to_string(),
        ]);
        t.push(cells);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use ingero_ebpf::CudaOp;
    use ingero_trace::model::{CallDetail, Captured, KernelName, NameSource, ThreadRef};

    fn call(op: CudaOp, args: CudaArgs, kernel: Option<&str>, dur: u64) -> CudaCallRecord {
        CudaCallRecord {
            ts_ns: 1,
            duration_ns: dur,
            thread: ThreadRef {
                pid: 1,
                tid: 1,
                name: "t".into(),
            },
            op,
            ret: 0,
            args,
            detail: CallDetail {
                kernel: kernel.map(|k| {
                    Arc::new(KernelName {
                        mangled: format!("_Z{}", k.len()).into(),
                        demangled: k.into(),
                        source: NameSource::Registration,
                        truncated: false,
                    })
                }),
                ..Default::default()
            },
            clamped_from_ns: None,
            cpu: 0,
            cgroup_id: 0,
        }
    }

    fn launch(func: u64) -> CudaArgs {
        CudaArgs::Launch {
            func,
            grid: [1; 3],
            block: [1; 3],
            shared_mem: 0,
            stream: 0,
        }
    }

    #[test]
    fn rows_are_per_kernel_per_unnamed_function_and_per_graph() {
        let mut t = KernelTable::default();
        t.add(&call(CudaOp::LaunchKernel, launch(1), Some("gemm"), 10));
        t.add(&call(CudaOp::CuLaunchKernel, launch(2), Some("gemm"), 30));
        t.add(&call(CudaOp::LaunchKernel, launch(3), None, 5));
        let graph = CudaArgs::GraphLaunch {
            graph_exec: 0xe,
            stream: 0,
            captured: Some(Captured {
                kernel_nodes: 40,
                stream: 1,
            }),
        };
        t.add(&call(CudaOp::GraphLaunch, graph.clone(), None, 7));
        t.add(&call(CudaOp::GraphLaunch, graph, None, 9));
        t.add(&call(
            CudaOp::Malloc,
            CudaArgs::HostAlloc { size: 1, ptr: None },
            None,
            99,
        ));
        let rows = t.rows();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].kernel, "gemm");
        assert_eq!(
            (rows[0].launches, rows[0].api_time_ns, rows[0].max_ns),
            (2, 40, 30)
        );
        assert_eq!(rows[1].kernel, "graph exec 0xe");
        assert_eq!((rows[1].launches, rows[1].kernel_nodes), (2, Some(40)));
        assert_eq!(rows[2].kernel, "func 0x3");
        assert_eq!(
            (t.eager_launches, t.graph_launches, t.graph_kernels),
            (3, 2, 80)
        );
    }
}
