//! The one question the TUI may ask before it starts: a project's MCP servers (`.mcp.json`,
//! `.keel/mcp.json`) and the hooks of its own settings files run as programs with the user's
//! rights, and its `allow` rules, `env` and the settings that widen the sandbox loosen what the
//! agent may do, so none of them apply until the user trusts the project. One question lists all of
//! it, asked on the terminal in line mode before the screen is taken; the answer is kept in
//! `$KEEL_HOME/trust.json` (`setup::trust`: a hook by its hash, so a changed one is asked about
//! again). Headless runs never ask (`--trust-project`, or what was trusted here).
#![deny(clippy::print_stdout, clippy::print_stderr)]

use crate::mode::Env;
use crate::output::Output;
use crate::setup::trust::{self, Question};

/// Asks about what the project wants trusted, if anything waits; records the answer.
pub async fn ask(settings: &crate::setup::Settings, env: &Env, out: &mut Output) {
    let holds = trust::Holdings {
        servers: crate::setup::mcp::project_servers(settings, env),
        instructions: crate::setup::project_instructions(settings, env),
    };
    let Some(q) = trust::question(settings, env, holds) else {
        return;
    };
    out.err(&text(&q, env));
    let answer = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await;
    let yes = matches!(&answer, Ok(Ok(a)) if matches!(a.trim(), "y" | "Y" | "yes" | "Yes"));
    if let Err(e) = trust::answer(settings, env, &q, yes) {
        out.err(&format!(
            "Warning: cannot remember the answer in trust.json: {e}\n"
        ));
    }
    if !yes {
        out.err("Not trusted: none of it applies (keel --trust-project trusts it for one run).\n");
    }
}

/// The question: what the project wants, each kind under its heading, one item a line.
fn text(q: &Question, env: &Env) -> String {
    let mut s = format!("This project ({}) wants:\n", env.cwd.display());
    let kinds = [
        ("MCP servers", &q.servers),
        ("agents and skills", &q.instructions),
        ("hooks", &q.hooks),
        ("allow rules", &q.allow),
        ("env", &q.env),
        ("a wider sandbox", &q.sandbox),
        ("fewer approvals", &q.mode),
        ("a status line command", &q.status_line),
    ];
    for (kind, items) in kinds.iter().filter(|(_, items)| !items.is_empty()) {
        s.push_str(&format!("  {kind}:\n"));
        for item in items.iter() {
            s.push_str(&format!("    `{item}`\n"));
        }
    }
    let run = match q.servers.is_empty() && q.hooks.is_empty() && q.status_line.is_empty() {
        true => "",
        false => "Servers, hooks and status lines run as programs on this machine with your permissions. ",
    };
    s.push_str(&format!("{run}Trust this project? [y/N] "));
    s
}
