//! `cargo xtask cycles [--crate NAME]`: import cycles between the source files of the library
//! crates. A cycle (a file that, through the files it uses, ends up using itself) means no
//! file of it can be understood, tested or moved without the others.
//!
//! The graph has one node per file of the crate's module tree (walked from `src/lib.rs` along
//! `mod x;` declarations, `#[path]` honoured) and an edge A → B when A names a path into B:
//! `use crate::…`, `use super::…`, a relative `use child::…`, or `crate::a::b::f()` in code. A
//! path resolves to the deepest module that has a file (`src/a/b.rs` or `src/a/b/mod.rs`);
//! items and inline modules stay in their file. Not edges: a path into the file itself or into
//! `lib.rs`, and a module file's path into its own child modules (declaring and re-exporting
//! children is what a parent is for). Test code is left out: `#[cfg(test)]` items and modules
//! (a file is test code because its module is declared under `#[cfg(test)]` or starts with
//! `#![cfg(test)]`, never because of its name).
//!
//! Cycles are the strongly connected components of more than one file (Tarjan); for each, one
//! loop through it is printed edge by edge with the line that makes the edge.

mod parse;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::util::workspace_root;

/// The crates checked by default: every library of the workspace.
pub const LIBRARY_CRATES: [&str; 4] = [
    "ingero-trace",
    "ingero-agent",
    "ingero-annotate",
    "ingero-nvtx",
];

#[derive(Args)]
pub struct CyclesArgs {
    /// Check only this crate (a workspace directory with a src/lib.rs).
    #[arg(long = "crate", value_name = "NAME")]
    pub krate: Option<String>,
    /// Also print every edge of the graph (`file:line uses file`).
    #[arg(long)]
    pub edges: bool,
}

/// The file-level import graph of one crate.
#[derive(Debug)]
pub struct Graph {
    /// Source files, relative to the crate directory, sorted.
    pub files: Vec<PathBuf>,
    /// `edges[a][b]`: the first line of file `a` that names a path into file `b`.
    pub edges: Vec<BTreeMap<usize, usize>>,
}

impl Graph {
    /// The number of edges.
    pub fn edge_count(&self) -> usize {
        self.edges.iter().map(BTreeMap::len).sum()
    }
}

pub fn run(args: &CyclesArgs) -> Result<()> {
    let root = workspace_root();
    let crates: Vec<String> = match &args.krate {
        Some(name) => vec![name.clone()],
        None => LIBRARY_CRATES.iter().map(|c| c.to_string()).collect(),
    };
    let mut total = 0;
    for name in &crates {
        let dir = root.join(name);
        if !dir.join("src/lib.rs").is_file() {
            bail!(
                "{name}: no {}/src/lib.rs (known libraries: {})",
                dir.display(),
                LIBRARY_CRATES.join(", ")
            );
        }
        let graph = build(&dir).with_context(|| format!("reading {name}"))?;
        let cycles = cycles(&graph);
        if args.edges {
            for (a, targets) in graph.edges.iter().enumerate() {
                for (b, line) in targets {
                    let (a, b) = (graph.files[a].display(), graph.files[*b].display());
                    println!("{name}/{a}:{line} uses {name}/{b}");
                }
            }
        }
        print!("{}", report(name, &graph, &cycles));
        total += cycles.len();
    }
    if total > 0 {
        bail!("{total} import cycle(s) found");
    }
    Ok(())
}

/// What one crate's check prints.
pub fn report(name: &str, graph: &Graph, cycles: &[Vec<usize>]) -> String {
    let mut out = format!(
        "{name}: {} files, {} edges, ",
        graph.files.len(),
        graph.edge_count()
    );
    if cycles.is_empty() {
        out.push_str("no cycles\n");
        return out;
    }
    out.push_str(&format!("{} cycle(s)\n", cycles.len()));
    let show = |f: usize| format!("{name}/{}", graph.files[f].display());
    for (n, scc) in cycles.iter().enumerate() {
        let members: Vec<String> = scc.iter().map(|f| show(*f)).collect();
        out.push_str(&format!(
            "  cycle {} ({} files): {}\n",
            n + 1,
            scc.len(),
            members.join(", ")
        ));
        let path = witness(graph, scc);
        for pair in path.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let line = graph.edges[a].get(&b).copied().unwrap_or(0);
            out.push_str(&format!("    {}:{line} uses {}\n", show(a), show(b)));
        }
    }
    out
}

/// A file of the module tree.
struct Module {
    /// Relative to the crate directory.
    file: PathBuf,
    /// Module path from the crate root (`[]` for lib.rs).
    path: Vec<String>,
    facts: parse::FileFacts,
}

/// Lexically normalised (`a/./b/../c` → `a/c`), for `#[path]` values.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Walks the module tree of the crate in `dir` and builds its graph.
pub fn build(dir: &Path) -> Result<Graph> {
    let mut modules: Vec<Module> = Vec::new();
    let mut queue = VecDeque::from([(PathBuf::from("src/lib.rs"), Vec::new(), true)]);
    let mut seen = BTreeSet::new();
    while let Some((file, path, owns_dir)) = queue.pop_front() {
        if !seen.insert(file.clone()) {
            continue;
        }
        let text = std::fs::read_to_string(dir.join(&file))
            .with_context(|| format!("reading {}", dir.join(&file).display()))?;
        let facts = parse::parse(&text);
        if facts.test_only {
            continue;
        }
        let here = file.parent().map(Path::to_path_buf).unwrap_or_default();
        // Where its `mod x;` files live: its own directory for `mod.rs`, `lib.rs` and files
        // loaded by `#[path]`, else `dir/stem/`.
        let child_dir = if owns_dir {
            here.clone()
        } else {
            let stem = file.file_stem().unwrap_or_default();
            here.join(stem)
        };
        for decl in facts.mods.iter().filter(|d| !d.test) {
            let mut module_path = path.clone();
            module_path.extend(decl.inline.iter().cloned());
            module_path.push(decl.name.clone());
            let inline_dir: PathBuf = decl.inline.iter().collect();
            let (child, owns) = match &decl.path {
                // Outside inline modules a #[path] is relative to the declaring file's
                // directory, inside them to the inline modules' directory.
                Some(p) if decl.inline.is_empty() => (normalise(&here.join(p)), true),
                Some(p) => (normalise(&child_dir.join(&inline_dir).join(p)), true),
                None => {
                    let base = child_dir.join(&inline_dir);
                    let flat = base.join(format!("{}.rs", decl.name));
                    if dir.join(&flat).is_file() {
                        (flat, false)
                    } else {
                        (base.join(&decl.name).join("mod.rs"), true)
                    }
                }
            };
            if dir.join(&child).is_file() {
                queue.push_back((child, module_path, owns));
            }
        }
        modules.push(Module { file, path, facts });
    }
    modules.sort_by(|a, b| a.file.cmp(&b.file));
    let by_path: BTreeMap<&[String], usize> = modules
        .iter()
        .enumerate()
        .map(|(i, m)| (m.path.as_slice(), i))
        .collect();
    let mut edges = vec![BTreeMap::new(); modules.len()];
    for (from, m) in modules.iter().enumerate() {
        for u in &m.facts.uses {
            let mut scope = m.path.clone();
            scope.extend(u.inline.iter().cloned());
            let Some(target) = resolve(&scope, &u.segments) else {
                continue;
            };
            // The deepest module of the path that has a file.
            let Some(to) = (0..=target.len())
                .rev()
                .find_map(|k| by_path.get(&target[..k]).copied())
            else {
                continue;
            };
            let to_path = &modules[to].path;
            let own_child = to_path.len() == m.path.len() + 1 && to_path.starts_with(&m.path);
            if to == from || to_path.is_empty() || own_child {
                continue;
            }
            edges[from].entry(to).or_insert(u.line);
        }
    }
    Ok(Graph {
        files: modules.into_iter().map(|m| m.file).collect(),
        edges,
    })
}

/// The absolute module path a path written in module `scope` names (`None`: outside the
/// crate, or above its root).
fn resolve(scope: &[String], segments: &[String]) -> Option<Vec<String>> {
    let (first, rest) = segments.split_first()?;
    let mut out: Vec<String> = match first.as_str() {
        "crate" | "$crate" => Vec::new(),
        "super" => scope.split_last()?.1.to_vec(),
        "self" => scope.to_vec(),
        // Relative (a `use` of a child module, or of another crate, which then resolves to
        // no deeper file than the scope's own).
        _ => {
            let mut v = scope.to_vec();
            v.push(first.clone());
            v
        }
    };
    for s in rest {
        match s.as_str() {
            "super" => {
                out.pop()?;
            }
            "self" => {}
            _ => out.push(s.clone()),
        }
    }
    Some(out)
}

/// Strongly connected components of more than one file, each sorted, in file order (Tarjan).
pub fn cycles(graph: &Graph) -> Vec<Vec<usize>> {
    struct Tarjan<'g> {
        graph: &'g Graph,
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: usize) {
            self.index[v] = Some(self.next);
            self.low[v] = self.next;
            self.next += 1;
            self.stack.push(v);
            self.on_stack[v] = true;
            let graph = self.graph;
            for &w in graph.edges[v].keys() {
                match self.index[w] {
                    None => {
                        self.visit(w);
                        self.low[v] = self.low[v].min(self.low[w]);
                    }
                    Some(iw) if self.on_stack[w] => self.low[v] = self.low[v].min(iw),
                    Some(_) => {}
                }
            }
            if Some(self.low[v]) == self.index[v] {
                let mut scc = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack[w] = false;
                    scc.push(w);
                    if w == v {
                        break;
                    }
                }
                if scc.len() > 1 {
                    scc.sort_unstable();
                    self.out.push(scc);
                }
            }
        }
    }
    let n = graph.files.len();
    let mut t = Tarjan {
        graph,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            t.visit(v);
        }
    }
    t.out.sort();
    t.out
}

/// One shortest loop through a component, from its first file back to it.
fn witness(graph: &Graph, scc: &[usize]) -> Vec<usize> {
    let members: BTreeSet<usize> = scc.iter().copied().collect();
    let Some(&start) = scc.first() else {
        return Vec::new();
    };
    let mut parent: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in graph.edges[v].keys().filter(|w| members.contains(w)) {
            if w == start {
                let mut path = vec![start, v];
                let mut at = v;
                while let Some(&p) = parent.get(&at) {
                    path.push(p);
                    at = p;
                }
                path.reverse();
                return path;
            }
            if let std::collections::btree_map::Entry::Vacant(e) = parent.entry(w) {
                e.insert(v);
                queue.push_back(w);
            }
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crate written into a fresh temporary directory, removed on drop.
    struct Tree(PathBuf);

    impl Tree {
        fn new(name: &str, files: &[(&str, &str)]) -> Tree {
            let dir =
                std::env::temp_dir().join(format!("xtask-cycles-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            for (path, text) in files {
                let path = dir.join(path);
                std::fs::create_dir_all(path.parent().expect("a file has a parent"))
                    .expect("create the test tree");
                std::fs::write(&path, text).expect("write the test tree");
            }
            Tree(dir)
        }

        fn cycles(&self) -> (Graph, Vec<Vec<String>>) {
            let graph = build(&self.0).expect("build the graph");
            let named = cycles(&graph)
                .iter()
                .map(|scc| {
                    scc.iter()
                        .map(|f| graph.files[*f].display().to_string())
                        .collect()
                })
                .collect();
            (graph, named)
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn finds_a_two_file_cycle() {
        let tree = Tree::new(
            "two",
            &[
                ("src/lib.rs", "mod a;\nmod b;\n"),
                ("src/a.rs", "//! A.\nuse crate::b::B;\npub struct A;\n"),
                (
                    "src/b.rs",
                    "//! B.\npub struct B;\nfn f() { super::a::A; }\n",
                ),
            ],
        );
        let (graph, found) = tree.cycles();
        assert_eq!(found, [["src/a.rs", "src/b.rs"]]);
        let text = report("two", &graph, &cycles(&graph));
        assert!(text.contains("two/src/a.rs:2 uses two/src/b.rs"), "{text}");
        assert!(text.contains("two/src/b.rs:3 uses two/src/a.rs"), "{text}");
    }

    #[test]
    fn finds_a_three_file_cycle_through_groups_and_subdirectories() {
        let tree = Tree::new(
            "three",
            &[
                ("src/lib.rs", "pub mod m;\npub mod z;\n"),
                ("src/m/mod.rs", "mod x;\nmod y;\npub use x::X;\n"),
                ("src/m/x.rs", "use super::{y::Y, other};\npub struct X;\n"),
                ("src/m/y.rs", "use crate::z::{self, Z};\npub struct Y;\n"),
                ("src/z.rs", "pub struct Z(crate::m::x::X);\n"),
                ("src/other.rs", ""),
            ],
        );
        let (_, found) = tree.cycles();
        assert_eq!(found, [["src/m/x.rs", "src/m/y.rs", "src/z.rs"]]);
    }

    #[test]
    fn passes_an_acyclic_tree_with_test_code_and_parents() {
        let tree = Tree::new(
            "acyclic",
            &[
                (
                    "src/lib.rs",
                    "pub mod p;\nmod leaf;\n#[cfg(test)]\nmod helpers;\nuse p::Q;\n",
                ),
                // A parent re-exporting its children, which use it back: not a cycle.
                (
                    "src/p/mod.rs",
                    "mod q;\nmod r;\npub use q::Q;\npub struct P;\n",
                ),
                (
                    "src/p/q.rs",
                    "use super::P;\nuse super::r::R;\npub struct Q;\n#[cfg(test)]\nmod tests;\n",
                ),
                (
                    "src/p/r.rs",
                    "// use super::q::Q; (a comment)\n\
                     const S: &str = \"crate::p::q::Q\";\n\
                     pub struct R(crate::leaf::L);\n\
                     #[cfg(test)]\nmod tests { use crate::p::q::Q; }\n\
                     mod inner { use super::super::r::R; }\n",
                ),
                ("src/p/q/tests.rs", "use crate::p::r::R;\nuse super::Q;\n"),
                ("src/leaf.rs", "pub struct L;\nuse crate::Q;\n"),
                ("src/helpers.rs", "use crate::p::q::Q;\n"),
            ],
        );
        let (graph, found) = tree.cycles();
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(
            graph.files,
            [
                "src/leaf.rs",
                "src/lib.rs",
                "src/p/mod.rs",
                "src/p/q.rs",
                "src/p/r.rs"
            ]
            .map(PathBuf::from)
        );
        // q → p (its parent), q → r, r → leaf; leaf's `crate::Q` is lib.rs's.
        assert_eq!(graph.edge_count(), 3);
        assert!(report("acyclic", &graph, &[]).ends_with("no cycles\n"));
    }

    /// Only `#[cfg(test)]` makes a file test code: a module that the build compiles is in the
    /// graph whatever its file is called or wherever it lies.
    #[test]
    fn files_named_like_tests_but_compiled_are_real_code() {
        let tree = Tree::new(
            "names",
            &[
                ("src/lib.rs", "mod load_tests;\nmod tests;\n"),
                (
                    "src/load_tests.rs",
                    "use crate::tests::inner::I;\npub struct L;\n",
                ),
                ("src/tests/mod.rs", "pub mod inner;\n"),
                (
                    "src/tests/inner.rs",
                    "use crate::load_tests::L;\npub struct I;\n",
                ),
            ],
        );
        let (graph, found) = tree.cycles();
        assert_eq!(graph.files.len(), 4);
        assert_eq!(found, [["src/load_tests.rs", "src/tests/inner.rs"]]);
    }

    #[test]
    fn path_attributes_place_files_in_the_tree() {
        let tree = Tree::new(
            "path",
            &[
                ("src/lib.rs", "mod parse;\n"),
                (
                    "src/parse.rs",
                    "pub struct Raw;\nfn f() { scan::scan(); }\n#[path = \"scan.rs\"]\nmod scan;\n",
                ),
                ("src/scan.rs", "use super::Raw;\npub fn scan() {}\n"),
            ],
        );
        let (graph, found) = tree.cycles();
        assert!(found.is_empty(), "{found:?}");
        // scan.rs is parse::scan: it uses its parent; the parent's use of it is not an edge.
        assert_eq!(graph.edge_count(), 1);
    }
}
