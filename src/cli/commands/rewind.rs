//! `keel rewind [ID] --list [--json]`, `keel rewind [ID] --to CHECKPOINT [--files |
//! --conversation]`, `keel rewind [ID] --undo`: a session's checkpoints (each with the files
//! its prompt changed), and rewinding its files and conversation to one of them (DESIGN §16);
//! without ID, the newest session of this directory. Works on the session file, which it locks; a
//! session live in the daemon (its file locked there) is rewound by its host, through the
//! daemon (one writer), `--undo` too.

use std::path::Path;

use super::{print, Logs};
use crate::error::StartupError;
use crate::exit::Exit;
use crate::kernel::checkpoint::{self, Checkpoints, Restore, Rewound, Shadow};
use crate::kernel::clock::Clock;
use crate::kernel::session::{self, Store};
use crate::mode::Env;

/// `keel rewind`'s arguments.
#[derive(Debug, clap::Args)]
pub struct RewindArgs {
    /// The session: its id (or a unique prefix) in this directory, or its file (default: the
    /// newest session of this directory).
    #[arg(value_name = "SESSION")]
    session: Option<String>,
    /// List the session's checkpoints: id, entry id, time, prompt, files that prompt changed.
    #[arg(long, conflicts_with_all = ["to", "undo"])]
    list: bool,
    /// With --list: one JSON array.
    #[arg(long, requires = "list")]
    json: bool,
    /// Rewind to before the user message of this checkpoint (a checkpoint or entry id).
    #[arg(long, value_name = "CHECKPOINT", conflicts_with = "undo")]
    to: Option<String>,
    /// With --to: the files only.
    #[arg(long, requires = "to", conflicts_with = "conversation")]
    files: bool,
    /// With --to: the conversation only.
    #[arg(long, requires = "to")]
    conversation: bool,
    /// Undo the session's last rewind.
    #[arg(long)]
    undo: bool,
    /// The daemon's socket, for a session live there (default: keel's usual one).
    #[arg(long, value_name = "PATH")]
    socket: Option<std::path::PathBuf>,
}

/// Runs `keel rewind`.
pub fn run(args: RewindArgs) -> Exit {
    super::run(Logs::Off, async move |env, out| {
        let path = session_path(env, args.session.as_deref())?;
        if args.list {
            let (store, _) = Store::read(&path).map_err(|e| StartupError::usage(e.message))?;
            let list = checkpoint::list(&store, shadow(env, &store).as_ref());
            let text = if args.json {
                let mut s = serde_json::to_string(&list).unwrap_or_default();
                s.push('\n');
                s
            } else {
                table(&list)
            };
            return print(out, &text);
        }
        let (mut store, _) = match Store::open(&path) {
            Err(e) if e.kind == session::SessionErrorKind::Locked => {
                return in_daemon(env, &path, &args, e.message, out).await;
            }
            opened => opened.map_err(|e| StartupError::usage(e.message))?,
        };
        let shadow = shadow(env, &store);
        let clock = Clock::system();
        let done = match (&args.to, args.undo) {
            (Some(to), _) => {
                let restore = match (args.files, args.conversation) {
                    (true, _) => Restore::Files,
                    (_, true) => Restore::Conversation,
                    _ => Restore::Both,
                };
                checkpoint::rewind(&mut store, shadow.as_ref(), to, restore, &clock)
            }
            (None, true) => checkpoint::undo(&mut store, shadow.as_ref(), &clock),
            (None, false) => {
                return Err(StartupError::usage("say --list, --to CHECKPOINT or --undo"))
            }
        };
        let done = done.map_err(|e| StartupError::usage(e.message))?;
        store
            .sync()
            .map_err(|e| StartupError::internal(e.message))?;
        print(out, &report(&done, args.undo))
    })
}

/// The session file `query` names: a path, or an id in this directory's sessions; without
/// one, the newest session of this directory. Not found: sessions are kept per directory.
fn session_path(env: &Env, query: Option<&str>) -> Result<std::path::PathBuf, StartupError> {
    let dir = session::session_dir(&env.keel_home, &env.cwd);
    let Some(query) = query else {
        return session::find_latest(&dir, &env.cwd.display().to_string()).ok_or_else(|| {
            crate::setup::session_error(session::SessionError::new(
                session::SessionErrorKind::NotFound,
                format!("no session in {} to rewind", env.cwd.display()),
            ))
        });
    };
    let as_path = env.cwd.join(query);
    if as_path.is_file() {
        return Ok(as_path);
    }
    session::resolve(&dir, query).map_err(crate::setup::session_error)
}

/// The session's shadow repository, unless the settings turn checkpoints off or `git` is
/// missing.
fn shadow(env: &Env, store: &Store) -> Option<Shadow> {
    let merged = crate::setup::settings::load(None, env).ok()?.merged;
    if merged.checkpoints.enabled == Some(false) {
        return None;
    }
    let git = crate::setup::settings::find_git(env)?;
    let checkpoints = Checkpoints {
        git,
        root: env.keel_home.join("checkpoints"),
        caps: Default::default(),
    };
    let header = store.header();
    Some(checkpoints.shadow(Path::new(&header.cwd), &header.id))
}

fn table(list: &[checkpoint::Listed]) -> String {
    let mut s = String::new();
    for c in list {
        let files = match c.files.len() {
            1 => "1 file".to_string(),
            n => format!("{n} files"),
        };
        s.push_str(&format!(
            "{}  {}  {}  {}  {files}\n",
            c.id, c.entry_id, c.timestamp, c.prompt
        ));
    }
    s
}

/// What a rewind did: the prompt it went to (an undo: the one the session is back at), then
/// the files written and removed.
fn report(done: &Rewound, undo: bool) -> String {
    let prompt = done.prompt.as_deref().unwrap_or(&done.entry_id);
    let mut s = match (undo, &done.back_at) {
        (true, Some(back)) => {
            format!("undid the rewind to before “{prompt}”: back at “{back}”\n")
        }
        (true, None) => format!("undid the rewind to before “{prompt}”\n"),
        (false, _) => format!(
            "rewound {} to before “{prompt}” ({})\n",
            done.restore.word(),
            done.entry_id
        ),
    };
    for line in done.restored.lines() {
        s.push_str(&line);
        s.push('\n');
    }
    s
}

/// Rewinds a session whose file another keel holds: if the daemon serves it, its host does it
/// (`session/rewind`); else the lock's refusal (`locked`) stands.
async fn in_daemon(
    env: &Env,
    path: &Path,
    args: &RewindArgs,
    locked: String,
    out: &mut crate::output::Output,
) -> Result<Exit, StartupError> {
    use crate::wire::protocol::session::{Rewind, RewindParams, RewindUndo, RewindUndoParams};
    let dial = crate::client::dial::Dial::Local(crate::client::open::socket_for(
        env,
        args.socket.as_deref(),
    )?);
    let status = crate::front::daemon::status_of(&dial).await;
    let live = status.ok().and_then(|s| {
        s.sessions.into_iter().find(|l| {
            l.session_file
                .as_deref()
                .is_some_and(|f| session::same_file(Path::new(f), path))
        })
    });
    let Some(live) = live else {
        return Err(StartupError::usage(locked));
    };
    let restore = match (args.files, args.conversation) {
        (true, _) => Some(Restore::Files),
        (_, true) => Some(Restore::Conversation),
        _ => None,
    };
    let mut client = crate::client::socket::Client::dial(&dial, false).await?;
    let session_id = live.session_id.clone();
    let done = match &args.to {
        Some(to) => {
            let params = RewindParams {
                session_id,
                entry_id: to.clone(),
                restore,
            };
            client.call::<Rewind>(&params).await
        }
        None => {
            client
                .call::<RewindUndo>(&RewindUndoParams { session_id })
                .await
        }
    };
    let done = done.map_err(|e| {
        StartupError::usage(format!("session {} did not rewind: {e}", live.session_id))
    })?;
    print(out, &report(&done, args.to.is_none()))
}
