//! The MCP servers running in this process, shared by the sessions whose server configs are
//! identical (the daemon's sessions, an editor's ACP sessions): one child process or HTTP
//! connection per distinct config, started by the first session that needs it and stopped when
//! the last one using it ends. Owns only that sharing; `Server` owns the connection.
//!
//! Identical means everything that shapes the server: its name, transport (command, args, env,
//! cwd, or url and headers), timeouts, the directory it runs in, the variables it inherits and
//! its log directory. A server that failed or exited is not shared: the next session starts a
//! fresh one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::config::{ServerConfig, Transport};
use super::server::{self, Context, Server, Status, ENV_ALLOWLIST};
use super::Warn;

/// One running server and the sessions it warns.
pub struct Running {
    pub server: Arc<Server>,
    task: JoinHandle<()>,
    listeners: Arc<Listeners>,
}

/// Where a shared server's warnings go: every session that uses it.
#[derive(Default)]
struct Listeners {
    next: AtomicU64,
    warn: Mutex<Vec<(u64, Warn)>>,
}

impl Listeners {
    fn add(&self, warn: Warn) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.warn).push((id, warn));
        id
    }

    fn say(&self, line: String) {
        let sinks: Vec<Warn> = lock(&self.warn).iter().map(|(_, w)| w.clone()).collect();
        for w in sinks {
            w(line.clone());
        }
    }
}

/// A session's use of a running server: dropping it stops the session's warnings, and the
/// server with the last one.
pub struct Use {
    pub running: Arc<Running>,
    listener: u64,
}

impl Drop for Use {
    fn drop(&mut self) {
        lock(&self.running.listeners.warn).retain(|(id, _)| *id != self.listener);
    }
}

impl Drop for Running {
    /// Aborts the server's task (closing its connection) and stops a stdio process group:
    /// SIGTERM now, SIGKILL after a short grace on a helper thread.
    fn drop(&mut self) {
        self.task.abort();
        self.server.kill_group(nix::sys::signal::Signal::SIGTERM);
        let server = self.server.clone();
        let _ = std::thread::Builder::new()
            .name("keel-mcp-stop".into())
            .spawn(move || {
                std::thread::sleep(server::STOP_GRACE);
                server.kill_group(nix::sys::signal::Signal::SIGKILL);
            });
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

struct Pool {
    running: Mutex<HashMap<String, Weak<Running>>>,
    /// Woken on every status or tool-list change of any server here.
    changed: Arc<Notify>,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool {
        running: Mutex::new(HashMap::new()),
        changed: Arc::new(Notify::new()),
    })
}

/// Woken on every status or tool-list change of a server of this process (waiters re-check
/// the servers they care about).
pub fn changed() -> Arc<Notify> {
    pool().changed.clone()
}

/// What a server is started with, besides its config.
pub struct Place<'a> {
    /// The session's directory: a stdio server without its own `cwd` runs there.
    pub cwd: &'a std::path::Path,
    pub vars: &'a std::collections::BTreeMap<String, String>,
    pub log_dir: &'a std::path::Path,
}

/// The running server for `config` in `place`: one already shared (connecting or ready), or
/// a new one started now (inside a tokio runtime). `warn` hears its failures from now on.
pub fn acquire(config: ServerConfig, place: &Place<'_>, warn: Warn) -> Use {
    let cwd = match &config.transport {
        Transport::Stdio { cwd: Some(dir), .. } => dir.clone(),
        _ => place.cwd.to_path_buf(),
    };
    let inherited: Vec<(&String, &String)> = place
        .vars
        .iter()
        .filter(|(k, _)| ENV_ALLOWLIST.contains(&k.as_str()) || k.starts_with("LC_"))
        .collect();
    let key = format!(
        "{:?}",
        (
            &config.name,
            &config.transport,
            config.startup_timeout,
            config.tool_timeout,
            &cwd,
            inherited,
            place.log_dir
        )
    );
    let pool = pool();
    let mut running = lock(&pool.running);
    running.retain(|_, r| r.strong_count() > 0);
    let shared = running
        .get(&key)
        .and_then(Weak::upgrade)
        .filter(|r| matches!(r.server.status(), Status::Connecting | Status::Ready));
    // The session listens before a new server starts: no failure goes unheard.
    let (r, listener) = match shared {
        Some(r) => {
            let id = r.listeners.add(warn);
            (r, id)
        }
        None => {
            let listeners = Arc::new(Listeners::default());
            let id = listeners.add(warn);
            let say = listeners.clone();
            let ctx = Context {
                vars: place.vars.clone(),
                cwd,
                log_dir: place.log_dir.to_path_buf(),
                changed: pool.changed.clone(),
                warn: Arc::new(move |line| say.say(line)),
            };
            let server = Server::new(config);
            let r = Arc::new(Running {
                task: tokio::spawn(server.clone().run(ctx)),
                server,
                listeners,
            });
            running.insert(key, Arc::downgrade(&r));
            (r, id)
        }
    };
    drop(running);
    Use {
        running: r,
        listener,
    }
}
