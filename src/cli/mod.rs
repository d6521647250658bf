//! keel's one command line (clap derive): the root, its subcommands and the dispatch. A run's
//! own flags are in [`args`] (a leaf the daemon reads too); each subcommand's arguments and
//! `run` are in [`commands`], one file each. No decisions here: `mode.rs` interprets the flags.

pub mod args;
pub mod commands;
pub mod invocation;
pub mod spec;

use args::Cli;
use commands::attach::AttachArgs;
use commands::config::ConfigCommand;
use commands::daemon::DaemonAction;
use commands::debug::DebugCommand;
use commands::mcp::McpCli;
use commands::ps::PsArgs;
use commands::schedule::ScheduleAction;

use clap::Parser;

use crate::exit::Exit;
use crate::front::json::result_line;
use crate::front::RunSummary;
use crate::output::{ColorChoice, Output};

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
    /// Manage the per-user daemon: sessions that outlive every window.
    Daemon {
        #[command(subcommand)]
        action: DaemonAction,
    },
    /// List the sessions live in the daemon.
    Ps(PsArgs),
    /// Show a session live in the daemon in the TUI (the only one, when no id is given).
    Attach(AttachArgs),
    /// The daemon's sessions in a browser: serves a page on 127.0.0.1 and prints its URL.
    Web(commands::web::WebArgs),
    /// Tasks the daemon runs on a schedule (see docs/schedules.md).
    Schedule {
        #[command(subcommand)]
        action: ScheduleAction,
    },
    /// Inspect the configured MCP servers.
    Mcp(McpCli),
    /// What a run would send the model, without running it.
    Debug {
        #[command(subcommand)]
        command: DebugCommand,
    },
    /// The settings files: the merged values and their origins, the files looked at, the
    /// schema.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// The hooks the settings files configure: event, matcher, command, origin, whether it
    /// runs.
    Hooks {
        #[command(subcommand)]
        command: commands::hooks::HooksCommand,
    },
    /// The kinds of subagent the `task` tool can start here, with their origin.
    Agents {
        #[command(subcommand)]
        command: commands::agents::AgentsCommand,
    },
    /// The language servers a session here would use, and their state.
    Lsp {
        #[command(subcommand)]
        command: commands::lsp::LspCommand,
    },
    /// keel's own sandbox helper (the Landlock fallback): restricts itself, then execs.
    #[command(name = "__sandbox-exec", hide = true)]
    SandboxExec(commands::sandbox::ExecArgs),
    /// keel's sandbox zygote: inside the session's sandbox, starts each command keel hands it.
    #[command(name = "__sandbox-zygote", hide = true)]
    SandboxZygote,
    /// keel's seccomp walls, inside bubblewrap, for one command started there on its own.
    #[command(name = "__sandbox-walls", hide = true)]
    SandboxWalls(commands::sandbox::WallsArgs),
    /// keel's relay to its network-allowlist proxy, inside a bubblewrap sandbox.
    #[command(name = "__sandbox-forward", hide = true)]
    SandboxForward(commands::sandbox_net::ForwardArgs),
    /// The worktrees keel made for sessions of this repository (`-w`): list, rm, prune,
    /// merge.
    Worktree {
        #[command(subcommand)]
        command: commands::worktree::WorktreeCommand,
    },
    /// A session's checkpoints, and rewinding its files and conversation to one.
    Rewind(commands::rewind::RewindArgs),
    /// Print keel's man page (roff) on stdout: `keel man > keel.1 && man -l keel.1`.
    Man,
    /// Print a shell completion script on stdout.
    Completions(commands::completions::CompletionsArgs),
}

/// Parses the command line `args` (the process's, read once by `app`) and runs what it names:
/// a run (`run`, given by `app`, its composition root) or one subcommand (`commands::*::run`).
pub fn main(args: impl IntoIterator<Item = String>, run: impl FnOnce(Cli) -> Exit) -> Exit {
    let args: Vec<String> = args.into_iter().collect();
    // A session's zygote and its reapers start on the way to a command: they skip the parser.
    match args.get(1).map(String::as_str) {
        Some("__sandbox-zygote") => return commands::sandbox::zygote(&args),
        Some("__sandbox-reaper") => return commands::sandbox::reaper(&args),
        _ => {}
    }
    let args = help_of_help(args::normalize(args));
    let keel = match parse(&args) {
        Ok(keel) => keel,
        Err(e) => return clap_exit(e, &args),
    };
    match keel.command {
        None => {
            let mut cli = keel.run;
            cli.argv = args.into_iter().skip(1).collect();
            run(cli)
        }
        Some(Command::Daemon { action }) => commands::daemon::run(action),
        Some(Command::Ps(args)) => commands::ps::run(args),
        Some(Command::Attach(args)) => commands::attach::run(args),
        Some(Command::Web(args)) => commands::web::run(args),
        Some(Command::Schedule { action }) => commands::schedule::run(action),
        Some(Command::Mcp(cli)) => commands::mcp::run(cli),
        Some(Command::Debug { command }) => commands::debug::run(command, &args),
        Some(Command::Config { command }) => commands::config::run(command),
        Some(Command::Hooks { command }) => commands::hooks::run(command),
        Some(Command::Agents { command }) => commands::agents::run(command),
        Some(Command::Lsp { command }) => commands::lsp::run(command),
        Some(Command::SandboxExec(a)) => commands::sandbox::exec(a),
        Some(Command::SandboxForward(a)) => commands::sandbox_net::run(a),
        Some(Command::SandboxZygote) => commands::sandbox::zygote(&args),
        Some(Command::SandboxWalls(a)) => commands::sandbox::walls(a),
        Some(Command::Rewind(args)) => commands::rewind::run(args),
        Some(Command::Worktree { command }) => commands::worktree::run(command),
        Some(Command::Man) => commands::man::run(),
        Some(Command::Completions(args)) => commands::completions::run(args),
    }
}

/// clap's `help` subcommand takes command names only: `keel [CMD…] help … --help` (or `-h`)
/// is read as `keel [CMD…] help help`, the help of `help`, as git and cargo answer it.
fn help_of_help(args: Vec<String>) -> Vec<String> {
    use clap::CommandFactory;
    let root = Keel::command();
    let mut cmd = &root;
    for (i, word) in args.iter().enumerate().skip(1) {
        if word == "help" && cmd.has_subcommands() {
            let rest = args[i + 1..].iter().take_while(|a| *a != "--");
            if rest.into_iter().any(|a| a == "--help" || a == "-h") {
                let mut asked = args[..=i].to_vec();
                asked.push("help".to_string());
                return asked;
            }
            break;
        }
        match cmd.find_subcommand(word) {
            Some(sub) => cmd = sub,
            None => break,
        }
    }
    args
}

/// The parse of `args`, refusing what a debug command does not take.
fn parse(args: &[String]) -> Result<Keel, clap::Error> {
    use clap::{CommandFactory, FromArgMatches};
    let matches = Keel::command().try_get_matches_from(args)?;
    commands::debug::refuse_what_does_not_apply(&matches)?;
    Keel::from_arg_matches(&matches)
}

/// A parse that ended in help, a version or a usage error: `args` is the command line it read.
pub(crate) fn clap_exit(e: clap::Error, args: &[String]) -> Exit {
    use clap::error::ErrorKind;
    let mut out = Output::stdio(ColorChoice::Never);
    let text = e.render().to_string();
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            match out.out(text.as_bytes()).and_then(|_| out.flush()) {
                Ok(()) => Exit::Success,
                Err(_) => out.stdout_exit(),
            }
        }
        _ => {
            // A script that asked for JSON still gets its one result line.
            if json_requested(args.iter().skip(1)) {
                let line = result_line(
                    &RunSummary::default(),
                    Exit::Usage,
                    None,
                    0,
                    Some(("usage", text.lines().next().unwrap_or("bad arguments"))),
                );
                let _ = out.out(line.as_bytes()).and_then(|_| out.flush());
            }
            out.err(&text);
            Exit::Usage
        }
    }
}

/// Whether raw arguments ask for JSON mode (used only when flag parsing failed).
fn json_requested<'a>(args: impl Iterator<Item = &'a String>) -> bool {
    let mut prev_mode = false;
    for a in args {
        if a == "--" {
            return false;
        }
        if a == "--json" || a == "--mode=json" || (prev_mode && a == "json") {
            return true;
        }
        prev_mode = a == "--mode";
    }
    false
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
