//! The one question the TUI may ask before it starts: a project whose `.mcp.json` or
//! `.keel/mcp.json` names servers runs them as programs with the user's rights, so they start
//! only once the user trusts the project. Asked once per project on the terminal, in line mode,
//! before the screen is taken; the answer (yes or no) is kept in `$KEEL_HOME/trust.json`.
//! Headless runs never ask (`--trust-project` or an earlier yes).
#![deny(clippy::print_stdout, clippy::print_stderr)]

use crate::mcp::config;
use crate::mode::Env;
use crate::output::Output;

/// Asks about the project's MCP servers if there is anything to ask; records the answer.
pub async fn ask(settings: &crate::setup::Settings, env: &Env, out: &mut Output) {
    let names = config::to_ask_about(
        &crate::setup::mcp::sources(settings, env),
        &env.keel_home,
        &env.cwd,
        &env.vars,
    );
    if names.is_empty() {
        return;
    }
    let listed: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    out.err(&format!(
        "This project ({}) configures MCP servers: {}.\nThey run as programs on this machine with your permissions. Trust this project and start them? [y/N] ",
        env.cwd.display(),
        listed.join(", ")
    ));
    let answer = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await;
    let yes = matches!(&answer, Ok(Ok(a)) if matches!(a.trim(), "y" | "Y" | "yes" | "Yes"));
    let recorded = match yes {
        true => config::record_trust(&env.keel_home, &env.cwd),
        false => config::record_decline(&env.keel_home, &env.cwd),
    };
    if let Err(e) = recorded {
        out.err(&format!(
            "Warning: cannot remember the answer in trust.json: {e}\n"
        ));
    }
    if !yes {
        out.err("Not trusted: the project's servers stay off (keel --trust-project starts them once).\n");
    }
}
