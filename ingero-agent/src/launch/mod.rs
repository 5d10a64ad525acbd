//! Starting a user's command with NVTX capture on: `ingero run -- CMD` and
//! `sudo ingero trace -- CMD`.
//!
//! Both give the command the same environment ([`nvtx_env`]): `NVTX_INJECTION64_PATH` pointing
//! at the injection library, so the program's NVTX calls reach the agent, and
//! `INGERO_NVTX_SOCKET` naming the socket the library connects to. A value the user (or nsys)
//! already set is never replaced: NVTX loads one tool per process. `trace -- CMD` also runs
//! the command as the user who ran sudo ([`user`]).

pub mod user;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use ingero_annotate::socket_path::{
    NVTX_INJECTION_ENV, NVTX_LIBRARY_ENV, NVTX_LIBRARY_NAME, NVTX_SOCKET_ENV,
};

/// What the command's environment gets, and what to tell the user about it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NvtxEnv {
    /// Variables to set in the command's environment.
    pub vars: Vec<(OsString, OsString)>,
    /// Lines for stderr (each without the `ingero: ` prefix).
    pub notices: Vec<String>,
}

/// The NVTX environment for a command, from what is found and what is already set.
///
/// `library`: the injection library to use (`None`: none found); `socket`: the NVTX socket the
/// agent listens on; `current`: a variable's value in the environment the command inherits.
pub fn nvtx_env(
    library: Option<&Path>,
    socket: &Path,
    current: impl Fn(&str) -> Option<OsString>,
) -> NvtxEnv {
    let is_set = |name: &str| current(name).filter(|v| !v.is_empty());
    let mut env = NvtxEnv::default();
    match (is_set(NVTX_INJECTION_ENV), library) {
        (Some(other), _) => env.notices.push(format!(
            "{NVTX_INJECTION_ENV} is already set ({}): leaving it, NVTX ranges go to that tool",
            other.to_string_lossy()
        )),
        (None, Some(library)) => {
            // NVTX dlopens the value as given: a relative path would be looked up in the
            // library search path, or against a working directory the program may change.
            let absolute = std::path::absolute(library).unwrap_or_else(|_| library.to_path_buf());
            if !absolute.is_file() {
                env.notices.push(format!(
                    "the NVTX injection library {} does not exist: NVTX ranges will not be \
                     captured",
                    absolute.display()
                ));
            }
            env.vars
                .push((NVTX_INJECTION_ENV.into(), absolute.into_os_string()));
        }
        (None, None) => env.notices.push(format!(
            "no NVTX injection library found (set {NVTX_LIBRARY_ENV}, or build {NVTX_LIBRARY_NAME} \
             with `cargo build --release`): running without NVTX capture"
        )),
    }
    if is_set(NVTX_SOCKET_ENV).is_none() {
        env.vars
            .push((NVTX_SOCKET_ENV.into(), socket.as_os_str().to_owned()));
    }
    env
}

/// [`nvtx_env`] against this process's environment.
pub fn nvtx_env_here(library: Option<PathBuf>, socket: &Path) -> NvtxEnv {
    nvtx_env(library.as_deref(), socket, |name| std::env::var_os(name))
}

/// The shell's exit code for a command that could not be started: 127 when it does not exist,
/// 126 when it exists but cannot be executed.
pub fn exec_failure_code(error: &std::io::Error) -> u8 {
    if error.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}

/// The command as one string for messages (`python train.py --lr 3`).
pub fn display_command(program: &OsStr, args: &[OsString]) -> String {
    std::iter::once(program)
        .chain(args.iter().map(OsString::as_os_str))
        .map(OsStr::to_string_lossy)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    fn var<'a>(env: &'a NvtxEnv, name: &str) -> Option<&'a OsStr> {
        env.vars
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_os_str())
    }

    #[test]
    fn sets_the_library_and_the_socket_when_unset() {
        let lib = std::env::current_exe().expect("exe");
        let env = nvtx_env(Some(&lib), Path::new("/run/ingero/nvtx.sock"), env_of(&[]));
        assert_eq!(var(&env, NVTX_INJECTION_ENV), Some(lib.as_os_str()));
        assert_eq!(
            var(&env, NVTX_SOCKET_ENV),
            Some(OsStr::new("/run/ingero/nvtx.sock"))
        );
        assert!(env.notices.is_empty(), "{:?}", env.notices);
    }

    #[test]
    fn a_relative_library_becomes_absolute_and_a_missing_one_is_reported() {
        let env = nvtx_env(
            Some(Path::new("lib/missing.so")),
            Path::new("/s"),
            env_of(&[]),
        );
        let set = PathBuf::from(var(&env, NVTX_INJECTION_ENV).expect("set"));
        assert!(
            set.is_absolute() && set.ends_with("lib/missing.so"),
            "{set:?}"
        );
        assert!(
            env.notices[0].contains("does not exist"),
            "{:?}",
            env.notices
        );
    }

    #[test]
    fn never_replaces_a_value_already_set() {
        let env = nvtx_env(
            Some(Path::new("/x/libingero_nvtx.so")),
            Path::new("/s"),
            env_of(&[
                (NVTX_INJECTION_ENV, "/nsys/libToolsInjection64.so"),
                (NVTX_SOCKET_ENV, "/mine.sock"),
            ]),
        );
        assert!(env.vars.is_empty(), "{:?}", env.vars);
        assert_eq!(
            env.notices,
            [
                "NVTX_INJECTION64_PATH is already set (/nsys/libToolsInjection64.so): leaving it, \
              NVTX ranges go to that tool"
            ]
        );
    }

    #[test]
    fn an_empty_value_counts_as_unset_and_no_library_is_said() {
        let env = nvtx_env(None, Path::new("/s"), env_of(&[(NVTX_INJECTION_ENV, "")]));
        assert_eq!(var(&env, NVTX_INJECTION_ENV), None);
        assert_eq!(var(&env, NVTX_SOCKET_ENV), Some(OsStr::new("/s")));
        assert!(env.notices[0].starts_with("no NVTX injection library found"));
    }

    #[test]
    fn exit_codes_follow_the_shell() {
        let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert_eq!(exec_failure_code(&missing), 127);
        assert_eq!(exec_failure_code(&denied), 126);
        assert_eq!(
            display_command(OsStr::new("sh"), &["-c".into(), "exit 7".into()]),
            "sh -c exit 7"
        );
    }
}
