//! The processes below this one (the zygote, or a call's reaper: each a child subreaper, so
//! what its descendants leave running comes to it): its children as `/proc` lists them, and
//! the end of all of them. Owns only that; it never starts anything.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// How many rounds of killing [`end_descendants`] makes at most (each round kills every child
/// there is; what a killed one left comes to this process for the next).
const ROUNDS: usize = 10_000;

/// Kills every child of this process for which `spared` is false, and the children they leave
/// to it in turn, reaping each, until none is left.
pub fn end_descendants(spared: &dyn Fn(i32) -> bool) {
    let me = std::process::id();
    for _ in 0..ROUNDS {
        let children: Vec<i32> = children_of(me)
            .into_iter()
            .filter(|&p| !spared(p))
            .collect();
        if children.is_empty() {
            return;
        }
        for &pid in &children {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        // Reaped, so that their own children come to this process next.
        for pid in children {
            let _ = nix::sys::wait::waitpid(Pid::from_raw(pid), None);
        }
    }
}

/// Sends `signal` to every descendant of this process (children, theirs, and so on: a
/// subreaper's descendants are all that its calls started and left), without reaping any:
/// what ends is reaped as a child that changed state. A process forked while the tree is
/// walked may be missed; a KILL that follows ends it with the rest.
pub fn signal_descendants(signal: Signal) {
    let mut seen = std::collections::BTreeSet::new();
    let mut next = children_of(std::process::id());
    while let Some(pid) = next.pop() {
        if !seen.insert(pid) {
            continue;
        }
        let _ = kill(Pid::from_raw(pid), signal);
        if let Ok(pid) = u32::try_from(pid) {
            next.extend(children_of(pid));
        }
    }
}

/// The children of `parent`: from `/proc/<parent>/task/*/children` where the kernel has it,
/// else from every `/proc/*/stat`.
pub fn children_of(parent: u32) -> Vec<i32> {
    if let Some(listed) = listed_children(parent) {
        return listed;
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // `pid (comm) state ppid …`: comm may hold spaces and parentheses.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1));
            ppid.and_then(|p| p.parse::<u32>().ok()) == Some(parent)
        })
        .collect()
}

/// `/proc/<parent>/task/*/children` (each thread's children), `None` without that file.
fn listed_children(parent: u32) -> Option<Vec<i32>> {
    let main = format!("/proc/{parent}/task/{parent}/children");
    if !std::path::Path::new(&main).exists() {
        return None;
    }
    let tasks = std::fs::read_dir(format!("/proc/{parent}/task")).ok()?;
    let mut all = Vec::new();
    // A thread that ended meanwhile has no children to list.
    for task in tasks.flatten() {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        all.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        );
    }
    Some(all)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_listed_both_ways() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let me = std::process::id();
        assert!(listed_children(me).unwrap().contains(&pid));
        assert!(children_of(me).contains(&pid));
        let _ = child.kill();
        let _ = child.wait();
    }
}
