//! The agent kernel: conversation state, the turn loop, providers, tools, sessions and the one
//! event bus. It knows no front end: no clap, no terminal, no wire format, no stdout. It emits
//! data, never prose or ANSI.

pub mod abort;
pub mod agent;
pub mod budget;
pub mod bus;
pub mod checkpoint;
pub mod clock;
pub mod compaction;
pub mod event;
pub mod failure;
pub(crate) mod field;
pub mod fsx;
pub mod hooks;
pub mod jobs;
pub mod lsp;
pub mod message;
pub mod op;
pub mod output_schema;
pub mod policy;
pub mod private;
pub mod provider;
pub mod recorder;
pub mod sandbox;
pub mod session;
pub mod subagent;
pub mod tool;
pub(crate) mod tool_loop;
pub(crate) mod turn;
pub mod url;
pub(crate) mod words;

/// The default system prompt: who the agent is and how it should use its tools.
pub fn default_system_prompt(cwd: &std::path::Path, tools: &[String]) -> String {
    format!(
        "You are keel, a coding agent working in a software project on the user's machine.\n\
         Use the tools to inspect and change files and to run commands; read before you edit; \
         keep edits minimal and exact; report what you did and what you found.\n\
         Available tools: {}.\n\
         Current working directory: {}",
        tools.join(", "),
        cwd.display()
    )
}
