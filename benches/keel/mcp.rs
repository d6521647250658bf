//! The MCP rows of the bench: `keel -p` wall time with no MCP server, with three healthy stdio
//! servers (the workspace's fixture server) and with one server that never answers
//! `initialize` (bounded by the first call's wait budget, 2 s); and, for the floor under the
//! second, the wall time of three fixture servers started and listed by a bare client with no
//! keel at all (spawn, `initialize`, `tools/list`, end).

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

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

/// The handshake a bare client pipelines to each fixture server in one write.
const HANDSHAKE: &str = concat!(
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}"#,
    "\n",
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    "\n",
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    "\n",
);

/// Three fixture servers started side by side, each sent `initialize`, `initialized` and
/// `tools/list` at once ([`finish`] reads them until the list's answer and ends them).
fn start_servers() -> Res<Vec<std::process::Child>> {
    let mut children = Vec::new();
    for _ in 0..3 {
        let mut c = Command::new(FIXTURE)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start the fixture: {e}"))?;
        c.stdin
            .as_mut()
            .ok_or("no stdin")?
            .write_all(HANDSHAKE.as_bytes())
            .map_err(|e| format!("write to the fixture: {e}"))?;
        children.push(c);
    }
    Ok(children)
}

/// Reads each server until its `tools/list` answer, then ends it by closing its stdin.
fn finish(mut children: Vec<std::process::Child>) -> Res<()> {
    for c in &mut children {
        let mut out = BufReader::new(c.stdout.take().ok_or("no stdout")?);
        let mut line = String::new();
        loop {
            line.clear();
            if out.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
                return Err("the fixture ended before listing its tools".into());
            }
            if line.starts_with(r#"{"jsonrpc":"2.0","id":2,"#) {
                break;
            }
        }
        drop(c.stdin.take());
    }
    for c in &mut children {
        c.wait().map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The three servers by a bare client, no keel: the least any client spends on them. ms.
fn bare_client() -> Res<f64> {
    let start = Instant::now();
    finish(start_servers()?)?;
    Ok(start.elapsed().as_secs_f64() * 1e3)
}

/// `keel -p` with no MCP server and the bare client's three servers started at the same
/// instant, until both ended: what keel with three servers would cost if the servers could
/// start the moment keel's process does and overlap all of it (no design can do better:
/// keel must start and read its config before it knows its servers). ms.
fn perfect_overlap(keel: &std::path::Path, args: &[&str]) -> Res<f64> {
    let sb = Sandbox::new()?;
    let start = Instant::now();
    let mut k = sb.spawn(keel, args)?;
    let servers = start_servers().and_then(finish);
    if servers.is_err() {
        // keel is this bench's: it does not outlive a failed round.
        let _ = k.kill();
    }
    let status = k.wait().map_err(|e| e.to_string())?;
    servers?;
    let elapsed = start.elapsed().as_secs_f64() * 1e3;
    if !status.success() {
        return Err(format!("keel exited with {status}"));
    }
    Ok(elapsed)
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
    let mut bare = Vec::new();
    let mut overlap = Vec::new();
    let run = [
        "-p",
        "--no-session",
        "--provider",
        "scripted",
        "--script",
        hello,
    ];
    let plain = [&run[..], &["hi"]].concat();
    for _ in 0..runs {
        bare.push(bare_client()?);
        overlap.push(perfect_overlap(keel, &plain)?);
        for ((_, servers), t) in cases.iter().zip(&mut times) {
            let sb = Sandbox::new()?;
            let mut args = run.to_vec();
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
    rows.push(Row::stats(
        "3 fixture servers started and listed by a bare client, no keel: wall time",
        &bare,
        "ms",
        1,
    ));
    rows.push(Row::stats(
        "floor: `keel -p` with no MCP server and those 3 servers started at the same instant, until both ended: wall time",
        &overlap,
        "ms",
        1,
    ));
    rows.push(Row::single(
        "floor vs `keel -p` with no MCP server",
        median(&overlap) / medians[0],
        "x",
        2,
    ));

    Ok(())
}
