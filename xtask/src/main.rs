//! Project tasks: `cargo xtask build-ebpf`, `cargo xtask test`, `cargo xtask bench`,
//! `cargo xtask cycles`, `cargo xtask test-deps`.
//!
//! Each task is a module; this file only parses the command line.

mod bench;
mod cycles;
mod ebpf;
mod file_size;
mod test;
mod test_deps;
mod util;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "xtask", about = "Build, test and benchmark ingero")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build the eBPF object from source and commit-ready copy it to ingero-ebpf/prebuilt/.
    BuildEbpf(ebpf::BuildArgs),
    /// The full test run CI uses: fmt, clippy, unit tests, eBPF freshness, kernel tests.
    Test(test::TestArgs),
    /// Benchmarks (not tests): `probes`, `annotate`, `record`, `analyze`, `nvtx`.
    Bench(bench::BenchArgs),
    /// Fetch the NVIDIA libraries the kernel tests trace (libcudart 12 and 13, libcuda, libnccl
    /// 2.27 and 2.30, NVTX) under target/test-deps/ and print them as the environment the tests
    /// read.
    TestDeps,
    /// Import cycles between the source files of the library crates (exits 1 on any).
    Cycles(cycles::CyclesArgs),
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::BuildEbpf(args) => ebpf::build(&args).map(|_| ()),
        Command::Test(args) => test::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::TestDeps => test_deps::print_env(),
        Command::Cycles(args) => cycles::run(&args),
    }
}
