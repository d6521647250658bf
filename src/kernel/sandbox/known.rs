//! What earlier keel processes found out about a bubblewrap, kept in
//! `$KEEL_HOME/cache/sandbox-probe`: whether it works here, and with a fresh `/proc`. Probing
//! means starting a sandbox and waiting for it (16-20 ms on a 2-core machine, more than a whole
//! `keel -p` run without one), so a session whose bubblewrap is known starts without waiting:
//! its zygote comes up while the rest of the session does, and a run that never calls `bash`
//! never waits for it at all.
//!
//! What is known holds only for the same facts: keel's version, the bubblewrap's path and its
//! file (size, mtime, inode), the kernel's release, the user, and the kernel switches that
//! decide whether unprivileged user namespaces may be made (`unprivileged_userns_clone`,
//! `max_user_namespaces`, AppArmor's `apparmor_restrict_unprivileged_userns`, and when
//! `/etc/apparmor.d` last changed); and for a day
//! at most. Anything else, or a file that does not parse, is not known: the sandbox is probed
//! as before and the finding written. Knowing wrongly that bubblewrap works fails closed: the
//! zygote does not come up and each `bash` call is refused with bubblewrap's error.

use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::bwrap::Bwrap;

/// How long a finding is trusted.
const FRESH: Duration = Duration::from_secs(24 * 60 * 60);

/// The kernel switches a finding depends on (those that exist here are part of its facts).
const SWITCHES: [&str; 3] = [
    "/proc/sys/kernel/unprivileged_userns_clone",
    "/proc/sys/user/max_user_namespaces",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
];

/// AppArmor's profiles, which may allow or forbid bubblewrap's user namespaces.
const APPARMOR: &str = "/etc/apparmor.d";

/// The findings file under `keel_home`.
pub fn file(keel_home: &Path) -> PathBuf {
    keel_home.join("cache").join("sandbox-probe")
}

/// What is known of the bubblewrap at `path`: `Some(None)` it does not work, `Some(Some(b))`
/// it works as `b`; `None` nothing is known (or it is out of date).
pub fn load(keel_home: &Path, path: &Path) -> Option<Option<Bwrap>> {
    let file = file(keel_home);
    let age = std::fs::metadata(&file).ok()?.modified().ok()?;
    let fresh = SystemTime::now()
        .duration_since(age)
        .is_ok_and(|a| a < FRESH);
    if !fresh {
        return None;
    }
    let text = std::fs::read_to_string(&file).ok()?;
    let (facts, finding) = text.rsplit_once("finding ")?;
    if facts != self::facts(path)? {
        return None;
    }
    let bwrap = |proc_mount| Bwrap {
        path: path.to_path_buf(),
        proc_mount,
    };
    match finding.trim_end() {
        "works" => Some(Some(bwrap(true))),
        "works-without-proc" => Some(Some(bwrap(false))),
        "fails" => Some(None),
        _ => None,
    }
}

/// Writes what a probe found of the bubblewrap at `path` (a failure to write is no error:
/// the next session probes again).
pub fn save(keel_home: &Path, path: &Path, found: Option<&Bwrap>) {
    let Some(mut text) = facts(path) else {
        return;
    };
    text.push_str(match found {
        Some(b) if b.proc_mount => "finding works\n",
        Some(_) => "finding works-without-proc\n",
        None => "finding fails\n",
    });
    let file = file(keel_home);
    let written = file
        .parent()
        .map_or(Ok(()), crate::kernel::private::create_dir_all)
        .and_then(|()| {
            let temp = file.with_extension(format!("tmp{}", std::process::id()));
            crate::kernel::private::write_file(&temp, text.as_bytes())?;
            std::fs::rename(&temp, &file)
        });
    if let Err(e) = written {
        tracing::info!("cannot write {}: {e}", file.display());
    }
}

/// Forgets what is known (a zygote that was known to work did not come up).
pub fn forget(keel_home: &Path) {
    let _ = std::fs::remove_file(file(keel_home));
}

/// The facts a finding about `path` holds for, one per line; `None` when the bubblewrap
/// cannot be looked at.
fn facts(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    let mut text = format!(
        "keel {}\nbwrap {} {} {} {} {}\n",
        env!("CARGO_PKG_VERSION"),
        path.display(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ino()
    );
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let _ = writeln!(text, "kernel {}", release.trim());
    let _ = writeln!(text, "uid {}", nix::unistd::getuid());
    // A finding made with other flags says nothing of these.
    let _ = writeln!(text, "flags {}", super::bwrap::WALLS.join(" "));
    for switch in SWITCHES {
        if let Ok(value) = std::fs::read_to_string(switch) {
            let _ = writeln!(text, "{switch} {}", value.trim());
        }
    }
    // A profile added or removed there (Ubuntu's `bwrap-userns-restrict`) changes its mtime.
    if let Ok(m) = std::fs::metadata(APPARMOR) {
        let _ = writeln!(text, "{APPARMOR} {} {}", m.mtime(), m.mtime_nsec());
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_holds_for_the_same_bubblewrap_and_not_after_it_changed() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let bwrap = dir.path().join("bwrap");
        std::fs::write(&bwrap, "#!/bin/sh\n").unwrap();
        assert_eq!(load(&home, &bwrap), None, "nothing known yet");
        let works = Bwrap {
            path: bwrap.clone(),
            proc_mount: false,
        };
        save(&home, &bwrap, Some(&works));
        assert_eq!(load(&home, &bwrap), Some(Some(works)));
        save(&home, &bwrap, None);
        assert_eq!(load(&home, &bwrap), Some(None), "known not to work");
        // Another bubblewrap, or this one replaced: not known.
        assert_eq!(load(&home, &dir.path().join("other")), None);
        std::fs::write(&bwrap, "#!/bin/sh\nexit 0\n").unwrap();
        assert_eq!(load(&home, &bwrap), None);
        // A damaged file, or one older than a day: not known.
        save(&home, &bwrap, None);
        std::fs::write(file(&home), "finding works\n").unwrap();
        assert_eq!(load(&home, &bwrap), None);
        save(&home, &bwrap, None);
        let old = SystemTime::now() - FRESH - Duration::from_secs(60);
        let f = std::fs::File::options()
            .write(true)
            .open(file(&home))
            .unwrap();
        f.set_modified(old).unwrap();
        assert_eq!(load(&home, &bwrap), None);
        forget(&home);
        assert!(!file(&home).exists());
    }
}
