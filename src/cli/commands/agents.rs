//! `keel agents list [--json] [--trust-project]`: the kinds of subagent the `task` tool can
//! start in this directory (`DESIGN.md` §17): the built-ins, the user's (`~/.claude/agents/*.md`,
//! `$KEEL_HOME/agents/*.md`) and, in a trusted project, the project's (`.claude/agents/*.md`,
//! `.keel/agents/*.md`), each with its origin and file, tools and model.

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
    /// Include the project's own definitions (.keel/agents, .claude/agents) as a trusted run
    /// would.
    #[arg(long)]
    trust_project: bool,
}

/// Runs one `keel agents` command; definitions left out are warnings on stderr.
pub fn run(command: AgentsCommand) -> Exit {
    let AgentsCommand::List(args) = command;
    super::run(Logs::Off, async move |env, out| {
        let trusted =
            args.trust_project || crate::setup::trust::dir_trusted(&env.keel_home, &env.cwd);
        let loaded = crate::setup::settings::load(None, env)?;
        let claude = crate::setup::settings::claude_home(&loaded, env);
        let (agents, warnings) =
            crate::agents::load(&env.keel_home, claude.as_deref(), &env.cwd, trusted);
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
    origin.path().map(|p| p.display().to_string())
}

/// What `isolation` asks for that keel does not do yet.
fn isolation_note(a: &AgentDef) -> Option<String> {
    a.isolation
        .as_deref()
        .map(|i| format!("isolation: {i} not supported yet (runs in the session's directory)"))
}

fn as_json(agents: &[AgentDef]) -> String {
    let list: Vec<_> = agents
        .iter()
        .map(|a| {
            json!({"name": a.name, "description": a.description, "origin": a.origin.word(),
                   "label": a.origin.label(), "path": path(&a.origin), "tools": a.tools,
                   "model": a.model, "isolation": a.isolation,
                   "note": isolation_note(a)})
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
            "{} ({})\n  {}\n  tools: {tools}; model: {model}\n",
            a.name,
            a.origin.label(),
            a.description
        ));
        if let Some(note) = isolation_note(a) {
            out.push_str(&format!("  {note}\n"));
        }
    }
    out
}
