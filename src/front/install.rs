//! `keel daemon install --print`: the text of a unit that starts `keel daemon run --idle-exit
//! 0` at login (a systemd user unit, or a launchd agent on macOS), so scheduled tasks run
//! without anyone starting a daemon. Only builds text: it installs nothing and never prints.

use std::path::Path;

/// Which service manager the unit is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Systemd,
    Launchd,
}

impl Kind {
    /// The one a flag asks for, else the system's (launchd on macOS, systemd elsewhere).
    pub fn pick(systemd: bool, launchd: bool) -> Kind {
        match (systemd, launchd) {
            (true, _) => Kind::Systemd,
            (_, true) => Kind::Launchd,
            _ if cfg!(target_os = "macos") => Kind::Launchd,
            _ => Kind::Systemd,
        }
    }
}

/// The unit for `exe` (absolute) with `KEEL_HOME` set to `keel_home`.
pub fn unit(kind: Kind, exe: &Path, keel_home: &Path) -> String {
    match kind {
        Kind::Systemd => systemd(exe, keel_home),
        Kind::Launchd => launchd(exe, keel_home),
    }
}

fn systemd(exe: &Path, keel_home: &Path) -> String {
    format!(
        "# keel daemon: live sessions and scheduled tasks. Install with:\n\
         #   keel daemon install --print > ~/.config/systemd/user/keel.service\n\
         #   systemctl --user enable --now keel.service\n\
         # Provider keys for scheduled runs: add Environment=NAME=VALUE lines, or an\n\
         # EnvironmentFile= of your own (mode 0600).\n\
         [Unit]\n\
         Description=keel daemon (sessions and scheduled tasks)\n\
         \n\
         [Service]\n\
         Type=simple\n\
         ExecStart={} daemon run --idle-exit 0\n\
         Environment={}\n\
         Environment=KEEL_LOG=info\n\
         Restart=on-failure\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        systemd_word(&exe.display().to_string()),
        systemd_word(&format!("KEEL_HOME={}", keel_home.display())),
    )
}

/// A word of a systemd command line or assignment: `%` doubled; quoted when it has spaces,
/// quotes or backslashes.
fn systemd_word(s: &str) -> String {
    let s = s.replace('%', "%%");
    if !s.contains(|c: char| c.is_whitespace() || c == '"' || c == '\\' || c == '\'') {
        return s;
    }
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

fn launchd(exe: &Path, keel_home: &Path) -> String {
    let args: String = [
        &exe.display().to_string(),
        "daemon",
        "run",
        "--idle-exit",
        "0",
    ]
    .iter()
    .map(|a| format!("    <string>{}</string>\n", xml(a)))
    .collect();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!-- keel daemon: live sessions and scheduled tasks. Install with:\n\
         \x20 keel daemon install --print > ~/Library/LaunchAgents/dev.keel.daemon.plist\n\
         \x20 launchctl load -w ~/Library/LaunchAgents/dev.keel.daemon.plist\n\
         Provider keys for scheduled runs go in EnvironmentVariables. -->\n\
         <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
         <plist version=\"1.0\">\n\
         <dict>\n\
         \x20 <key>Label</key>\n\
         \x20 <string>dev.keel.daemon</string>\n\
         \x20 <key>ProgramArguments</key>\n\
         \x20 <array>\n{args}  </array>\n\
         \x20 <key>EnvironmentVariables</key>\n\
         \x20 <dict>\n\
         \x20   <key>KEEL_HOME</key>\n\
         \x20   <string>{}</string>\n\
         \x20   <key>KEEL_LOG</key>\n\
         \x20   <string>info</string>\n\
         \x20 </dict>\n\
         \x20 <key>RunAtLoad</key>\n\
         \x20 <true/>\n\
         \x20 <key>KeepAlive</key>\n\
         \x20 <dict>\n\
         \x20   <key>SuccessfulExit</key>\n\
         \x20   <false/>\n\
         \x20 </dict>\n\
         \x20 <key>StandardErrorPath</key>\n\
         \x20 <string>{}</string>\n\
         </dict>\n\
         </plist>\n",
        xml(&keel_home.display().to_string()),
        xml(&keel_home.join("logs").join("daemon.log").display().to_string()),
    )
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_systemd_unit_runs_the_daemon_forever_with_quoted_paths() {
        let u = unit(
            Kind::Systemd,
            Path::new("/opt/my keel/keel"),
            Path::new("/home/me/.keel"),
        );
        assert!(
            u.contains("ExecStart=\"/opt/my keel/keel\" daemon run --idle-exit 0\n"),
            "{u}"
        );
        assert!(u.contains("Environment=KEEL_HOME=/home/me/.keel\n"), "{u}");
        assert!(u.contains("WantedBy=default.target"), "{u}");
        assert!(
            u.contains("systemctl --user enable --now keel.service"),
            "{u}"
        );
        assert_eq!(systemd_word("/a%b"), "/a%%b");
    }

    #[test]
    fn the_launchd_agent_runs_the_daemon_at_load_with_escaped_paths() {
        let u = unit(
            Kind::Launchd,
            Path::new("/Apps/k&l/keel"),
            Path::new("/Users/me/.keel"),
        );
        assert!(u.contains("<string>/Apps/k&amp;l/keel</string>"), "{u}");
        assert!(
            u.contains("<string>--idle-exit</string>\n    <string>0</string>"),
            "{u}"
        );
        assert!(u.contains("<key>RunAtLoad</key>\n  <true/>"), "{u}");
        assert!(u.contains("<string>/Users/me/.keel</string>"), "{u}");
    }

    #[test]
    fn flags_pick_the_kind_over_the_system() {
        assert_eq!(Kind::pick(true, false), Kind::Systemd);
        assert_eq!(Kind::pick(false, true), Kind::Launchd);
        let native = if cfg!(target_os = "macos") {
            Kind::Launchd
        } else {
            Kind::Systemd
        };
        assert_eq!(Kind::pick(false, false), native);
    }
}
