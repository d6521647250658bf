//! `keel lsp status [--json] [--start] [run flags…]`: the language servers a session here
//! would use (`docs/lsp.md`): each with its command (and where it was found), files, state,
//! root, open documents and last error. `--start` starts each in the session's sandbox, reports
//! how that went, and stops it.

use super::Logs;
use crate::cli::args::Cli;
use crate::exit::Exit;
use crate::kernel::lsp::{ServerStatus, State};

/// `keel lsp`'s commands.
#[derive(Debug, clap::Subcommand)]
pub enum LspCommand {
    /// The language servers a session here would use: command, files, state, root, open
    /// documents, last error.
    #[command(mut_args = only(STATUS_FLAGS))]
    Status {
        /// Start each server (in the sandbox, as a session would), report, then stop it.
        #[arg(long)]
        start: bool,
        #[command(flatten)]
        run: Box<Cli>,
    },
}

/// The run flags that shape `keel lsp status`: the settings behind the servers, the sandbox
/// they start in, and `--json`.
const STATUS_FLAGS: &[&str] = &[
    "start",
    "json",
    "settings",
    "trust_project",
    "sandbox",
    "sandbox_network",
    "sandbox_network_allow",
];

/// Hides from the help every run flag but `applies`.
fn only(applies: &'static [&'static str]) -> impl FnMut(clap::Arg) -> clap::Arg {
    move |arg| match applies.contains(&arg.get_id().as_str()) {
        true => arg,
        false => arg.hide(true),
    }
}

/// Runs one `keel lsp` command.
pub fn run(command: LspCommand) -> Exit {
    let LspCommand::Status { start, run: cli } = command;
    super::run(Logs::Off, async move |env, out| {
        let settings = crate::cli::invocation::settings(&cli, env)?;
        let (config, _, _) = crate::setup::agent_config(&settings, env, false)?;
        let servers = match &config.lsp {
            Some(lsp) => {
                if start {
                    lsp.start_all().await;
                }
                let list = lsp.status().await;
                lsp.shutdown().await;
                list
            }
            None => Vec::new(),
        };
        let text = match cli.json {
            true => format!(
                "{}\n",
                serde_json::to_string_pretty(&servers).unwrap_or_default()
            ),
            false => table(&servers),
        };
        super::print(out, &text)
    })
}

fn state(s: State) -> &'static str {
    match s {
        State::NotStarted => "not started",
        State::Running => "running",
        State::Idle => "idle (stopped)",
        State::Crashed => "crashed",
        State::Missing => "missing",
        State::Failed => "failed",
    }
}

fn table(servers: &[ServerStatus]) -> String {
    if servers.is_empty() {
        return "No language servers: none configured in lsp.servers and none of the built-in \
                defaults (rust-analyzer, pyright-langserver, typescript-language-server, clangd, \
                gopls) found on PATH.\n"
            .into();
    }
    let mut out = String::new();
    for s in servers {
        let origin = match s.configured {
            true => "configured",
            false => "built-in default",
        };
        let found = match &s.found {
            Some(p) => p.display().to_string(),
            None => "not found on PATH".into(),
        };
        out.push_str(&format!(
            "{} ({origin}): {}\n  command: {} ({found})\n  files: {}\n  root: {}\n  open documents: {}\n",
            s.name,
            state(s.state),
            s.command,
            s.extensions.join(" "),
            s.root.display(),
            s.open_documents,
        ));
        if let Some(e) = &s.last_error {
            out.push_str(&format!("  last error: {e}\n"));
        }
    }
    out
}
