//! An OpenSSH server on 127.0.0.1 for the remote tests and the bench: a throwaway host key, one
//! throwaway user key for the user running it, the host key as the client's only known host.
//! Errors are strings (the bench has no panics); the server is killed when the guard drops.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A running sshd; killed on drop.
pub struct Sshd {
    child: Child,
    /// `user@127.0.0.1`.
    pub host: String,
    /// ssh `-o` options that reach it: port, key, known host.
    pub opts: Vec<String>,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Why sshd cannot run here, if it cannot.
pub fn unavailable() -> Option<String> {
    if !Path::new("/usr/sbin/sshd").exists() {
        return Some("/usr/sbin/sshd is not installed (Debian: openssh-server)".into());
    }
    // As root, sshd needs its privilege-separation directory (the package's tmpfiles make it
    // at boot; .ci/run makes it).
    if nix::unistd::geteuid().is_root() && !Path::new("/run/sshd").is_dir() {
        return Some("/run/sshd is missing (mkdir -m 755 /run/sshd)".into());
    }
    for tool in ["ssh", "ssh-keygen"] {
        if Command::new(tool).arg("-V").output().is_err() {
            return Some(format!("{tool} is not installed"));
        }
    }
    None
}

fn keygen(path: &Path) -> Result<(), String> {
    let ok = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .map_err(|e| format!("ssh-keygen: {e}"))?;
    ok.success()
        .then_some(())
        .ok_or_else(|| format!("ssh-keygen failed: {ok}"))
}

/// Starts sshd with its files in `dir`; its sessions get `PATH` and `HOME` as given. Returns
/// once sshd says it listens.
pub fn start(dir: &Path, path: &str, home: &Path) -> Result<Sshd, String> {
    let io = |e: std::io::Error| format!("sshd setup: {e}");
    std::fs::create_dir_all(dir).map_err(io)?;
    let host_key = dir.join("host_key");
    let user_key = dir.join("user_key");
    keygen(&host_key)?;
    keygen(&user_key)?;
    std::fs::copy(dir.join("user_key.pub"), dir.join("authorized_keys")).map_err(io)?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(io)?
        .port();
    let host_pub = std::fs::read_to_string(dir.join("host_key.pub")).map_err(io)?;
    let known = dir.join("known_hosts");
    std::fs::write(&known, format!("[127.0.0.1]:{port} {host_pub}")).map_err(io)?;
    let config = dir.join("sshd_config");
    std::fs::write(
        &config,
        format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\n\
             PidFile {}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
             PermitRootLogin prohibit-password\nLogLevel INFO\nSetEnv PATH={path} HOME={}\n",
            host_key.display(),
            dir.join("authorized_keys").display(),
            dir.join("sshd.pid").display(),
            home.display(),
        ),
    )
    .map_err(io)?;
    let mut child = Command::new("/usr/sbin/sshd")
        .args(["-D", "-e", "-f"])
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start sshd: {e}"))?;
    let stderr = child.stderr.take();
    let user = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map(|u| u.name)
        .ok_or("no user name for this uid")?;
    // From here on the guard kills sshd whatever happens.
    let sshd = Sshd {
        child,
        host: format!("{user}@127.0.0.1"),
        opts: vec![
            format!("Port={port}"),
            format!("IdentityFile={}", user_key.display()),
            "IdentitiesOnly=yes".into(),
            format!("UserKnownHostsFile={}", known.display()),
            "GlobalKnownHostsFile=/dev/null".into(),
            "StrictHostKeyChecking=yes".into(),
            "LogLevel=ERROR".into(),
        ],
    };
    // sshd says "Server listening on 127.0.0.1 port N." once it listens.
    let mut log = BufReader::new(stderr.ok_or("no sshd stderr pipe")?);
    let mut said = String::new();
    loop {
        let mut line = String::new();
        if log.read_line(&mut line).map_err(io)? == 0 {
            return Err(format!("sshd ended before listening: {said}"));
        }
        said.push_str(&line);
        if line.contains("Server listening on 127.0.0.1") {
            break;
        }
    }
    std::thread::spawn(move || for _ in log.lines() {});
    Ok(sshd)
}
