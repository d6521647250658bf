//! keel's network-allowlist proxy (issue 30 point 4, issue 43 point 18): runs in keel, outside
//! the sandbox, on a Unix socket in a private per-session directory that bubblewrap binds into
//! the sandbox. It serves HTTP `CONNECT host:port` (HTTPS and any other TCP) and plain-HTTP
//! absolute-form requests (`GET http://host/…`, parsed in [`request`]); checks the host name
//! and port against the allowlist and a plain request's `Host` header against the destination
//! before it resolves or connects anything, a `*.`-only name's addresses before it connects,
//! and in a tunnel the client's first bytes (a TLS server name, an HTTP `Host`: [`tunnel`],
//! [`hello`]) before it passes them on. A refusal is a 403 (in a tunnel: a TLS alert, a 403,
//! or the tunnel closed), a log line and a [`NetViolation`]. Owns the proxy and its start on
//! first use; the in-sandbox relay is [`super::forward`]. It never decides the allowlist (the
//! policy does).

use std::ffi::OsString;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener, UnixStream};

use super::network::{
    is_public, overridden, verdict, HostPattern, NetViolation, Network, ResolveOverride, Verdict,
    ViolationReason,
};
use super::{Sandbox, SandboxError, SandboxErrorKind};
use request::Request;
use tunnel::{Answer, Opening, Refusal};

mod hello;
mod request;
mod tunnel;

/// Where the proxy's socket appears inside the sandbox (in its private `/tmp`).
pub const INSIDE_SOCKET: &str = "/tmp/.keel-proxy.sock";
/// Where keel's own executable is bound inside, for the relay (wherever keel lives outside:
/// under `/tmp`, which the sandbox replaces, or under a path it hides).
pub const INSIDE_EXE: &str = "/tmp/.keel-relay";

/// The longest request head the proxy reads (also inside a tunnel).
const MAX_HEAD: usize = 64 * 1024;
/// How many violations are kept until taken.
const MAX_KEPT: usize = 1024;
/// How long connecting to an allowed destination may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The session's proxy, started the first time a command needs it. State, not policy: two
/// sandboxes compare equal whatever their proxies are doing.
#[derive(Clone, Default)]
pub struct ProxySlot(Arc<Slot>);

#[derive(Default)]
struct Slot {
    /// TEST ONLY name → address overrides (`KEEL_SANDBOX_PROXY_RESOLVE`).
    resolve: Vec<ResolveOverride>,
    /// keel, run inside the sandbox as the relay.
    exe: Option<PathBuf>,
    running: Mutex<Option<Proxy>>,
    violations: Arc<Mutex<Vec<NetViolation>>>,
}

impl ProxySlot {
    pub fn new(resolve: Vec<ResolveOverride>, exe: Option<PathBuf>) -> ProxySlot {
        ProxySlot(Arc::new(Slot {
            resolve,
            exe,
            ..Slot::default()
        }))
    }

    /// The socket of the running proxy for `allow`, started now if it is not running.
    fn socket(&self, allow: &[HostPattern]) -> Result<PathBuf, SandboxError> {
        let mut running = self.0.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = running.as_ref() {
            return Ok(p.socket.clone());
        }
        let state = State {
            allow: allow.to_vec(),
            resolve: self.0.resolve.clone(),
            violations: self.0.violations.clone(),
        };
        let proxy = Proxy::start(state)?;
        let socket = proxy.socket.clone();
        *running = Some(proxy);
        Ok(socket)
    }

    /// The destinations refused since the last call (oldest first).
    pub fn take_violations(&self) -> Vec<NetViolation> {
        let mut v = self.0.violations.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *v)
    }
}

impl PartialEq for ProxySlot {
    fn eq(&self, _: &ProxySlot) -> bool {
        true
    }
}

impl Eq for ProxySlot {}

impl std::fmt::Debug for ProxySlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let running = self.0.running.lock().map(|r| r.is_some()).unwrap_or(false);
        f.debug_struct("ProxySlot")
            .field("running", &running)
            .finish()
    }
}

impl Sandbox {
    /// The bubblewrap hook of the network allowlist: `args` (bwrap's options) plus the proxy's
    /// socket bound into the sandbox and keel's relay in front of the command:
    /// `--ro-bind SOCKET /tmp/.keel-proxy.sock -- KEEL __sandbox-forward /tmp/.keel-proxy.sock`
    /// (the caller appends `-- SHELL -c COMMAND`). Unchanged unless the network is an allowlist.
    pub fn proxy_args(&self, mut args: Vec<OsString>) -> Result<Vec<OsString>, SandboxError> {
        let Network::Allow(allow) = self.policy.network_mode() else {
            return Ok(args);
        };
        let Some(exe) = self.proxy.0.exe.clone() else {
            return Err(setup(
                "the network allowlist runs keel inside the sandbox, but keel cannot tell where \
                 its own executable is",
            ));
        };
        let socket = self.proxy.socket(&allow)?;
        args.extend([
            "--ro-bind".into(),
            socket.into(),
            INSIDE_SOCKET.into(),
            "--ro-bind".into(),
            exe.into(),
            INSIDE_EXE.into(),
            "--".into(),
            INSIDE_EXE.into(),
            "__sandbox-forward".into(),
            INSIDE_SOCKET.into(),
        ]);
        Ok(args)
    }

    /// The destinations the proxy refused since the last call (for a violation event).
    pub fn take_net_violations(&self) -> Vec<NetViolation> {
        self.proxy.take_violations()
    }
}

fn setup(message: &str) -> SandboxError {
    SandboxError {
        kind: SandboxErrorKind::Setup,
        message: message.to_string(),
    }
}

/// What every connection of one proxy shares.
struct State {
    allow: Vec<HostPattern>,
    resolve: Vec<ResolveOverride>,
    violations: Arc<Mutex<Vec<NetViolation>>>,
}

impl State {
    /// Logs and keeps a refusal of `host:port` (see [`State::record`]).
    fn refused(&self, host: &str, port: u16, reason: ViolationReason, named: Option<String>) {
        let why = match reason {
            ViolationReason::NotAllowed => "not in the network allowlist",
            ViolationReason::PortNotAllowed => "a port the network allowlist does not name",
            ViolationReason::PrivateAddress => "a wildcard name resolving to a non-public address",
            ViolationReason::HostMismatch => "the request named another host, or none",
        };
        tracing::warn!(
            host,
            port,
            named = named.as_deref().unwrap_or(""),
            "sandbox proxy: refused {host}:{port} ({why})"
        );
        self.record(NetViolation {
            host: host.to_string(),
            port,
            reason,
            named,
        });
    }

    /// Keeps `violation` for [`ProxySlot::take_violations`]: the newest [`MAX_KEPT`] only, so
    /// a command that loops on refused hosts cannot grow keel's memory.
    fn record(&self, violation: NetViolation) {
        let mut v = self.violations.lock().unwrap_or_else(|e| e.into_inner());
        if v.len() >= MAX_KEPT {
            v.remove(0);
        }
        v.push(violation);
    }
}

/// A running proxy: stops (and removes its directory) when dropped.
struct Proxy {
    socket: PathBuf,
    _dir: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    /// Binds the socket in a fresh `0700` directory and serves it on the current runtime.
    fn start(state: State) -> Result<Proxy, SandboxError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| setup("the network proxy needs keel's async runtime"))?;
        let fail = |e: std::io::Error| setup(&format!("cannot start the network proxy: {e}"));
        let dir = tempfile::Builder::new()
            .prefix("keel-net-")
            .tempdir()
            .map_err(fail)?;
        let socket = dir.path().join("proxy.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket).map_err(fail)?;
        listener.set_nonblocking(true).map_err(fail)?;
        let state = Arc::new(state);
        let task = runtime.spawn(async move {
            match UnixListener::from_std(listener) {
                Ok(l) => serve(l, state).await,
                Err(e) => tracing::warn!("sandbox proxy: cannot listen: {e}"),
            }
        });
        Ok(Proxy {
            socket,
            _dir: dir,
            task,
        })
    }
}

async fn serve(listener: UnixListener, state: Arc<State>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let state = state.clone();
                tokio::spawn(async move {
                    if let Err(e) = handle(stream, &state).await {
                        tracing::debug!("sandbox proxy: connection ended: {e}");
                    }
                });
            }
            Err(e) => tracing::warn!("sandbox proxy: accept failed: {e}"),
        }
    }
}

/// One client connection: read the request head, check, connect, check what a tunnel opens
/// with, relay.
async fn handle(mut client: UnixStream, state: &State) -> std::io::Result<()> {
    let Some((head, early)) = read_head(&mut client).await? else {
        return answer(
            &mut client,
            400,
            "keel sandbox proxy: no complete request head\n",
        )
        .await;
    };
    let req = match Request::parse(&head) {
        Ok(r) => r,
        Err(why) => return answer(&mut client, 400, &format!("keel sandbox proxy: {why}\n")).await,
    };
    let exact = match admit(&req, state) {
        Ok(exact) => exact,
        Err(body) => return answer(&mut client, 403, &body).await,
    };
    let (host, port) = (req.host.as_str(), req.port);
    let mut upstream = match connect(host, port, &state.resolve, exact).await {
        Ok(s) => s,
        Err(Refused::Private(ip)) => {
            state.refused(host, port, ViolationReason::PrivateAddress, None);
            let body = format!(
                "keel sandbox: {host} resolves to {ip}, which is not a public address; only a \
                 name listed exactly in the network allowlist may (the connection was refused)\n"
            );
            return answer(&mut client, 403, &body).await;
        }
        Err(Refused::Io(e)) => {
            let body = format!("keel sandbox proxy: cannot reach {host}: {e}\n");
            return answer(&mut client, 502, &body).await;
        }
    };
    match &req.forward {
        Some(head) => {
            upstream.write_all(head.as_bytes()).await?;
            upstream.write_all(&early).await?;
        }
        None => {
            if !open_tunnel(&mut client, &mut upstream, early, &req, state).await? {
                return Ok(());
            }
        }
    }
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

/// What the allowlist says of `req` before anything is connected: `Ok(exact)` (whether an
/// exact entry allows it), or the refusal recorded and the 403's body.
fn admit(req: &Request, state: &State) -> Result<bool, String> {
    let (host, port) = (req.host.as_str(), req.port);
    let refuse = |reason, named: Option<String>, body: String| {
        state.refused(host, port, reason, named);
        Err(body)
    };
    let exact = match verdict(&state.allow, host, port) {
        Verdict::Listed => true,
        Verdict::Wildcard => false,
        Verdict::WrongPort => {
            let body = format!(
                "keel sandbox: port {port} of {host} is not in the network allowlist (a name is \
                 allowed on 80 and 443 unless its entry names the port, as {host}:{port}); the \
                 connection was refused\n"
            );
            return refuse(ViolationReason::PortNotAllowed, None, body);
        }
        Verdict::Unlisted => {
            let body = format!(
                "keel sandbox: {host} is not in the network allowlist (sandbox.network.allow); \
                 the connection was refused\n"
            );
            return refuse(ViolationReason::NotAllowed, None, body);
        }
    };
    match &req.mismatch {
        Some(named) => {
            let body = tunnel::mismatch_body(host, port, named);
            refuse(ViolationReason::HostMismatch, Some(named.clone()), body)
        }
        None => Ok(exact),
    }
}

/// Opens the tunnel of `req` (connected to `upstream`) and passes on its first bytes if
/// [`tunnel::open`] lets them through; `false` when the tunnel is over (refused and answered,
/// or closed).
async fn open_tunnel(
    client: &mut UnixStream,
    upstream: &mut TcpStream,
    early: Vec<u8>,
    req: &Request,
    state: &State,
) -> std::io::Result<bool> {
    client
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .await?;
    let Refusal { named, answer: a } =
        match tunnel::open(client, upstream, early, &req.host, req.port).await? {
            Opening::Client(first) => return upstream.write_all(&first).await.map(|()| true),
            Opening::Server(first) => return client.write_all(&first).await.map(|()| true),
            Opening::Closed => return Ok(false),
            Opening::Refused(r) => r,
        };
    state.refused(&req.host, req.port, ViolationReason::HostMismatch, named);
    let _ = upstream.shutdown().await;
    match a {
        Answer::TlsAlert => {
            client.write_all(&tunnel::ACCESS_DENIED).await?;
            client.shutdown().await?;
        }
        Answer::Http(body) => answer(client, 403, &body).await?,
        Answer::Close => client.shutdown().await?,
    }
    Ok(false)
}

/// The request head (through the blank line) and any bytes read after it; `None` when the
/// client closed first or sent more than [`MAX_HEAD`] without one.
async fn read_head(client: &mut UnixStream) -> std::io::Result<Option<(String, Vec<u8>)>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let mut seen: usize = 0; // what was searched already (less the 3 bytes a `\r\n\r\n` may span)
    loop {
        let from = seen.saturating_sub(3);
        seen = buf.len();
        if let Some(end) = memchr::memmem::find(&buf[from..], b"\r\n\r\n").map(|e| from + e) {
            let early = buf.split_off(end + 4);
            return Ok(Some((String::from_utf8_lossy(&buf).into_owned(), early)));
        }
        if buf.len() > MAX_HEAD {
            return Ok(None);
        }
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn answer(client: &mut UnixStream, status: u16, body: &str) -> std::io::Result<()> {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        _ => "Bad Gateway",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    client.write_all(head.as_bytes()).await?;
    client.write_all(body.as_bytes()).await?;
    client.shutdown().await
}

/// Why [`connect`] did not connect.
enum Refused {
    /// The name resolved to a non-public address and is not listed exactly.
    Private(IpAddr),
    Io(std::io::Error),
}

/// Connects to `host:port`, through the test-only overrides first. Unless `exact` (the name
/// is listed as it is), every address the name resolves to must be public, and the address
/// connected to is one that was checked (no second lookup a rebinding DNS could answer).
async fn connect(
    host: &str,
    port: u16,
    resolve: &[ResolveOverride],
    exact: bool,
) -> Result<TcpStream, Refused> {
    let fixed = overridden(resolve, host, port);
    let attempt = async {
        let addrs: Vec<std::net::SocketAddr> = match fixed {
            Some(a) => vec![a],
            None => tokio::net::lookup_host((host, port))
                .await
                .map_err(Refused::Io)?
                .collect(),
        };
        if let Some(bad) = addrs.iter().find(|a| !exact && !is_public(a.ip())) {
            return Err(Refused::Private(bad.ip()));
        }
        TcpStream::connect(&addrs[..]).await.map_err(Refused::Io)
    };
    tokio::time::timeout(CONNECT_TIMEOUT, attempt)
        .await
        .unwrap_or_else(|_| Err(Refused::Io(std::io::ErrorKind::TimedOut.into())))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
