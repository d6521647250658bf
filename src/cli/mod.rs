//! keel's one command line (clap derive): the root and its subcommands. A run's own flags are
//! in [`args`] (a leaf the daemon reads too). No decisions here: `mode.rs` interprets them.

pub mod args;

use args::{Cli, RemoteArgs};

use std::path::PathBuf;

use clap::Parser;

/// keel's whole command line, parsed once: a run (the default command: [`Cli`]'s flags and
/// prompt) or one subcommand. A subcommand's name is one only as the first argument: after a
/// flag, a prompt word or `--` it is a prompt word (`keel -p ps`, `keel -- ps`).
#[derive(Debug, Parser)]
#[command(
    name = "keel",
    version,
    about,
    long_about = None,
    args_conflicts_with_subcommands = true
)]
pub struct Keel {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub run: Cli,
}

/// keel's subcommands; without one, keel runs the prompt.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    #[command(flatten)]
    Daemon(DaemonTop),
    /// Inspect the configured MCP servers.
    Mcp(McpCli),
    /// What a run would send the model, without running it.
    Debug {
        #[command(subcommand)]
        command: DebugCommand,
    },
}

/// `keel debug …`.
#[derive(Debug, clap::Subcommand)]
pub enum DebugCommand {
    /// Print the system prompt and tools a run with these flags would send, and the context
    /// files behind it.
    Prompt {
        #[command(flatten)]
        run: Box<Cli>,
    },
    /// Any other word: refused by [`unknown_debug`] with the list of valid ones.
    #[command(external_subcommand)]
    Unknown(Vec<String>),
}

/// The usage error (exit 2) for `keel debug WORD` with an unknown WORD: it names the valid
/// debug commands.
pub fn unknown_debug(words: &[String]) -> clap::Error {
    use clap::CommandFactory;
    let word = words.first().map(String::as_str).unwrap_or_default();
    let mut root = Keel::command();
    root.build();
    let Some(debug) = root.find_subcommand_mut("debug") else {
        return root.error(
            clap::error::ErrorKind::InvalidSubcommand,
            "no debug commands",
        );
    };
    let valid: Vec<&str> = debug
        .get_subcommands()
        .map(|c| c.get_name())
        .filter(|n| *n != "help")
        .collect();
    let message = format!(
        "unrecognized debug command '{word}'\n\n  [debug commands: {}]",
        valid.join(", ")
    );
    debug.error(clap::error::ErrorKind::InvalidSubcommand, message)
}

/// `keel daemon …`, `keel ps`, `keel attach` and `keel schedule …`: the commands that manage
/// the per-user daemon.
#[derive(Debug, clap::Subcommand)]
pub enum DaemonTop {
    /// Manage the per-user daemon: sessions that outlive every window.
    Daemon {
        #[command(subcommand)]
        action: DaemonAction,
    },
    /// List the sessions live in the daemon.
    Ps {
        /// One JSON object per session per line.
        #[arg(long)]
        json: bool,
        /// The daemon's socket (default $KEEL_SOCKET, else the per-user runtime directory).
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Show a session live in the daemon in the TUI (the only one, when no id is given).
    Attach {
        /// The session id (a unique prefix is enough).
        id: Option<String>,
        /// The daemon's socket (default $KEEL_SOCKET, else the per-user runtime directory).
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Tasks the daemon runs on a schedule (see README "Scheduled tasks").
    Schedule {
        #[command(subcommand)]
        action: crate::front::schedule::ScheduleAction,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum DaemonAction {
    /// Run the daemon in the foreground.
    Run {
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
        /// Exit after this many seconds with no client, no run and no request (0 = never).
        #[arg(long, value_name = "SECS", default_value_t = 600.0)]
        idle_exit: f64,
        /// Events kept per session for clients that re-attach.
        #[arg(long, value_name = "N", default_value_t = 10_000)]
        replay_events: usize,
        /// Bytes kept per session for clients that re-attach.
        #[arg(long, value_name = "N", default_value_t = 8 * 1024 * 1024)]
        replay_bytes: usize,
        /// Set by `keel daemon start`: become a session leader, ignore SIGHUP.
        #[arg(long, hide = true)]
        spawned: bool,
        #[command(flatten)]
        journal: crate::daemon::journal::options::JournalArgs,
    },
    /// Connect to the daemon, or start one; prints the socket path.
    Start {
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
    },
    /// Show the daemon and its sessions.
    Status {
        /// Print `daemon/status`'s result as JSON.
        #[arg(long)]
        json: bool,
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Print a unit that starts the daemon at login: a systemd user unit (Linux) or a launchd
    /// agent (macOS).
    Install {
        /// Print it (keel installs nothing itself).
        #[arg(long)]
        print: bool,
        /// A systemd user unit, whatever the system.
        #[arg(long, conflicts_with = "launchd")]
        systemd: bool,
        /// A launchd agent plist, whatever the system.
        #[arg(long)]
        launchd: bool,
    },
    /// Stop the daemon (refused while a run is active, unless --force).
    Stop {
        #[arg(long)]
        force: bool,
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Relay stdin and stdout to the daemon's socket byte for byte (starting the daemon if
    /// none runs): `ssh HOST keel daemon bridge` is a connection to HOST's daemon.
    Bridge {
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
    },
}

/// `keel mcp …`: the configured MCP servers.
#[derive(Debug, clap::Args)]
pub struct McpCli {
    #[command(subcommand)]
    pub command: McpCommand,
    /// Also the servers of this file; repeatable.
    #[arg(long, value_name = "FILE", global = true)]
    pub mcp_config: Vec<PathBuf>,
    /// Only the servers of --mcp-config files.
    #[arg(long, global = true)]
    pub strict_mcp_config: bool,
    /// Include this directory's .mcp.json and .keel/mcp.json.
    #[arg(long, global = true)]
    pub trust_project: bool,
    /// JSON output.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum McpCommand {
    /// Connect to every server and show its transport, status, tool count and last error
    /// (exit 1 when one failed).
    List,
    /// Connect to one server and list its tools as the model sees them.
    Tools {
        /// The server's name in the config.
        name: String,
    },
}

#[cfg(test)]
mod tests {
    /// clap's own checks of the whole tree (duplicate names, bad defaults, conflicts naming
    /// unknown ids), which otherwise run only on the commands a test happens to parse.
    #[test]
    fn the_command_tree_passes_claps_checks() {
        use clap::CommandFactory;
        super::Keel::command().debug_assert();
        super::Cli::command().debug_assert();
    }

    #[test]
    fn pi_short_spellings_become_flags_but_not_after_a_double_dash() {
        let args = ["keel", "-nc", "-p", "--", "-nc"].map(String::from);
        assert_eq!(
            super::args::normalize(args),
            ["keel", "--no-context-files", "-p", "--", "-nc"]
        );
    }
}
