//! The user-space pipeline after the ring buffers: decode each record, name its kernel, follow
//! CUDA graphs and NCCL communicators, update the live statistics, write `--json` lines, and
//! hand events to the recording. It is fed raw record bytes, so the drain benchmark can replay
//! captured records through exactly the code the agent runs.
//!
//! Kernel names arrive on a ring of their own (a registration burst must not cost launches).
//! A name is always submitted before any launch that uses it, so a launch whose handle is
//! unknown first takes whatever the names ring holds, then asks the store (which falls back to
//! the ELF symbols of the process).
//!
//! A process's exit is read from the scheduler ring, its last launches perhaps later from the
//! CUDA ring: what is kept per process is forgotten only after the next drain of the CUDA ring
//! ([`crate::exits`]).
//!
//! The first event of each process (when recording or printing `--json`) also reads its rank
//! from its environment ([`crate::ranks`]); a rank becomes an annotation written just before
//! that event, through the same path as the annotations clients send.

use std::{
    collections::BTreeMap,
    io::{self, Write},
    sync::Arc,
};

use ingero_trace::json::{Line, write_line};
use serde::Serialize;

use aya::maps::{MapData, RingBuf};
use ingero_trace::model::{
    AnnotationRecord, CudaArgs, CudaCall, Event, NameSource, NvtxRecord, ProcessOp,
};

use crate::{
    decode::{self, DecodeError, NameFact, NameWhat},
    exits::{ExitMark, WaitingExits},
    export::otlp::live::run::OtlpRun,
    graphs::Graphs,
    kernels::{KernelNameLimits, KernelNames},
    live::Stats,
    nccl::Communicators,
    nvtx::fallback::Fallback,
    nvtx::server::{ConnectedPids, NvtxCounters},
    ranks::Ranks,
    recording::Recording,
};

/// Where events go.
pub struct Pipeline {
    pub stats: Stats,
    json: Option<Box<dyn Write + Send>>,
    /// Records that could not be decoded, by reason (never silently lost).
    pub decode_errors: BTreeMap<&'static str, u64>,
    /// Set when writing `--json` output failed (for example a closed pipe).
    pub output_error: Option<io::Error>,
    /// With `--record`: the reorder window and the trace file.
    pub recording: Option<Recording>,
    /// With `--otlp-endpoint`: the live export (fed by the recording).
    pub otlp: Option<OtlpRun>,
    /// Kernel names per process and handle.
    pub kernels: KernelNames,
    /// Captures and executable graphs per process.
    pub graphs: Graphs,
    /// NCCL communicators made while tracing, per process.
    pub communicators: Communicators,
    /// The names ring, when the pipeline drains it itself (the agent; not the benchmarks).
    names: Option<RingBuf<MapData>>,
    /// Exits read from the scheduler ring, waiting for the CUDA ring's next drain.
    pub exits: WaitingExits,
    /// The processes seen, and the rank labels read from their environments.
    pub ranks: Ranks,
    /// The NVTX socket's counters, when it is open (for the statistics and drops).
    pub nvtx: Option<Arc<NvtxCounters>>,
    /// The NVTX fallback's pairing (records of the uprobes on NVTX libraries), and the
    /// processes whose calls the socket already captures.
    pub nvtx_fallback: Fallback,
    pub nvtx_connected: Option<Arc<ConnectedPids>>,
}

impl Pipeline {
    /// A pipeline that writes JSON lines to `json` when given, and always keeps statistics.
    pub fn new(json: Option<Box<dyn Write + Send>>) -> Self {
        Pipeline {
            stats: Stats::default(),
            json,
            decode_errors: BTreeMap::new(),
            output_error: None,
            recording: None,
            otlp: None,
            kernels: KernelNames::new(KernelNameLimits::default()),
            graphs: Graphs::default(),
            communicators: Communicators::default(),
            names: None,
            exits: WaitingExits::default(),
            ranks: Ranks::default(),
            nvtx: None,
            nvtx_fallback: Fallback::default_limits(),
            nvtx_connected: None,
        }
    }

    /// Gives the pipeline the names ring to drain before it names a launch.
    pub fn set_names_ring(&mut self, ring: RingBuf<MapData>) {
        self.names = Some(ring);
    }

    /// Takes every record the names ring holds; returns how many.
    pub fn drain_names(&mut self) -> usize {
        let Some(mut ring) = self.names.take() else {
            return 0;
        };
        let mut n = 0;
        while let Some(item) = ring.next() {
            self.handle_name_record(&item);
            n += 1;
        }
        self.names = Some(ring);
        n
    }

    /// Handles one names-ring record: a handle's name, or an alias.
    pub fn handle_name_record(&mut self, bytes: &[u8]) {
        match decode::decode_name(bytes) {
            Ok(fact) => self.learn_name(fact),
            Err(err) => self.count_decode_error(err),
        }
    }

    fn learn_name(&mut self, fact: NameFact) {
        use ingero_ebpf::CudaOp;
        let source = match fact.op {
            CudaOp::CuModuleGetFunction => NameSource::DriverModule,
            CudaOp::CuLibraryGetKernel => NameSource::DriverLibrary,
            _ => NameSource::Registration,
        };
        match fact.what {
            NameWhat::Text {
                bytes,
                addr,
                truncated,
            } => {
                let name = self
                    .kernels
                    .name_from_record(fact.pid, source, &bytes, addr, truncated);
                self.kernels.insert(fact.pid, fact.handle, name);
                self.stats.names_learned += 1;
            }
            NameWhat::Alias(target) => self.kernels.alias(fact.pid, fact.handle, target),
            // Read from the process (faulting the page in, as the probe could not) when a
            // launch first asks for it.
            NameWhat::Unreadable { addr } => {
                self.kernels.defer(fact.pid, fact.handle, addr, source);
                self.stats.names_deferred += 1;
            }
        }
    }

    /// Names a launch's kernel, follows graphs and NCCL communicators.
    fn enrich(&mut self, c: &mut CudaCall) {
        let handle = match c.args {
            CudaArgs::Launch { func, .. } => Some(func),
            CudaArgs::GetFunction {
                function: Some(f), ..
            } => Some(f),
            _ => None,
        };
        if let Some(handle) = handle {
            let pid = c.task.pid;
            // A named handle costs one lookup. Otherwise its name may still wait in the
            // names ring (submitted before the launch, after the last drain): take it before
            // the store falls back to ELF symbols and remembers a miss.
            c.detail.kernel = self.kernels.get(pid, handle).or_else(|| {
                self.drain_names();
                self.kernels.resolve(pid, handle)
            });
        }
        self.graphs.follow(c);
        if c.op.library() == ingero_ebpf::CudaLibrary::Nccl {
            self.communicators.follow(c);
        }
    }

    /// Before a drain of the CUDA ring: the exits read so far, which that drain settles.
    pub fn cuda_drain_begins(&self) -> ExitMark {
        self.exits.mark()
    }

    /// After a drain of the CUDA ring that began at `mark`: the processes whose exits were
    /// read before it are forgotten (their last CUDA records were in that drain).
    pub fn cuda_drain_ended(&mut self, mark: ExitMark) {
        while let Some(pid) = self.exits.pop_before(mark) {
            self.forget_process(pid);
        }
    }

    /// Settles every exit read (tracing ends; the rings are drained).
    pub fn settle_exits(&mut self) {
        self.cuda_drain_ended(self.exits.mark());
    }

    /// Drops what is kept per process for an exited one (its pid may be reused).
    fn forget_process(&mut self, pid: u32) {
        self.kernels.forget_process(pid);
        self.graphs.forget_process(pid);
        self.communicators.forget_process(pid);
        self.stats.memory.forget(pid);
        self.ranks.forget(pid);
    }

    /// Takes one NVTX fallback record (the ranges it completes are written at once).
    fn handle_nvtx_probe(&mut self, bytes: &[u8]) {
        match decode::decode_nvtx_probe(bytes) {
            Ok(call) => {
                let connected = self
                    .nvtx_connected
                    .as_ref()
                    .is_some_and(|c| c.contains(call.pid));
                let mut done = Vec::new();
                self.nvtx_fallback
                    .feed(call, connected, &mut |r| done.push(r));
                for r in done {
                    self.write_nvtx(r);
                }
            }
            Err(err) => self.count_decode_error(err),
        }
    }

    /// A process exited: the fallback's ranges it left open end here; the socket forgets it.
    fn nvtx_process_exit(&mut self, pid: u32, ts_ns: u64) {
        let mut done = Vec::new();
        self.nvtx_fallback.exit(pid, ts_ns, &mut |r| done.push(r));
        for r in done {
            self.write_nvtx(r);
        }
        if let Some(c) = &self.nvtx_connected {
            c.remove(pid);
        }
    }

    /// Tracing ends: the fallback's open ranges end at the newest time it saw, as unclosed.
    pub fn finish_nvtx_fallback(&mut self) {
        let mut done = Vec::new();
        self.nvtx_fallback.finish(&mut |r| done.push(r));
        for r in done {
            self.write_nvtx(r);
        }
    }

    /// Handles one ring buffer record.
    pub fn handle_record(&mut self, bytes: &[u8]) {
        match decode::kind_of(bytes) {
            Some(ingero_ebpf::RecordKind::NvtxProbe) => return self.handle_nvtx_probe(bytes),
            Some(ingero_ebpf::RecordKind::DriverLog) => return self.handle_driver_log(bytes),
            _ => {}
        }
        match decode::decode(bytes) {
            Ok(mut event) => {
                match &mut event {
                    Event::Cuda(c) => self.enrich(c),
                    Event::Process(p) if p.op == ProcessOp::Exit => {
                        let (pid, ts) = (p.task.pid, p.ts_ns);
                        // The fallback's records share this ring: none of them is late.
                        self.nvtx_process_exit(pid, ts);
                        if let Some(oldest) = self.exits.push(pid) {
                            self.forget_process(oldest);
                        }
                    }
                    _ => {}
                }
                if self.recording.is_some() || self.json_enabled() {
                    if let Some(rank) = self.ranks.observe(&event) {
                        self.write_annotation(rank);
                    }
                }
                self.stats.record(&event);
                // The view is built only with `--json`: this is the drain path.
                if self.json_enabled() {
                    self.write_json_line(&Line::of_event(&event));
                }
                if let Some(recording) = self.recording.as_mut() {
                    recording.push_event(event);
                }
            }
            Err(err) => self.count_decode_error(err),
        }
    }

    /// Takes one NVIDIA driver message: counted, told on stderr when it reports a GPU fault
    /// (it may be why the job stalls, and the user is watching now), written to `--json` and
    /// the recording.
    fn handle_driver_log(&mut self, bytes: &[u8]) {
        let message = match decode::decode_driver_log(bytes) {
            Ok(m) => m,
            Err(err) => return self.count_decode_error(err),
        };
        self.stats.driver_messages += 1;
        if let Some(x) = message.xid() {
            self.stats.xids += 1;
            let line = crate::live::xid_line(&x);
            eprintln!("ingero: {line}");
            self.stats.last_xid = Some(line);
        }
        self.write_json_line(&Line::Driver(&message));
        if let Some(recording) = self.recording.as_mut() {
            recording.push_driver(message);
        }
    }

    /// Writes an NVTX range or mark (to `--json` and the recording) and counts it.
    pub fn write_nvtx(&mut self, record: NvtxRecord) {
        self.stats.nvtx += 1;
        self.write_json_line(&Line::Nvtx(&record));
        if let Some(recording) = self.recording.as_mut() {
            recording.push_nvtx(record);
        }
    }

    /// Writes an annotation wherever events go: a `--json` line and the recording.
    pub fn write_annotation(&mut self, record: AnnotationRecord) {
        self.write_json_line(&Line::Annotation(&record));
        if let Some(recording) = self.recording.as_mut() {
            recording.push_annotation(record);
        }
    }

    /// Writes one `--json` line (an event, an annotation, a stats line) when `--json` is on.
    /// After the first failed write nothing more is written, and that first error is kept: it
    /// is what ends tracing and what the summary reports.
    pub fn write_json_line(&mut self, line: &impl Serialize) {
        if let (Some(out), None) = (self.json.as_mut(), &self.output_error) {
            if let Err(e) = write_line(&mut **out, line) {
                self.output_error = Some(e);
            }
        }
    }

    fn count_decode_error(&mut self, err: DecodeError) {
        self.stats.decode_errors += 1;
        let key = match err {
            DecodeError::Short(_) => "decode_short_record",
            DecodeError::UnknownKind(_) => "decode_unknown_kind",
            DecodeError::WrongSize { .. } => "decode_wrong_size",
            DecodeError::UnknownOp(_) => "decode_unknown_op",
            DecodeError::UnknownReason(_) => "decode_unknown_reason",
        };
        *self.decode_errors.entry(key).or_default() += 1;
    }

    pub fn json_enabled(&self) -> bool {
        self.json.is_some()
    }

    pub fn flush(&mut self) {
        if let Some(out) = self.json.as_mut() {
            if let Err(e) = out.flush() {
                self.output_error.get_or_insert(e);
            }
        }
    }
}

#[cfg(test)]
#[path = "pipeline_tests.rs"]
mod tests;
