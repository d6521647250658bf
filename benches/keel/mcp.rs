//! The MCP rows of the bench: `keel -p` wall time with no MCP server, with three healthy stdio
//! servers (the workspace's fixture server) and with one server that never answers
//! `initialize` (bounded by the first call's wait budget, 2 s).

use std::fs;

use super::{median, path_str, Res, Row, Sandbox};

const FIXTURE: &str = env!("CARGO_BIN_EXE_keel-mcp-fixture");

/// A server's name and the fixture's arguments.
type Server<'a> = (&'a str, &'a [&'a str]);

fn config(sb: &Sandbox, servers: &[Server]) -> Res<String> {
    let entries: Vec<String> = servers
        .iter()
        .map(|(name, args)| {
            let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
            format!(
                r#""{name}":{{"command":{FIXTURE:?},"args":[{}]}}"#,
                args.join(",")
            )
        })
        .collect();
    let path = sb.cwd.join("mcp.json");
    fs::write(
        &path,
        format!(r#"{{"mcpServers":{{{}}}}}"#, entries.join(",")),
    )
    .map_err(|e| format!("write mcp.json: {e}"))?;
    Ok(path_str(&path)?.to_string())
}

pub fn mcp_bench(keel: &std::path::Path, hello: &str, rows: &mut Vec<Row>, runs: usize) -> Res<()> {
    let cases: [(&str, &[Server]); 3] = [
        ("no MCP server", &[]),
        (
            "3 healthy stdio MCP servers",
            &[("a", &[]), ("b", &[]), ("c", &[])],
        ),
        ("1 hung MCP server", &[("stuck", &["--hang"])]),
    ];
    // Rounds run the cases in turn, so that the machine's noise falls on all of them alike.
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    for _ in 0..runs {
        for ((_, servers), t) in cases.iter().zip(&mut times) {
            let sb = Sandbox::new()?;
            let mut args = vec![
                "-p",
                "--no-session",
                "--provider",
                "scripted",
                "--script",
                hello,
            ];
            let cfg;
            if !servers.is_empty() {
                cfg = config(&sb, servers)?;
                args.extend(["--mcp-config", cfg.as_str()]);
            }
            args.push("hi");
            t.push(sb.time_run(keel, &args)?.as_secs_f64() * 1e3);
        }
    }
    let mut medians = Vec::new();
    for ((label, _), t) in cases.iter().zip(&times) {
        medians.push(median(t));
        rows.push(Row::stats(
            &format!("`keel -p`, {label}: wall time"),
            t,
            "ms",
            1,
        ));
    }
    rows.push(Row::single(
        "`keel -p`, 3 healthy MCP servers vs none (goal ≤ 1.5x)",
        medians[1] / medians[0],
        "x",
        2,
    ));
    Ok(())
}
