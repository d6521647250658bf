//! `keel hooks list [--json] [--settings FILE|JSON]`: every hook the settings files of this
//! directory configure, with its event, matcher, command, timeout, the file it came from and
//! whether it runs (a project's own hooks need `--trust-project`).

use serde_json::json;

use super::{print, Logs};
use crate::exit::Exit;
use crate::kernel::hooks::HookConfig;
use crate::settings::Level;

/// `keel hooks`' commands.
#[derive(Debug, clap::Subcommand)]
pub enum HooksCommand {
    /// The configured hooks, each with its event, matcher, origin and whether it runs.
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

/// One configured hook, as listed.
struct Listed {
    event: &'static str,
    matcher: String,
    command: String,
    timeout: Option<f64>,
    origin: String,
    /// `always`, or `with --trust-project` for a project's own files.
    runs: &'static str,
}

/// Runs one `keel hooks` command; a settings file that does not parse is a config error.
pub fn run(command: HooksCommand) -> Exit {
    let HooksCommand::List(args) = command;
    super::run(Logs::Off, async move |env, out| {
        let loaded = crate::setup::settings::load(args.settings.as_deref(), env)?;
        let mut all = Vec::new();
        for layer in &loaded.merged.hook_layers {
            let project = matches!(layer.origin.level, Level::Project | Level::Local);
            let (config, warnings) = HookConfig::parse(&layer.value, &layer.origin.to_string());
            for w in warnings {
                out.err(&format!("Warning: {w}\n"));
            }
            for (event, matcher, hook) in config.list() {
                all.push(Listed {
                    event: event.as_str(),
                    matcher,
                    command: hook.command,
                    timeout: hook.timeout.map(|t| t.as_secs_f64()),
                    origin: hook.origin,
                    runs: if project {
                        "with --trust-project"
                    } else {
                        "always"
                    },
                });
            }
        }
        let text = if args.json {
            as_json(&all)
        } else {
            table(&all)
        };
        print(out, &text)
    })
}

fn as_json(all: &[Listed]) -> String {
    let list: Vec<_> = all
        .iter()
        .map(|h| {
            json!({"event": h.event, "matcher": h.matcher, "command": h.command,
                   "timeout": h.timeout, "origin": h.origin, "runs": h.runs})
        })
        .collect();
    format!("{}\n", serde_json::Value::Array(list))
}

fn table(all: &[Listed]) -> String {
    if all.is_empty() {
        return "no hooks configured\n".into();
    }
    let mut s = String::new();
    for h in all {
        s.push_str(&format!(
            "{} [{}] {}\n    from {} (runs {})\n",
            h.event, h.matcher, h.command, h.origin, h.runs
        ));
    }
    s
}
