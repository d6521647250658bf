//! `keel agents list [--json] [--trust-project]`: the kinds of subagent the `task` tool can
//! start in this directory (`DESIGN.md` §17): the built-ins, `$KEEL_HOME/agents/*.md` and, in
//! a trusted project, `.keel/agents/*.md`, each with its origin, tools and model.

use serde_json::json;

use super::{print, Logs};
use crate::exit::Exit;
use crate::kernel::subagent::{AgentDef, Origin};

/// `keel agents`' commands.
#[derive(Debug, clap::Subcommand)]
pub enum AgentsCommand {
    /// The agent definitions, each with its origin, tools and model.
    List(ListArgs),
}

/// `keel agents list`'s flags.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// A JSON list of the definitions.
    #[arg(long)]
    json: bool,
    /// Include the project's own definitions (.keel/agents) as a trusted run would.
    #[arg(long)]
    trust_project: bool,
}

/// Runs one `keel agents` command; definitions left out are warnings on stderr.
pub fn run(command: AgentsCommand) -> Exit {
    let AgentsCommand::List(args) = command;
    super::run(Logs::Off, async move |env, out| {
        let trusted =
            args.trust_project || crate::setup::trust::dir_trusted(&env.keel_home, &env.cwd);
        let (agents, warnings) = crate::agents::load(&env.keel_home, &env.cwd, trusted);
        for w in warnings {
            out.err(&format!("Warning: {w}\n"));
        }
        let text = match args.json {
            true => as_json(&agents),
            false => table(&agents),
        };
        print(out, &text)
    })
}

fn path(origin: &Origin) -> Option<String> {
    match origin {
        Origin::BuiltIn => None,
        Origin::User(p) | Origin::Project(p) => Some(p.display().to_string()),
    }
}

fn as_json(agents: &[AgentDef]) -> String {
    let list: Vec<_> = agents
        .iter()
        .map(|a| {
            json!({"name": a.name, "description": a.description, "origin": a.origin.word(),
                   "path": path(&a.origin), "tools": a.tools, "model": a.model})
        })
        .collect();
    format!("{}\n", serde_json::Value::Array(list))
}

fn table(agents: &[AgentDef]) -> String {
    let mut out = String::new();
    for a in agents {
        let tools = a
            .tools
            .as_ref()
            .map_or("all tools".to_string(), |t| t.join(", "));
        let model = a.model.as_deref().unwrap_or("the session's model");
        out.push_str(&format!(
            "{} ({}{})\n  {}\n  tools: {tools}; model: {model}\n",
            a.name,
            a.origin.word(),
            path(&a.origin).map_or(String::new(), |p| format!(", {p}")),
            a.description
        ));
    }
    out
}
