//! The rule that no source file grows past [`MAX_LINES`] lines (`cargo xtask test` checks it
//! with the import cycles): a file that long holds more than one job.

use std::path::Path;
use std::process::Command;

use anyhow::{Result, bail};

use crate::util::{output, workspace_root};

/// The most lines a Rust source file of the repository may have.
pub const MAX_LINES: usize = 800;

/// The tracked `.rs` files longer than `max` lines, with their lengths.
pub fn too_long(root: &Path, max: usize) -> Result<Vec<(String, usize)>> {
    let listed = output(
        Command::new("git")
            .current_dir(root)
            .args(["ls-files", "*.rs"]),
    )?;
    let mut long = Vec::new();
    for file in listed.lines() {
        // A tracked file deleted in the work tree is not the rule's business.
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            continue;
        };
        let lines = text.lines().count();
        if lines > max {
            long.push((file.to_owned(), lines));
        }
    }
    Ok(long)
}

/// Fails naming every file over [`MAX_LINES`].
pub fn check() -> Result<()> {
    let long = too_long(&workspace_root(), MAX_LINES)?;
    if long.is_empty() {
        return Ok(());
    }
    for (file, lines) in &long {
        eprintln!("xtask: {file} has {lines} lines (at most {MAX_LINES}): split it by concern");
    }
    bail!("{} source file(s) over {MAX_LINES} lines", long.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_repository_is_measured_and_a_low_limit_finds_files() {
        let root = workspace_root();
        let none = too_long(&root, usize::MAX).expect("git ls-files");
        assert!(none.is_empty());
        let some = too_long(&root, 10).expect("git ls-files");
        assert!(
            some.iter().any(|(f, _)| f == "xtask/src/file_size.rs"),
            "{some:?}"
        );
    }
}
