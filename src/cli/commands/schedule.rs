//! `keel schedule add|list|remove|run|pause|resume`: the command line of scheduled tasks.
//! stdout carries what was asked for (a confirmation line, the task table or JSON lines, the
//! started run's session id); errors go to stderr as `Error:`/`Caused by:`/`Hint:` with exit
//! 2 (usage) or 3 (configuration, a corrupt store, no daemon). Changes are written to the
//! store, then a running daemon is told (`schedule/reload`); none is started for that.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};

use chrono::Local;
use serde_json::{json, Value};

use super::Logs;
use crate::client::socket::Client;
use crate::error::StartupError;
use crate::exit::Exit;
use crate::mode::Env;
use crate::output::Output;
use crate::schedule::due::{self, Schedule};
use crate::schedule::{Store, StoreError, Task, TaskState};
use crate::wire::protocol::{schedule, NoParams};
use crate::wire::socket::DaemonErrorKind;

#[derive(Debug, clap::Subcommand)]
pub enum ScheduleAction {
    /// Add a task: its schedule, then the run's flags, `--` and the prompt.
    ///
    /// keel schedule add NAME (--every 30m | --cron "0 7 * * 1-5") [--cwd DIR] [--on-failure CMD]
    /// [run flags: --provider, --model, --tools, --permission, …] -- PROMPT…
    Add {
        /// Letters, digits, '-', '_' and '.'.
        name: String,
        /// Run every DURATION (30s, 30m, 2h, 1d; at least 1 minute), counted from the last run.
        #[arg(long, value_name = "DURATION")]
        every: Option<String>,
        /// Run at the times of a 5-field cron expression, in the local time zone.
        #[arg(long, value_name = "EXPR")]
        cron: Option<String>,
        /// The directory the run starts in (default: this one).
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// After a run that does not succeed: `sh -c CMD` in the task's directory, with the
        /// run's result line (JSON) on stdin.
        #[arg(long, value_name = "CMD")]
        on_failure: Option<String>,
        /// The daemon's socket (default $KEEL_SOCKET, else the per-user runtime directory).
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
        /// The run's flags as for `keel` (model, tools, permission, …), then `--` and the prompt.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "FLAGS… -- PROMPT"
        )]
        rest: Vec<String>,
    },
    /// List the tasks: schedule, next run, last run, last outcome and exit code.
    List {
        /// One JSON object per task per line.
        #[arg(long)]
        json: bool,
    },
    /// Remove a task (a run going on is not stopped).
    Remove {
        name: String,
        /// The daemon's socket (default $KEEL_SOCKET, else the per-user runtime directory).
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
    },
    /// Run a task now in the daemon (started if needed); prints the run's session id.
    Run {
        name: String,
        /// The daemon's socket (default $KEEL_SOCKET, else the per-user runtime directory).
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
    },
    /// Stop running a task on its schedule (`run` still runs it).
    Pause {
        name: String,
        /// The daemon's socket (default $KEEL_SOCKET, else the per-user runtime directory).
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
    },
    /// Run a paused task on its schedule again.
    Resume {
        name: String,
        /// The daemon's socket (default $KEEL_SOCKET, else the per-user runtime directory).
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
    },
}

impl From<StoreError> for StartupError {
    fn from(e: StoreError) -> StartupError {
        let hint = match &e {
            StoreError::Corrupt { path, .. } => format!(
                "fix or remove {} (keel never overwrites a file it cannot read)",
                path.display()
            ),
            StoreError::Io { .. } => "check the file's permissions and the disk".to_string(),
        };
        StartupError::config(e.to_string()).hint(hint)
    }
}

/// `keel schedule …`: runs one command, logs on stderr.
pub fn run(action: ScheduleAction) -> Exit {
    super::run(Logs::Stderr, async move |env, out| {
        schedule(action, env, out).await
    })
}

/// Runs one `keel schedule` command.
async fn schedule(
    action: ScheduleAction,
    env: &Env,
    out: &mut Output,
) -> Result<Exit, StartupError> {
    let store = Store::new(&env.keel_home).converting(crate::cli::spec::from_task_args);
    match action {
        ScheduleAction::Add {
            name,
            every,
            cron,
            cwd,
            on_failure,
            socket,
            rest,
        } => {
            let add = Add {
                name,
                every,
                cron,
                cwd,
                on_failure,
                rest,
            };
            let task = add.task(env)?;
            let line = added_line(&task);
            let name = task.name.clone();
            store.update(|tasks| {
                if tasks.iter().any(|t| t.name == name) {
                    return Err(StartupError::usage(format!("a task {name} exists already"))
                        .hint(format!("keel schedule remove {name} first")));
                }
                tasks.push(task);
                Ok(())
            })?;
            if !tell_daemon(env, socket.as_deref()).await? {
                out.err(
                    "Note: no keel daemon is running: the task runs once one does \
                     (keel daemon start; at login: keel daemon install --print)\n",
                );
            }
            print(out, &line)
        }
        ScheduleAction::List { json } => {
            let tasks = store.load()?;
            let text = match json {
                true => tasks
                    .iter()
                    .map(|t| format!("{}\n", list_json(t)))
                    .collect(),
                false => list_table(&tasks),
            };
            print(out, &text)
        }
        ScheduleAction::Remove { name, socket } => {
            store.update(|tasks| {
                let before = tasks.len();
                tasks.retain(|t| t.name != name);
                match tasks.len() < before {
                    true => Ok(()),
                    false => Err(no_task(&name)),
                }
            })?;
            tell_daemon(env, socket.as_deref()).await?;
            print(out, &format!("removed {name}\n"))
        }
        ScheduleAction::Pause { name, socket } => {
            set_paused(&store, &name, true)?;
            tell_daemon(env, socket.as_deref()).await?;
            print(out, &format!("paused {name}\n"))
        }
        ScheduleAction::Resume { name, socket } => {
            set_paused(&store, &name, false)?;
            tell_daemon(env, socket.as_deref()).await?;
            print(out, &format!("resumed {name}\n"))
        }
        ScheduleAction::Run { name, socket } => {
            if !store.load()?.iter().any(|t| t.name == name) {
                return Err(no_task(&name));
            }
            let socket = crate::client::open::socket_for(env, socket.as_deref())?;
            let stream = crate::client::open::start_local(&socket, env).await?;
            let dial = crate::client::dial::Dial::Local(socket);
            let mut client = Client::greet(stream, false, &dial).await?;
            let r = client
                .call::<schedule::Run>(&schedule::RunParams { name: name.clone() })
                .await
                .map_err(|e| {
                    StartupError::config(format!("the run of {name} did not start: {e}"))
                })?;
            print(out, &format!("{}\n", r.session_id))
        }
    }
}

fn print(out: &mut Output, text: &str) -> Result<Exit, StartupError> {
    match out.out(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(Exit::Success),
        Err(_) => Ok(out.stdout_exit()),
    }
}

fn no_task(name: &str) -> StartupError {
    StartupError::usage(format!("no scheduled task {name}"))
        .hint("keel schedule list shows the tasks")
}

fn set_paused(store: &Store, name: &str, paused: bool) -> Result<(), StartupError> {
    store.update(|tasks| match tasks.iter_mut().find(|t| t.name == name) {
        Some(t) => {
            t.paused = paused;
            Ok(())
        }
        None => Err(no_task(name)),
    })
}

/// Tells a running daemon to read the store again (`schedule/reload`); false if none runs.
/// A daemon that cannot read the store says why (exit 3), and so does a socket that fails the
/// dial's checks (another user's directory or listener).
async fn tell_daemon(env: &Env, socket: Option<&Path>) -> Result<bool, StartupError> {
    let socket = crate::client::open::socket_for(env, socket)?;
    let mut client = match Client::connect(&socket, false).await {
        Ok(client) => client,
        Err(e) if e.kind == DaemonErrorKind::NotListening => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    client
        .call::<schedule::Reload>(&NoParams)
        .await
        .map_err(|e| StartupError::config(format!("the daemon could not read the tasks: {e}")))?;
    Ok(true)
}

/// What `keel schedule add` was given.
struct Add {
    name: String,
    every: Option<String>,
    cron: Option<String>,
    cwd: Option<PathBuf>,
    on_failure: Option<String>,
    rest: Vec<String>,
}

/// Flags that concern a client of keel, never a scheduled run.
const CLIENT_ONLY: &str =
    "-p/--print, --mode, --json, --rpc, --daemon, --no-daemon, --detach, --wait and --socket";

impl Add {
    /// The task, or every problem at once: usage problems exit 2; when there are none, a
    /// configuration problem (no provider for the model) exits 3.
    fn task(self, env: &Env) -> Result<Task, StartupError> {
        let mut usage = crate::schedule::name_problems(&self.name);
        let every = match &self.every {
            Some(text) => match crate::schedule::parse_every(text) {
                Ok(secs) if secs < min_every(env) => {
                    usage.push(format!(
                        "--every {text} is shorter than the minimum, {}",
                        crate::schedule::every_text(min_every(env))
                    ));
                    None
                }
                Ok(secs) => Some(secs),
                Err(e) => {
                    usage.push(e.message);
                    None
                }
            },
            None => None,
        };
        match (&self.every, &self.cron) {
            (Some(_), Some(_)) => usage.push("give --every or --cron, not both".into()),
            (None, None) => usage.push("give --every DURATION or --cron EXPR".into()),
            _ => {}
        }
        if let Some(expr) = &self.cron {
            if let Err(e) = due::parse_cron(expr) {
                usage.push(e.message);
            }
        }
        let cwd = match &self.cwd {
            Some(d) => env.cwd.join(d),
            None => env.cwd.clone(),
        };
        let cwd = match cwd.is_dir() {
            true => std::fs::canonicalize(&cwd).unwrap_or(cwd),
            false => {
                usage.push(format!("--cwd {} is not a directory", cwd.display()));
                cwd
            }
        };
        let (args, prompt) = split_prompt(&self.rest);
        if prompt.trim().is_empty() {
            usage.push(
                "no prompt: put it after `--` (keel schedule add NAME --every 30m -- PROMPT…)"
                    .into(),
            );
        }
        let mut config = Vec::new();
        let parsed = crate::cli::spec::parse_argv(&args);
        // Never stored: schedules.json is no place for a key, and `list --json` prints args.
        let api_key = parsed.as_ref().is_ok_and(|cli| cli.api_key.is_some());
        if api_key {
            usage.push(
                "a scheduled run takes no --api-key: keel does not store keys in schedules.json"
                    .into(),
            );
        }
        let mut recorded = std::collections::BTreeMap::new();
        let mut spec = Default::default();
        match parsed {
            Err(e) => usage.push(format!("the run's flags: {}", e.message)),
            Ok(cli) if !cli.prompt.is_empty() => usage.push(format!(
                "the prompt goes after `--` (found {:?} among the flags)",
                cli.prompt.join(" ")
            )),
            Ok(cli) => match crate::cli::spec::of(&cli, &env.cwd) {
                Err(e) => usage.push(format!("the run's flags: {}", e.message)),
                Ok(s) => {
                    recorded = run_flag_problems(&cli, &s, env, &cwd, &mut usage, &mut config);
                    spec = s;
                }
            },
        }
        if !usage.is_empty() {
            let e = problems(
                StartupError::usage(format!("cannot add task {:?}", self.name)),
                usage,
            );
            return Err(match api_key {
                true => e.hint(API_KEY_HINT),
                false => e,
            });
        }
        if !config.is_empty() {
            return Err(problems(
                StartupError::config(format!("cannot add task {:?}", self.name)),
                config,
            )
            .hint(
                "pass --provider/--model (and set the provider's key in the daemon's \
                 environment), or --base-url URL for a local OpenAI-compatible server",
            ));
        }
        Ok(Task {
            name: self.name,
            every,
            cron: self.cron,
            cwd,
            spec,
            args: Vec::new(),
            prompt,
            env: recorded,
            on_failure: self.on_failure,
            paused: false,
            created: Local::now().to_rfc3339(),
            state: TaskState::default(),
        })
    }
}

/// Where a scheduled run's key comes from instead of `--api-key`.
const API_KEY_HINT: &str = "the run takes its key from the daemon's environment (e.g. \
     OPENAI_API_KEY where the daemon starts, or an EnvironmentFile= of its systemd unit) or from \
     $KEEL_HOME/models.json (apiKeyEnv or apiKey)";

/// What is wrong with a task's parsed run flags: client-only flags (usage) or no provider
/// configured for the run in `cwd` (configuration). Returns the environment the run's tools will
/// get (this client's, less the secret variables), recorded with the task.
fn run_flag_problems(
    cli: &crate::cli::args::Cli,
    spec: &crate::wire::protocol::spec::SessionSpec,
    env: &Env,
    cwd: &Path,
    usage: &mut Vec<String>,
    config: &mut Vec<String>,
) -> std::collections::BTreeMap<String, String> {
    let client_only = cli.print
        || cli.mode.is_some()
        || cli.json
        || cli.rpc
        || cli.daemon
        || cli.no_daemon
        || cli.detach
        || cli.wait
        || cli.socket.is_some();
    if client_only {
        usage.push(format!("a scheduled run takes no {CLIENT_ONLY}"));
    }
    let mut here = env.clone();
    here.cwd = cwd.to_path_buf();
    let settings = match crate::setup::Settings::resolve(spec, crate::mode::Mode::Print, &here) {
        Ok(s) => s,
        Err(e) => {
            config.push(e.message);
            return Default::default();
        }
    };
    if !crate::setup::is_configured(&settings, &here) {
        config.push("no model provider is configured for the run".to_string());
    }
    crate::setup::tool_env(&settings, &here).visible(&env.vars)
}

fn problems(mut e: StartupError, list: Vec<String>) -> StartupError {
    for p in list {
        e = e.cause(p);
    }
    e
}

/// The shortest `--every`: 1 minute, or the test-only `KEEL_SCHEDULE_MIN_SECS`.
fn min_every(env: &Env) -> u64 {
    env.vars
        .get(crate::schedule::MIN_SECS_VAR)
        .and_then(|v| v.parse().ok())
        .unwrap_or(crate::schedule::MIN_EVERY_SECS)
}

/// The run's flags and the prompt: what comes after the first `--` is the prompt (clap may
/// have taken that `--` itself: then the words after the last flag-looking one are).
fn split_prompt(rest: &[String]) -> (Vec<String>, String) {
    if let Some(i) = rest.iter().position(|a| a == "--") {
        return (rest[..i].to_vec(), rest[i + 1..].join(" "));
    }
    // No `--` left: it was before every word (`add NAME --every 1m -- hello`), or absent.
    match rest.first() {
        Some(first) if !first.starts_with('-') => (Vec::new(), rest.join(" ")),
        _ => (rest.to_vec(), String::new()),
    }
}

fn added_line(task: &Task) -> String {
    let what = Schedule::of(task).map(|s| s.text()).unwrap_or_default();
    let next = due::next_run(task, &Local).map_or("-".to_string(), |t| local_time(&t));
    format!("added {}: {what}, next run {next}\n", task.name)
}

fn local_time(t: &chrono::DateTime<Local>) -> String {
    t.format("%Y-%m-%d %H:%M:%S").to_string()
}

fn rfc_local(s: Option<&String>) -> Option<String> {
    let t = chrono::DateTime::parse_from_rfc3339(s?).ok()?;
    Some(local_time(&t.with_timezone(&Local)))
}

/// `keel schedule list --json`: one task.
fn list_json(t: &Task) -> Value {
    let s = &t.state;
    let mut line = json!({
        "name": t.name,
        "every": t.every,
        "cron": t.cron,
        "cwd": t.cwd,
        "spec": t.spec,
        "prompt": t.prompt,
        "onFailure": t.on_failure,
        "paused": t.paused,
        "created": t.created,
        "nextRun": due::next_run(t, &Local).map(|n| n.to_rfc3339()),
        "lastRun": s.last_run,
        "lastOutcome": s.last_outcome,
        "lastExit": s.last_exit,
        "lastSession": s.last_session,
        "lastError": s.last_error,
        "runs": s.runs,
        "skipped": s.skipped,
    });
    // Only when there are some: the last run's startup warnings and what its sandbox stopped.
    if let Some(map) = line.as_object_mut() {
        if !s.last_warnings.is_empty() {
            map.insert("lastWarnings".into(), json!(s.last_warnings));
        }
        if !s.last_violations.is_empty() {
            map.insert("lastViolations".into(), json!(s.last_violations));
        }
    }
    line
}

fn list_table(tasks: &[Task]) -> String {
    let mut out = format!(
        "{:<20} {:<22} {:<19} {:<19} {:<12} {}\n",
        "NAME", "SCHEDULE", "NEXT RUN", "LAST RUN", "OUTCOME", "EXIT"
    );
    for t in tasks {
        let schedule = Schedule::of(t).map(|s| s.text()).unwrap_or_default();
        let next = match t.paused {
            true => "paused".to_string(),
            false => due::next_run(t, &Local).map_or("-".into(), |n| local_time(&n)),
        };
        let s = &t.state;
        out.push_str(&format!(
            "{:<20} {:<22} {:<19} {:<19} {:<12} {}\n",
            t.name,
            schedule,
            next,
            rfc_local(s.last_run.as_ref()).unwrap_or_else(|| "-".into()),
            s.last_outcome.as_deref().unwrap_or("-"),
            s.last_exit.map_or("-".to_string(), |c| c.to_string()),
        ));
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn the_prompt_is_what_follows_the_double_dash() {
        let (args, prompt) = split_prompt(&words("--provider scripted -- run the tests"));
        assert_eq!(
            (args, prompt.as_str()),
            (words("--provider scripted"), "run the tests")
        );
        let (args, prompt) = split_prompt(&words("run the tests"));
        assert_eq!((args.len(), prompt.as_str()), (0, "run the tests"));
        let (args, prompt) = split_prompt(&words("--model x"));
        assert_eq!((args, prompt.as_str()), (words("--model x"), ""));
    }
}
