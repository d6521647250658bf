//! The remote rows of the bench (issue 17 §3): a daemon reached over ssh to localhost (an
//! OpenSSH server this bench starts on 127.0.0.1 with throwaway keys, and `keel daemon bridge`
//! at the other end) against the same daemon over its socket: prompt → first `session/event`,
//! the two connections' prompts interleaved so the machine's noise falls on both, and the time
//! to connect and greet. Skipped, saying so, where sshd is not installed.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use super::daemon::{open, Conn, Daemon, PROMPTS, WARMUP};
use super::{median, path_str, sshd_support, Res, Row, Sandbox};

/// Connections timed for the connect-and-hello row.
const CONNECTS: usize = 10;

/// `ssh -T … HOST KEEL daemon bridge --socket S`, the command line keel's `--remote` runs
/// (`Remote::ssh_args`, in its reconnect form: `BatchMode=yes`, so a bench never waits on a
/// prompt); the child and the connection over its pipes.
fn over_ssh(sshd: &sshd_support::Sshd, keel: &Path, socket: &Path) -> Res<(Child, Conn)> {
    let remote = keel::client::dial::Remote {
        host: sshd.host.clone(),
        ssh: "ssh".into(),
        opts: sshd.opts.clone(),
        keel: path_str(keel)?.to_string(),
        socket: Some(socket.to_path_buf()),
        batch: true,
    };
    let mut cmd = Command::new(&remote.ssh);
    cmd.args(remote.ssh_args())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().map_err(|e| format!("cannot run ssh: {e}"))?;
    let (Some(w), Some(r)) = (child.stdin.take(), child.stdout.take()) else {
        let _ = child.kill();
        return Err("ssh without pipes".into());
    };
    match Conn::greet(Box::new(r), Box::new(w)) {
        Ok(c) => Ok((child, c)),
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(format!("hello over ssh: {e}"))
        }
    }
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

pub fn remote_bench(keel: &Path, hello: &str, rows: &mut Vec<Row>) -> Res<()> {
    if let Some(why) = sshd_support::unavailable() {
        eprintln!("remote rows skipped: {why}");
        return Ok(());
    }
    let sb = Sandbox::new()?;
    let d = Daemon::start(keel, &sb)?;
    let root = sb.home.parent().ok_or("sandbox has no root")?;
    let path = std::env::var("PATH").unwrap_or_default();
    let sshd = sshd_support::start(&root.join("sshd"), &path, root)?;

    // Connect and greet, over the socket and over ssh, in turn.
    let (mut local_connect, mut ssh_connect) = (Vec::new(), Vec::new());
    for _ in 0..CONNECTS {
        let t = Instant::now();
        drop(d.connect()?);
        local_connect.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let (child, c) = over_ssh(&sshd, keel, &d.socket)?;
        ssh_connect.push(t.elapsed().as_secs_f64() * 1e3);
        drop(c);
        stop(child);
    }

    // One session per connection; their prompts alternate.
    let mut local = d.connect()?;
    let (child, mut remote) = over_ssh(&sshd, keel, &d.socket)?;
    let result = (|| {
        let (lid, _, mut lseq) = open(&mut local, &sb, hello)?;
        let (rid, _, mut rseq) = open(&mut remote, &sb, hello)?;
        let (mut l, mut r) = (Vec::new(), Vec::new());
        for i in 0..WARMUP + PROMPTS {
            let lm = local.first_event(&lid, i, &mut lseq)?;
            let rm = remote.first_event(&rid, i, &mut rseq)?;
            if i >= WARMUP {
                l.push(lm);
                r.push(rm);
            }
        }
        Ok::<_, String>((l, r))
    })();
    drop(remote);
    stop(child);
    let (l, r) = result?;
    rows.push(Row::stats(
        &format!("remote: connect + `daemon/hello` over ssh to localhost ({CONNECTS} connections)"),
        &ssh_connect,
        "ms",
        1,
    ));
    rows.push(Row::stats(
        &format!("remote: connect + `daemon/hello` over the local socket ({CONNECTS} connections)"),
        &local_connect,
        "ms",
        3,
    ));
    rows.push(Row::stats(
        &format!(
            "remote: prompt → first `session/event` over ssh to localhost ({PROMPTS} prompts)"
        ),
        &r,
        "ms",
        3,
    ));
    rows.push(Row::stats(
        &format!("remote: the same over the local socket, interleaved ({PROMPTS} prompts)"),
        &l,
        "ms",
        3,
    ));
    rows.push(Row::single(
        "remote: ssh's added latency to the first event (median difference)",
        median(&r) - median(&l),
        "ms",
        3,
    ));
    Ok(())
}
