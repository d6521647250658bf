//! The seccomp filters of the sandbox. [`install_walls`], under both mechanisms (the zygote
//! installs it on itself before it serves, so every command inherits it): no `ptrace` or
//! cross-process memory access, no io_uring, no new namespaces (`unshare`, `setns`, `clone`
//! with a namespace flag; `clone3`, whose flags seccomp cannot read, answers `ENOSYS` so libc
//! falls back to `clone`), no mounts, no `TIOCSTI`/`TIOCLINUX` (typing into a terminal), and
//! no new Unix socket (no way to a daemon's socket wherever it is bound, a container engine's,
//! an SSH agent or D-Bus; `socketpair` stays). [`install_sockets`], the Landlock fallback's
//! half: `AF_INET`/`AF_INET6` sockets are refused when the network is off (bubblewrap has a
//! network namespace for that). On x86-64, no x32 system call at all: they share the 64-bit
//! ABI's architecture value but not its numbers, so the rules above would not see them (on a
//! kernel that offers the x32 ABI they would be a way around every rule). Refusals are
//! `EPERM`. Owns only the filters.

use std::collections::BTreeMap;

use seccompiler::{
    apply_filter, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
};

/// Why a filter could not be installed.
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

/// The `clone` flags that make a namespace.
const NAMESPACE_FLAGS: [u64; 7] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
];

/// `ioctl` requests that act on a terminal as if typed at it or as its console.
#[allow(clippy::unnecessary_cast)] // libc's request type is not u64 on every target
const TERMINAL_INJECTION: [u64; 2] = [libc::TIOCSTI as u64, libc::TIOCLINUX as u64];

/// Refused always, whatever the arguments.
const ALWAYS: [i64; 16] = [
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fspick,
];

/// One condition: argument `arg` (of `len`) compared with `op` to `value`.
fn cond(
    arg: u8,
    len: SeccompCmpArgLen,
    op: SeccompCmpOp,
    value: u64,
) -> Result<SeccompRule, SeccompError> {
    let c = SeccompCondition::new(arg, len, op, value).map_err(fail)?;
    SeccompRule::new(vec![c]).map_err(fail)
}

/// Builds the filter that answers `rules` with `errno` (everything else allowed) and installs
/// it on the calling thread. `no_new_privs` must be set already.
fn apply(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> Result<(), SeccompError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(fail)?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )
    .map_err(fail)?;
    let program: BpfProgram = filter.try_into().map_err(fail)?;
    apply_filter(&program).map_err(fail)
}

/// Installs the walls every sandboxed process lives under (see the module's docs) on the
/// calling thread, setting `no_new_privs` first. Call it before any other thread starts: a
/// thread started earlier is not filtered.
pub fn install_walls() -> Result<(), SeccompError> {
    rustix::thread::set_no_new_privs(true).map_err(fail)?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for sys in ALWAYS {
        rules.insert(sys, Vec::new());
    }
    let clone = NAMESPACE_FLAGS
        .iter()
        .map(|&f| cond(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(f), f))
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_clone, clone);
    let ioctl = TERMINAL_INJECTION
        .iter()
        .map(|&r| cond(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, r))
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_ioctl, ioctl);
    // No new Unix socket: none of the host's (a daemon's `--socket PATH`, a container
    // engine's, an agent's, wherever bound) can be connected to. Pairs stay allowed.
    let unix = cond(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        libc::AF_UNIX as u64,
    )?;
    rules.insert(libc::SYS_socket, vec![unix]);
    apply(rules, libc::EPERM)?;
    refuse_x32()?;
    let clone3 = BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
    apply(clone3, libc::ENOSYS)
}

/// Refuses every x32 system call (number with bit 30 set, under the x86-64 architecture value)
/// with `EPERM`: seccompiler's rules name the 64-bit numbers only.
#[cfg(target_arch = "x86_64")]
fn refuse_x32() -> Result<(), SeccompError> {
    use seccompiler::sock_filter;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    // `struct seccomp_data`: `nr` at 0, `arch` at 4.
    const NR: u32 = 0;
    const ARCH: u32 = 4;
    const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
    let op = |code: u32, k: u32, jt: u8, jf: u8| sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let load = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let jeq = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
    let jge = libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K;
    let ret = libc::BPF_RET | libc::BPF_K;
    let program: BpfProgram = vec![
        op(load, ARCH, 0, 0),
        // Another architecture: the main filter's (it kills the process).
        op(jeq, AUDIT_ARCH_X86_64, 0, 3),
        op(load, NR, 0, 0),
        op(jge, X32_SYSCALL_BIT, 0, 1),
        op(ret, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32, 0, 0),
        op(ret, libc::SECCOMP_RET_ALLOW, 0, 0),
    ];
    apply_filter(&program).map_err(fail)
}

#[cfg(not(target_arch = "x86_64"))]
fn refuse_x32() -> Result<(), SeccompError> {
    Ok(())
}

/// Installs the Landlock fallback's socket filter on the calling thread (no other thread runs
/// in the helper). `no_new_privs` must already be set (Landlock's `restrict_self` sets it).
pub fn install_sockets(network: bool) -> Result<(), SeccompError> {
    let family = |af: i32| cond(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, af as u64);
    if network {
        return Ok(());
    }
    let socket = vec![family(libc::AF_INET)?, family(libc::AF_INET6)?];
    apply(BTreeMap::from([(libc::SYS_socket, socket)]), libc::EPERM)
}
