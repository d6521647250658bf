//! `keel hooks list [--json] [--settings FILE|JSON]`: every hook the settings files of this
//! directory configure, with its event, matcher, command, timeout, the file it came from and
//! its trust (a project's own hooks run once trusted by their hash, or with `--trust-project`).

use serde_json::json;

use super::{print, Logs};
use crate::exit::Exit;
use crate::setup::hook_list::HookRow;

/// `keel hooks`' commands.
#[derive(Debug, clap::Subcommand)]
pub enum HooksCommand {
    /// The configured hooks, each with its event, matcher, origin and trust.
    List(ListArgs),
}

/// `keel hooks list`'s flags.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// One JSON object per hook, in a list.
    #[arg(long)]
    json: bool,
    /// Settings above the project's, as a run's `--settings` gives them.
    #[arg(long, value_name = "FILE|JSON")]
    settings: Option<String>,
}

/// Runs one `keel hooks` command; a settings file that does not parse is a config error.
pub fn run(command: HooksCommand) -> Exit {
    let HooksCommand::List(args) = command;
    super::run(Logs::Off, async move |env, out| {
        let (all, warnings) = crate::setup::hook_list::list(
            crate::wire::protocol::spec::SettingsLayer::of_flag(args.settings.as_deref()).as_ref(),
            env,
        )?;
        for w in warnings {
            out.err(&format!("Warning: {w}\n"));
        }
        let text = if args.json {
            as_json(&all)
        } else {
            table(&all)
        };
        print(out, &text)
    })
}

fn as_json(all: &[HookRow]) -> String {
    let list: Vec<_> = all
        .iter()
        .map(|h| {
            json!({"event": h.event, "matcher": h.matcher, "command": h.command,
                   "timeout": h.timeout, "origin": h.origin, "runs": h.runs(),
                   "trust": h.trust.word()})
        })
        .collect();
    format!("{}\n", serde_json::Value::Array(list))
}

fn table(all: &[HookRow]) -> String {
    if all.is_empty() {
        return "no hooks configured\n".into();
    }
    let mut s = String::new();
    for h in all {
        s.push_str(&format!(
            "{} [{}] {}\n    from {} ({})\n",
            h.event,
            h.matcher,
            h.command,
            h.origin,
            h.trust_text()
        ));
    }
    s
}
