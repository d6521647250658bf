//! The seccomp half of the fallback: a filter the `__sandbox-exec` helper installs on itself
//! before it execs the command. New Unix sockets are refused (no way to the daemon's socket, an
//! SSH agent or D-Bus), and so are `AF_INET`/`AF_INET6` ones when the network is off, with
//! `EPERM`; io_uring and cross-process memory access always. Owns only the filter.

use std::collections::BTreeMap;

use seccompiler::{
    apply_filter, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
};

/// Why the filter could not be installed.
#[derive(Debug)]
pub struct SeccompError(pub String);

impl std::fmt::Display for SeccompError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "seccomp: {}", self.0)
    }
}

impl std::error::Error for SeccompError {}

fn fail(e: impl std::fmt::Display) -> SeccompError {
    SeccompError(e.to_string())
}

/// Installs the filter on the calling thread (no other thread runs in the helper).
/// `no_new_privs` must already be set (Landlock's `restrict_self` sets it).
pub fn install(network: bool) -> Result<(), SeccompError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(fail)?;
    let family = |af: i32| -> Result<SeccompRule, SeccompError> {
        let cond = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, af as u64)
            .map_err(fail)?;
        SeccompRule::new(vec![cond]).map_err(fail)
    };
    let mut socket = vec![family(libc::AF_UNIX)?];
    if !network {
        socket.push(family(libc::AF_INET)?);
        socket.push(family(libc::AF_INET6)?);
    }
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_socket, socket);
    for always in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
    ] {
        rules.insert(always, Vec::new());
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(fail)?;
    let program: BpfProgram = filter.try_into().map_err(fail)?;
    apply_filter(&program).map_err(fail)
}
