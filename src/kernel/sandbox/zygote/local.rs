//! A reaper of its own, outside any sandbox: a background job of a session whose sandbox is
//! off runs as the one call of a `keel __sandbox-reaper` started here, so that what it leaves
//! running (`setsid`, `nohup`, a double fork) comes to that reaper and ends with the job, as it
//! does in the zygote. Owns the reaper's start, on a keeper thread that stays its parent (its
//! parent-death signal, SIGTERM, follows that thread: keel's death, even by SIGKILL, ends the
//! reaper and so the job), and its control socket, whose close lets it exit once its call
//! ended. It never decides what runs.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Stdio};

use tokio::sync::oneshot;

use super::{call, proto, Keep, Process, Run, SpawnError, Started, Untaken};

/// A reaper started here for one call: its control socket (closed on drop: it exits after
/// its call) and its host pid.
pub struct Reaper {
    _control: OwnedFd,
    pid: u32,
}

impl Reaper {
    pub fn pid(&self) -> u32 {
        self.pid
    }
}

/// Starts `exe __sandbox-reaper` and hands it `run`: the running command, and the reaper's
/// host pid (its process group is the command's pid, `host_pgid`).
pub async fn spawn(exe: &Path, run: Run) -> Result<(Process, u32), SpawnError> {
    let command = SpawnError::Command;
    let (ours, theirs) = proto::control_pair().map_err(command)?;
    let (tx, rx) = oneshot::channel();
    let mut cmd = Command::new(exe);
    cmd.arg("__sandbox-reaper")
        .env_clear()
        .current_dir(&run.cwd)
        .stdin(Stdio::from(theirs))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let keeper = std::thread::Builder::new()
        .name("keel-job-reaper".into())
        .spawn(move || {
            let spawned = cmd.spawn();
            // The reaper holds its end of the control socket now: this copy goes, or the
            // reaper would never see keel's close.
            drop(cmd);
            match spawned {
                Ok(mut child) => {
                    let _ = tx.send(Ok(child.id()));
                    let _ = child.wait();
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            }
        });
    keeper.map_err(command)?;
    let pid = rx
        .await
        .map_err(|_| std::io::Error::other("the reaper's keeper ended"))
        .and_then(|r| r)
        .map_err(command)?;
    let reaper = Reaper {
        _control: ours,
        pid,
    };
    let control = reaper
        ._control
        .as_fd()
        .try_clone_to_owned()
        .map_err(command)?;
    let gone = || "keel's reaper ended before the command started".to_string();
    match call(control.as_fd(), &run, false, Keep::Local(reaper), gone).await {
        Ok(Started::Running(p)) => Ok((p, pid)),
        Ok(Started::Failed(e)) => Err(SpawnError::Command(e)),
        Err(Untaken) => Err(SpawnError::Command(std::io::Error::other(gone()))),
    }
}
