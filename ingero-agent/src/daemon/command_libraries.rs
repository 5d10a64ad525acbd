//! The CUDA libraries `trace -- CMD` looks for before it starts the command, beyond those the
//! host's install places hold: a program loads its libraries in its first milliseconds (and
//! registers its kernels as it does), before the first rescan could find them mapped.
//!
//! Looked at, as the command will see them:
//! - the program itself, when it has the runtime linked in (`-cudart static`);
//! - its own installation, when it is `<prefix>/bin/NAME`: `<prefix>/lib` and the
//!   `site-packages` of a virtual environment or conda environment in any place;
//! - the directories of its `LD_LIBRARY_PATH`.
//!
//! `env VAR=VALUE … PROGRAM` (how a command gets `LD_LIBRARY_PATH` past sudo, which drops it)
//! is looked through to the program it runs, with its variables.

use std::ffi::{OsStr, OsString};
use std::os::unix::{ffi::OsStrExt, fs::PermissionsExt};
use std::path::{Path, PathBuf};

use crate::discover::{
    LibraryFile, embedded,
    libraries::libraries_matching,
    places::{library_dir_patterns, program_patterns},
};

/// The libraries to attach before the command `program args` starts.
pub(super) fn command_libraries(program: &OsStr, args: &[OsString]) -> Vec<LibraryFile> {
    let (program, env) = through_env(program, args);
    let var = |name: &str| -> Option<OsString> {
        match env.iter().rev().find(|(k, _)| k == name) {
            Some((_, value)) => Some(value.clone()),
            None => std::env::var_os(name),
        }
    };
    let Some(path) = program_path(program, var("PATH").as_deref()) else {
        return Vec::new();
    };
    let mut patterns = program_patterns(&path);
    if let Some(dirs) = var("LD_LIBRARY_PATH") {
        for dir in std::env::split_paths(&dirs).filter(|d| d.is_absolute()) {
            patterns.extend(library_dir_patterns(&dir));
        }
    }
    let mut found = libraries_matching(&patterns);
    match embedded::linked_runtime_at(&path) {
        Ok(linked) => found.extend(linked),
        Err(e) => tracing::debug!("{}: no linked runtime read: {e:#}", path.display()),
    }
    found
}

/// The program `env` runs and the variables it sets, for `env [-i] [VAR=VALUE…] PROGRAM …`;
/// any other command (or an `env` option not understood) is itself, with no variables.
fn through_env<'a>(
    program: &'a OsStr,
    args: &'a [OsString],
) -> (&'a OsStr, Vec<(String, OsString)>) {
    let is_env = Path::new(program).file_name().is_some_and(|n| n == "env");
    if !is_env {
        return (program, Vec::new());
    }
    let mut env = Vec::new();
    for arg in args {
        let bytes = arg.as_bytes();
        if bytes == b"-i" || bytes == b"--ignore-environment" {
            continue;
        }
        if bytes.starts_with(b"-") {
            break;
        }
        match bytes.iter().position(|&b| b == b'=') {
            Some(at) => env.push((
                String::from_utf8_lossy(&bytes[..at]).into_owned(),
                OsStr::from_bytes(&bytes[at + 1..]).to_os_string(),
            )),
            None => return (arg, env),
        }
    }
    (program, Vec::new())
}

/// Where `program` is: itself when it names a path, else the first executable file of that
/// name in `path_var`'s directories (as `execvp` looks).
fn program_path(program: &OsStr, path_var: Option<&OsStr>) -> Option<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(program));
    }
    std::env::split_paths(path_var?)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn env_is_looked_through_to_the_program_with_its_variables() {
        let args = os(&[
            "-i",
            "LD_LIBRARY_PATH=/opt/cuda/lib",
            "A=b=c",
            "./train",
            "--x",
        ]);
        let (program, env) = through_env(OsStr::new("/usr/bin/env"), &args);
        assert_eq!(program, "./train");
        assert_eq!(
            env,
            [
                (
                    "LD_LIBRARY_PATH".to_string(),
                    OsString::from("/opt/cuda/lib")
                ),
                ("A".to_string(), OsString::from("b=c")),
            ]
        );
        // Not env, or an env option this does not follow: the command as it is.
        let plain = os(&["A=b", "x"]);
        let (program, env) = through_env(OsStr::new("python3"), &plain);
        assert_eq!((program, env.len()), (OsStr::new("python3"), 0));
        let unset = os(&["-u", "HOME", "./train"]);
        let (program, env) = through_env(OsStr::new("env"), &unset);
        assert_eq!((program, env.len()), (OsStr::new("env"), 0));
    }

    #[test]
    fn a_program_is_found_along_path_as_execvp_finds_it() {
        let sh = program_path(
            OsStr::new("sh"),
            Some(OsStr::new("/nonexistent:/bin:/usr/bin")),
        );
        assert!(sh.is_some_and(|p| p.ends_with("sh")));
        assert_eq!(
            program_path(OsStr::new("./x"), None),
            Some(PathBuf::from("./x"))
        );
        assert_eq!(
            program_path(OsStr::new("no-such-program"), Some(OsStr::new("/bin"))),
            None
        );
    }

    #[test]
    fn the_libraries_of_the_commands_ld_library_path_are_found() {
        let dir = std::env::temp_dir().join(format!("ingero-cmdlibs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        // A copy of this test binary under the runtime's name: found by name.
        let copy = dir.join("libcudart.so.12");
        std::fs::copy(std::env::current_exe().expect("exe"), &copy).expect("copy");
        let ld = format!("LD_LIBRARY_PATH={}", dir.display());
        let found = command_libraries(OsStr::new("env"), &os(&[&ld, "sh", "-c", "true"]));
        assert!(found.iter().any(|l| l.path == copy), "{found:?}");
        let without = command_libraries(OsStr::new("sh"), &os(&["-c", "true"]));
        assert!(without.iter().all(|l| l.path != copy), "{without:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
