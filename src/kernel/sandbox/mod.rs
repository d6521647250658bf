//! The sandbox of the processes a model starts (`DESIGN.md` §14): which mechanism runs them
//! (bubblewrap, else Landlock + seccomp through the `__sandbox-exec` helper, else none), the
//! argv that launches the session's [`zygote`] (or, for an embedder that is not keel, one
//! command) under the policy, and the helper's own half. Owns the choice of mechanism (probed
//! once per process); the in-process checks are in [`policy`]. It never reads settings: the
//! caller builds the [`SandboxPolicy`].

pub mod beneath;
pub mod bwrap;
pub mod caps;
pub mod forward;
pub mod gitdirs;
pub mod gitwalk;
pub mod inside;
pub mod known;
pub mod landlock;
pub mod limits;
pub mod network;
pub mod policy;
pub mod proxy;
pub mod seccomp;
pub mod selftest;
pub mod watch;
pub mod zygote;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

pub use network::{HostPattern, NetViolation, Network};
pub use policy::{Places, SandboxMode, SandboxPolicy, WriteDenial};

/// What runs tool processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mechanism {
    /// The user chose `--sandbox off`.
    Off,
    /// bubblewrap (exec'd around the session's zygote).
    Bwrap(bwrap::Bwrap),
    /// Landlock and seccomp, applied by keel's `__sandbox-exec` helper (`exe`) to itself.
    Landlock { exe: PathBuf },
    /// Nothing works here: tool processes are refused.
    Unavailable,
    /// Nothing works here and `sandbox.failIfUnavailable` is false: tool processes run
    /// unsandboxed (the file tools still check the policy).
    Unenforced,
}

impl Mechanism {
    pub fn name(&self) -> &'static str {
        match self {
            Mechanism::Off => "off",
            Mechanism::Bwrap(_) => "bubblewrap",
            Mechanism::Landlock { .. } => "landlock",
            Mechanism::Unavailable => "unavailable",
            Mechanism::Unenforced => "none",
        }
    }
}

/// Why a command could not be started in the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxErrorKind {
    /// No mechanism works here and the user did not choose `off`.
    Unavailable,
    /// The sandbox could not be prepared (its private temp dir).
    Setup,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxError {
    pub kind: SandboxErrorKind,
    pub message: String,
}

impl std::fmt::Display for SandboxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SandboxError {}

/// How to start one sandboxed command: the program, its arguments, variables to set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(String, PathBuf)>,
}

/// The policy in force and the mechanism that enforces it, for one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    pub policy: SandboxPolicy,
    pub mechanism: Mechanism,
    /// `sandbox.allowEscalation`: `Some(true)`, an allow rule may run an escalated call
    /// without asking; `Some(false)`, escalation is refused; `None`, it always asks.
    pub allow_escalation: Option<bool>,
    /// The network-allowlist proxy, started on first use ([`proxy`]).
    pub proxy: proxy::ProxySlot,
    /// The zygote `bash` commands start in, started on first use ([`zygote`]).
    pub zygote: zygote::ZygoteSlot,
    /// What the zygote's commands may use together ([`limits`]).
    pub limits: limits::Limits,
}

/// What the settings and flags ask of a session's sandbox (`DESIGN.md` §14).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    pub mode: SandboxMode,
    pub network: Network,
    /// Writable roots besides the cwd (`permissions.additionalDirectories`,
    /// `sandbox.filesystem.allowWrite`).
    pub allow_write: Vec<PathBuf>,
    /// Unreadable besides the default secrets (`sandbox.filesystem.denyRead`).
    pub deny_read: Vec<PathBuf>,
    /// Readable again under a denied path (`sandbox.filesystem.allowRead`).
    pub allow_read: Vec<PathBuf>,
    /// `sandbox.bwrapPath`: the bubblewrap to use instead of the one on `PATH`.
    pub bwrap_path: Option<PathBuf>,
    /// `sandbox.failIfUnavailable`: refuse commands when no mechanism works (else run them
    /// unsandboxed, with a warning).
    pub fail_if_unavailable: bool,
    /// `sandbox.allowEscalation` (see [`Sandbox::allow_escalation`]).
    pub allow_escalation: Option<bool>,
    /// `sandbox.limits`: processes and memory of the session's commands.
    pub limits: limits::Limits,
}

impl Default for SandboxConfig {
    fn default() -> SandboxConfig {
        SandboxConfig {
            mode: SandboxMode::WorkspaceWrite,
            network: Network::Off,
            allow_write: Vec::new(),
            deny_read: Vec::new(),
            allow_read: Vec::new(),
            bwrap_path: None,
            fail_if_unavailable: true,
            allow_escalation: None,
            limits: limits::Limits::default(),
        }
    }
}

/// Which mechanism to use: the best one that works, or one forced (`KEEL_SANDBOX_MECHANISM`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Auto,
    Bwrap,
    Landlock,
    None,
}

impl Sandbox {
    /// No sandbox: what `--sandbox off` gives (and unit tests of the tools).
    pub fn off(cwd: &Path) -> Sandbox {
        let places = Places {
            cwd: cwd.to_path_buf(),
            ..Places::default()
        };
        Sandbox {
            policy: SandboxPolicy::new(SandboxMode::Off, &places, &[], &[], &[], true),
            mechanism: Mechanism::Off,
            allow_escalation: None,
            proxy: Default::default(),
            zygote: Default::default(),
            limits: limits::Limits::default(),
        }
    }

    /// This sandbox with its protected paths writable: for a `write` or `edit` of one that the
    /// user approved (the rest of the policy still holds).
    pub fn unprotected(&self) -> Sandbox {
        let mut s = self.clone();
        s.policy.unprotected = true;
        s
    }

    /// `workspace-write` in `cwd` with the best mechanism here, knowing no home (an embedder's
    /// default; keel's own sessions use [`Sandbox::for_session`]).
    pub fn workspace_write(cwd: &Path) -> Sandbox {
        let places = Places {
            cwd: cwd.to_path_buf(),
            ..Places::default()
        };
        let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &places, &[], &[], &[], false);
        Sandbox::new(policy, Choice::Auto, bwrap::find(None, cwd), None)
    }

    /// `policy` enforced by the mechanism `choice` names, or the best one that works here
    /// (`bwrap`: the bubblewrap to try; `exe`: keel, for the Landlock helper).
    pub fn new(
        policy: SandboxPolicy,
        choice: Choice,
        bwrap: Option<PathBuf>,
        exe: Option<PathBuf>,
    ) -> Sandbox {
        Sandbox::started(policy, choice, bwrap, exe, limits::Limits::default(), None)
    }

    /// [`Sandbox::new`], and with `start` (the session's cwd and private `/tmp`) the session's
    /// zygote started at once. Under a bubblewrap not yet probed in this process, that start
    /// (with every argument the zygote gets) is the probe: only when the zygote does not come
    /// up is bubblewrap probed as [`Sandbox::new`] does it (to run it without `--proc`, or to
    /// fall back to Landlock or refuse, with the same messages). `limits`: the zygote's.
    fn started(
        policy: SandboxPolicy,
        choice: Choice,
        bwrap: Option<PathBuf>,
        exe: Option<PathBuf>,
        limits: limits::Limits,
        start: Option<(&Path, &Path)>,
    ) -> Sandbox {
        let trial = match (start, &bwrap, &exe) {
            (Some(at), Some(path), Some(_))
                if policy.mode != SandboxMode::Off
                    && matches!(choice, Choice::Auto | Choice::Bwrap)
                    && !probe_known(path) =>
            {
                Some((at, path))
            }
            _ => None,
        };
        // The private /tmp is named, not yet made: the probe's zygote binds it.
        let trial =
            trial.filter(|((_, tmp), _)| crate::kernel::private::create_dir_all(tmp).is_ok());
        if let Some(((cwd, tmp), path)) = trial {
            let tried = bwrap::Bwrap {
                path: path.clone(),
                proc_mount: true,
            };
            let sandbox = Sandbox {
                policy: policy.clone(),
                mechanism: Mechanism::Bwrap(tried.clone()),
                allow_escalation: None,
                proxy: Default::default(),
                zygote: zygote::ZygoteSlot::new(exe.clone()),
                limits,
            };
            if sandbox.start_as_probe(cwd, tmp) {
                probe_cache().insert(path.clone(), Some(tried));
                return sandbox;
            }
        }
        let bwrap = || bwrap.as_deref().and_then(probed);
        let landlock = || {
            exe.clone()
                .filter(|_| landlock::available())
                .map(|exe| Mechanism::Landlock { exe })
        };
        let mechanism = match (policy.mode, choice) {
            (SandboxMode::Off, _) => Some(Mechanism::Off),
            (_, Choice::None) => None,
            (_, Choice::Bwrap) => bwrap().map(Mechanism::Bwrap),
            (_, Choice::Landlock) => landlock(),
            (_, Choice::Auto) => bwrap().map(Mechanism::Bwrap).or_else(landlock),
        };
        Sandbox {
            policy,
            mechanism: mechanism.unwrap_or(Mechanism::Unavailable),
            allow_escalation: None,
            proxy: Default::default(),
            zygote: zygote::ZygoteSlot::new(exe),
            limits,
        }
    }

    /// A session's sandbox from what the settings and flags ask (`config`, its paths absolute
    /// or relative to `cwd`), the session's `cwd`, `$KEEL_HOME` and variables (`HOME`, `PATH`,
    /// `XDG_RUNTIME_DIR`, `KEEL_SOCKET`, `SSH_AUTH_SOCK`, `KEEL_SANDBOX_MECHANISM`). A warning
    /// goes to `warnings` when it is off, unavailable or not all of it is built.
    pub fn for_session(
        config: &SandboxConfig,
        cwd: &Path,
        keel_home: &Path,
        vars: &BTreeMap<String, String>,
        warnings: &mut Vec<String>,
    ) -> Sandbox {
        Sandbox::for_session_at(config, cwd, keel_home, vars, warnings, None, None)
    }

    /// [`Sandbox::for_session`] for a session whose `bash` may run: `tmp` is its private
    /// `/tmp`. A bubblewrap no earlier session found out about is probed by starting the zygote
    /// now (see [`Sandbox::new`]'s `started`); one known to work starts nothing until the model
    /// first calls `bash` (the turn warms it then: `kernel::turn::assemble`).
    /// `spill`: the session's own spill directory, the one part of `$KEEL_HOME` readable.
    #[allow(clippy::too_many_arguments)]
    pub fn for_session_at(
        config: &SandboxConfig,
        cwd: &Path,
        keel_home: &Path,
        vars: &BTreeMap<String, String>,
        warnings: &mut Vec<String>,
        tmp: Option<&Path>,
        spill: Option<&Path>,
    ) -> Sandbox {
        let places = places_of(cwd, keel_home, vars);
        warnings.extend(home_in_workspace(config, &places));
        // This session's spill files stay readable (another session's, and its private /tmp,
        // do not: issue 43, point 11).
        let mut allow_read: Vec<PathBuf> = spill.iter().map(|s| s.to_path_buf()).collect();
        allow_read.extend(config.allow_read.iter().cloned());
        let network = config.network == Network::On || config.mode == SandboxMode::Off;
        let policy = SandboxPolicy::new(
            config.mode,
            &places,
            &config.allow_write,
            &config.deny_read,
            &allow_read,
            network,
        );
        let choice = match vars.get("KEEL_SANDBOX_MECHANISM").map(String::as_str) {
            Some("bwrap" | "bubblewrap") => Choice::Bwrap,
            Some("landlock") => Choice::Landlock,
            Some("none") => Choice::None,
            _ => Choice::Auto,
        };
        let bwrap = match &config.bwrap_path {
            Some(p) => Some(cwd.join(p)),
            None => bwrap::find(vars.get("PATH").map(String::as_str), cwd),
        };
        // The network allowlist's zygote starts with its proxy, on first use.
        let start = tmp
            .filter(|_| !matches!(config.network, Network::Allow(_)))
            .map(|tmp| (cwd, tmp));
        let exe = std::env::current_exe().ok();
        // What an earlier process found out about this bubblewrap spares the probe (known.rs).
        let unprobed = bwrap.as_deref().filter(|p| !probe_known(p));
        let findings = unprobed.and_then(|p| known::load(keel_home, p));
        if let (Some(p), Some(found)) = (unprobed, &findings) {
            probe_cache().insert(p.to_path_buf(), found.clone());
        }
        let mut sandbox =
            Sandbox::started(policy, choice, bwrap.clone(), exe, config.limits, start);
        match (unprobed, &findings) {
            // Probed now: written down for the next session.
            (Some(p), None) => {
                if let Some(found) = probe_cache().get(p) {
                    known::save(keel_home, p, found.as_ref());
                }
            }
            // Known to work: nothing starts now. Its zygote starts when the model first calls
            // `bash` (a run that runs no command starts no process).
            (Some(_), Some(Some(_))) => {
                if let (Mechanism::Bwrap(_), Some(_)) = (&sandbox.mechanism, start) {
                    sandbox.zygote.trusting(known::file(keel_home));
                }
            }
            _ => {}
        }
        if sandbox.mechanism == Mechanism::Unavailable && !config.fail_if_unavailable {
            sandbox.mechanism = Mechanism::Unenforced;
        }
        sandbox.allow_escalation = config.allow_escalation;
        warnings.extend(sandbox.warning());
        if let Network::Allow(_) = &config.network {
            sandbox = sandbox.with_network(Some(config.network.clone()), vars, warnings);
        }
        sandbox
    }

    /// The startup warning when tool processes run without a sandbox or cannot run, or when
    /// the process limit does not bind (root without cgroups).
    pub fn warning(&self) -> Option<String> {
        match self.mechanism {
            Mechanism::Off => {
                Some("the sandbox is off: commands the model runs have your full access".into())
            }
            Mechanism::Unavailable => Some(unavailable_message()),
            Mechanism::Unenforced => Some(
                "no sandbox works here (bubblewrap is missing or cannot create namespaces, and \
                 Landlock is not available) and sandbox.failIfUnavailable is false: commands the \
                 model runs have your full access. Install bubblewrap (apt-get install \
                 bubblewrap) to sandbox them"
                    .into(),
            ),
            Mechanism::Bwrap(_) | Mechanism::Landlock { .. } => limits::warning(&self.limits),
        }
    }

    /// How to run `shell -c command` in `cwd` under the policy, in a sandbox of its own; `tmp`
    /// is the session's private directory that becomes `/tmp` (bubblewrap) or `$TMPDIR`
    /// (Landlock). `None`: run it as is. keel runs the model's commands in the zygote instead
    /// ([`Sandbox::spawn`]); this is for a command with a stdin of its own (a hook) and for
    /// an embedder whose executable is not keel. Under bubblewrap, when keel is the
    /// executable, the command starts under `keel __sandbox-walls`, so it has the seccomp
    /// walls a zygote's command has (the Landlock helper installs them itself).
    pub fn launch(
        &self,
        shell: &str,
        command: &str,
        cwd: &Path,
        tmp: &Path,
    ) -> Result<Option<Launch>, SandboxError> {
        let mut tail: Vec<OsString> = vec![shell.into(), "-c".into(), command.into()];
        let exe = match self.mechanism {
            Mechanism::Bwrap(_) => self.zygote.exe().map(Path::to_path_buf),
            _ => None,
        };
        if exe.is_some() {
            let walls = [proxy::INSIDE_EXE, "__sandbox-walls", "--"];
            tail.splice(0..0, walls.iter().map(OsString::from));
        }
        self.launch_argv(tail, cwd, tmp, exe.as_deref())
    }

    /// How to run `argv` in `cwd` under the policy (see [`Sandbox::launch`]); `bind_exe`:
    /// keel's executable, bound inside bubblewrap at [`proxy::INSIDE_EXE`].
    fn launch_argv(
        &self,
        argv: Vec<OsString>,
        cwd: &Path,
        tmp: &Path,
        bind_exe: Option<&Path>,
    ) -> Result<Option<Launch>, SandboxError> {
        let tail = |mut args: Vec<OsString>| {
            args.push("--".into());
            args.extend(argv.iter().cloned());
            args
        };
        match &self.mechanism {
            Mechanism::Off | Mechanism::Unenforced => Ok(None),
            Mechanism::Unavailable => Err(SandboxError {
                kind: SandboxErrorKind::Unavailable,
                message: unavailable_message(),
            }),
            Mechanism::Bwrap(b) => {
                let mut args = bwrap::args(b, &self.policy, tmp, cwd);
                if let Some(exe) = bind_exe {
                    args.extend(["--ro-bind".into(), exe.into(), proxy::INSIDE_EXE.into()]);
                }
                Ok(Some(Launch {
                    program: b.path.clone(),
                    args: tail(self.proxy_args(args)?),
                    env: Vec::new(),
                }))
            }
            Mechanism::Landlock { exe } => {
                let policy = serde_json::to_string(&self.policy).map_err(|e| SandboxError {
                    kind: SandboxErrorKind::Setup,
                    message: e.to_string(),
                })?;
                let args = vec![
                    "__sandbox-exec".into(),
                    "--policy".into(),
                    policy.into(),
                    "--tmp".into(),
                    tmp.into(),
                ];
                Ok(Some(Launch {
                    program: exe.clone(),
                    args: tail(args),
                    env: vec![("TMPDIR".into(), tmp.to_path_buf())],
                }))
            }
        }
    }

    /// What the sandbox stopped when a sandboxed command failed in a way it explains (a
    /// read-only file system, a denied path, no network), naming the path when the output
    /// does (a relative one is taken against `cwd`).
    pub fn explain(&self, output: &str, cwd: &Path) -> Option<Violation> {
        if matches!(
            self.mechanism,
            Mechanism::Off | Mechanism::Unavailable | Mechanism::Unenforced
        ) {
            return None;
        }
        if let Some(v) = output.lines().find_map(|l| self.path_refusal(l, cwd)) {
            return Some(v);
        }
        const NET: &[&str] = &[
            "Network is unreachable",
            "Could not resolve host",
            "Temporary failure in name resolution",
        ];
        let refused_socket = output
            .lines()
            .any(|l| l.contains("/dev/tcp/") && l.contains("Operation not permitted"));
        if !self.policy.network && (refused_socket || NET.iter().any(|n| output.contains(n))) {
            return Some(Violation {
                reason: ViolationReason::NetworkOff,
                path: None,
                host: None,
                shown: None,
            });
        }
        None
    }

    /// The line the model reads after the output of a command the sandbox stopped.
    pub fn note(&self, v: &Violation) -> String {
        let mode = self.policy.mode.name();
        let path = v.path.as_deref().map(Path::display);
        let host = v.host.as_deref().unwrap_or("the host");
        let why = match (v.reason, path) {
            (ViolationReason::ReadDenied, Some(p)) => format!("reading {p} is refused"),
            (ViolationReason::Protected, Some(p)) => format!("{p} is read-only (protected)"),
            (ViolationReason::NetworkOff, _) => "the network is off".to_string(),
            (ViolationReason::NetworkNotAllowed, _) => {
                format!("{host} is not in the network allowlist")
            }
            (ViolationReason::NetworkPortNotAllowed, _) => format!(
                "{host} is not in the network allowlist (a name is allowed on ports 80 and 443 \
                 unless its entry names a port)"
            ),
            (ViolationReason::NetworkHostMismatch, _) => match &v.shown {
                Some(named) => format!("{host}: the request named {named}"),
                None => format!(
                    "{host}: the connection did not name it (no Host header, a TLS \
                     ClientHello without a server name, or not TLS on port 443)"
                ),
            },
            _ => {
                let shown = v
                    .shown
                    .as_ref()
                    .map(|p| format!(" ({p})"))
                    .unwrap_or_default();
                let instead = v
                    .path
                    .as_deref()
                    .and_then(|p| self.policy.worktree_instead(p))
                    .map(|w| {
                        format!(
                            "; this session works in the worktree {}: write there instead",
                            w.display()
                        )
                    })
                    .unwrap_or_default();
                format!("writing outside the writable roots{shown} is refused{instead}")
            }
        };
        format!("[sandbox ({mode}): {why}]")
    }

    /// Whether Landlock refused listing `p` (a directory that holds a denied path: Landlock
    /// only grants, so such a directory cannot be read), which is a read, not a write.
    fn unlistable(&self, p: &Path, marker: &str) -> bool {
        matches!(self.mechanism, Mechanism::Landlock { .. })
            && marker == "Permission denied"
            && p.is_dir()
            && self
                .policy
                .deny_read
                .iter()
                .any(|d| d != p && d.starts_with(p))
    }

    /// What the sandbox refused, if `line` is an error about a path it stopped.
    fn path_refusal(&self, line: &str, cwd: &Path) -> Option<Violation> {
        let marker = ["Read-only file system", "Permission denied"]
            .into_iter()
            .find(|m| line.contains(m))?;
        let path = quoted_path(line, marker);
        let real = path.map(|p| policy::real(&cwd.join(p)));
        let found = |reason, path: Option<PathBuf>| {
            Some(Violation {
                reason,
                path,
                host: None,
                shown: quoted_path(line, marker).map(str::to_string),
            })
        };
        if let Some(p) = real.as_deref() {
            if self.policy.read_denied(p).is_some() || self.unlistable(p, marker) {
                return found(ViolationReason::ReadDenied, Some(p.to_path_buf()));
            }
        }
        match real.as_deref().and_then(|p| self.policy.write_denied(p)) {
            Some(WriteDenial::Protected(p)) => found(ViolationReason::Protected, Some(p)),
            Some(_) => found(ViolationReason::OutsideWritableRoots, real),
            None if marker.starts_with("Read-only") => {
                found(ViolationReason::OutsideWritableRoots, real)
            }
            None => None,
        }
    }
}

/// What the sandbox stopped a command from doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub reason: ViolationReason,
    /// The path refused (real: symlinks and `..` resolved), when the output names one.
    pub path: Option<PathBuf>,
    /// The host refused, when known (the network allowlist's proxy names it).
    pub host: Option<String>,
    /// The path as the command's output wrote it; for a host mismatch, the other host the
    /// request named.
    shown: Option<String>,
}

impl Violation {
    /// What the allowlist's proxy refused (`host:port`).
    pub fn network(v: &NetViolation) -> Violation {
        use network::ViolationReason as Net;
        let reason = match v.reason {
            Net::NotAllowed | Net::PrivateAddress => ViolationReason::NetworkNotAllowed,
            Net::PortNotAllowed => ViolationReason::NetworkPortNotAllowed,
            Net::HostMismatch => ViolationReason::NetworkHostMismatch,
        };
        Violation {
            reason,
            path: None,
            host: Some(format!("{}:{}", v.host, v.port)),
            shown: v.named.clone(),
        }
    }
}

/// Why the sandbox stopped a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViolationReason {
    /// Reading a secret or a `denyRead` path.
    ReadDenied,
    /// Writing a protected path inside a writable root (`.git/hooks`, `.keel`, …).
    Protected,
    /// Writing outside the writable roots (or anywhere, in `read-only`).
    OutsideWritableRoots,
    /// Reaching the network while it is off.
    NetworkOff,
    /// Reaching a host the network allowlist does not let through (or a name allowed only by
    /// a `*.` entry that resolves to a non-public address).
    NetworkNotAllowed,
    /// Reaching an allowed host on a port its allowlist entry does not name.
    NetworkPortNotAllowed,
    /// A request to an allowed host that named another (its `Host` header or TLS server
    /// name), or none where one is required.
    NetworkHostMismatch,
}

impl ViolationReason {
    /// The word on the wire (`sandbox_violation`'s `reason`).
    pub fn word(self) -> &'static str {
        match self {
            ViolationReason::ReadDenied => "read_denied",
            ViolationReason::Protected => "protected",
            ViolationReason::OutsideWritableRoots => "outside_writable_roots",
            ViolationReason::NetworkOff => "network_off",
            ViolationReason::NetworkNotAllowed => "network_not_allowed",
            ViolationReason::NetworkPortNotAllowed => "network_port_not_allowed",
            ViolationReason::NetworkHostMismatch => "network_host_mismatch",
        }
    }
}

/// The places of a session in `cwd` (its home, runtime directories and sockets from `vars`).
fn places_of(cwd: &Path, keel_home: &Path, vars: &BTreeMap<String, String>) -> Places {
    let var = |k: &str| vars.get(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let dir_of = |k: &str| var(k).and_then(|p| p.parent().map(Path::to_path_buf));
    // `unix:///path` in DOCKER_HOST or CONTAINER_HOST: that socket.
    let unix = |k: &str| {
        let v = vars.get(k)?;
        v.strip_prefix("unix://").map(PathBuf::from)
    };
    let home = var("HOME");
    let mut runtime: Vec<PathBuf> = [
        var("XDG_RUNTIME_DIR"),
        dir_of("KEEL_SOCKET"),
        dir_of("SSH_AUTH_SOCK"),
        unix("DOCKER_HOST"),
        unix("CONTAINER_HOST"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if let Some(home) = &home {
        runtime.extend(CONTAINER_ENGINES.iter().map(|p| home.join(p)));
    }
    // The password database's home, when HOME names another place.
    let account_home = nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.dir)
        .filter(|d| d.is_absolute() && Some(d) != home.as_ref());
    Places {
        cwd: cwd.to_path_buf(),
        home,
        account_home,
        keel_home: Some(keel_home.to_path_buf()),
        runtime,
    }
}

/// The home directory (`$HOME`, or the account's) that the session's directory is or holds,
/// when the sandbox lets the model write that directory: everything in it but the secrets and
/// [`policy::HOME_PROTECTED`] is then the model's to write. A run nobody watches is refused
/// then (unless the user said so); a watched one is warned.
pub fn home_held(
    config: &SandboxConfig,
    cwd: &Path,
    keel_home: &Path,
    vars: &BTreeMap<String, String>,
) -> Option<PathBuf> {
    held_home(config, &places_of(cwd, keel_home, vars))
}

fn held_home(config: &SandboxConfig, places: &Places) -> Option<PathBuf> {
    if config.mode != SandboxMode::WorkspaceWrite {
        return None;
    }
    let cwd = policy::real(&places.cwd);
    places
        .home
        .iter()
        .chain(&places.account_home)
        .map(|h| policy::real(h))
        .find(|h| h.starts_with(&cwd))
}

/// The warning when the session's directory is a home directory or holds one (see
/// [`home_held`]).
fn home_in_workspace(config: &SandboxConfig, places: &Places) -> Option<String> {
    let home = held_home(config, places)?;
    Some(format!(
        "the session's directory {} holds the home directory {}: the model may write anything \
         in it but the secrets and the shell, git, PATH and autostart files (start keel in a \
         project directory instead)",
        policy::real(&places.cwd).display(),
        home.display()
    ))
}

/// Where container engines keep their sockets (and state) under `HOME`: Docker Desktop,
/// Colima and Lima, Rancher Desktop, podman machine, OrbStack. A socket there is a root shell
/// on the engine's machine.
const CONTAINER_ENGINES: [&str; 6] = [
    ".docker/run",
    ".colima",
    ".lima",
    ".rd",
    ".local/share/containers/podman/machine",
    ".orbstack/run",
];

/// The path a tool's error line names: `'…'`, or the part before `: <marker>`.
fn quoted_path<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    let path = |p: &&str| !p.is_empty() && !p.contains(' ');
    let quoted = line.split('\'').nth(1).filter(path);
    quoted.or_else(|| {
        let head = line.split(&format!(": {marker}")).next()?;
        head.rsplit(": ").next().filter(path)
    })
}

fn unavailable_message() -> String {
    "no sandbox works here (bubblewrap is missing or cannot create namespaces, and Landlock is \
     not available): commands the model runs are refused. Install bubblewrap \
     (apt-get install bubblewrap), or run with --sandbox off (or sandbox.failIfUnavailable: \
     false in the settings) to run them unsandboxed"
        .into()
}

/// What this process knows of each bubblewrap: whether it works, and with `--proc`.
fn probe_cache() -> std::sync::MutexGuard<'static, BTreeMap<PathBuf, Option<bwrap::Bwrap>>> {
    static CACHE: OnceLock<Mutex<BTreeMap<PathBuf, Option<bwrap::Bwrap>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    cache.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether this process knows already whether `path` works.
fn probe_known(path: &Path) -> bool {
    probe_cache().contains_key(path)
}

/// The probe of `path`, run once per process.
fn probed(path: &Path) -> Option<bwrap::Bwrap> {
    probe_cache()
        .entry(path.to_path_buf())
        .or_insert_with(|| bwrap::probe(path))
        .clone()
}

/// The `__sandbox-exec` helper's work: restricts this process to `policy` (Landlock, then the
/// seccomp filter) and execs `argv` (the zygote, or one command). Returns only on failure.
/// Inside bubblewrap: installs the seccomp walls ([`seccomp::install_walls`]) on this process,
/// then execs `argv`; returns only the error that stopped it.
pub fn exec_walled(argv: &[String]) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    let Some((program, args)) = argv.split_first() else {
        return std::io::Error::other("no command to run");
    };
    if let Err(e) = seccomp::install_walls() {
        return std::io::Error::other(e.to_string());
    }
    std::process::Command::new(program).args(args).exec()
}

pub fn exec_restricted(policy: &SandboxPolicy, tmp: &Path, argv: &[String]) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    let Some((program, args)) = argv.split_first() else {
        return std::io::Error::other("no command to run");
    };
    // Out of the user's terminal and without a capability (root's too) before anything else.
    if let Err(e) = caps::leave_terminal().and_then(|()| caps::drop_all()) {
        return std::io::Error::other(e.to_string());
    }
    if let Err(e) = landlock::restrict_self(policy, tmp) {
        return std::io::Error::other(format!("landlock: {e}"));
    }
    let filtered = seccomp::install_sockets(policy.network).and_then(|()| seccomp::install_walls());
    if let Err(e) = filtered {
        return std::io::Error::other(e.to_string());
    }
    std::process::Command::new(program).args(args).exec()
}
