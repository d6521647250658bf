//! Leaving the host's privileges behind before a sandboxed command runs (issue 43, points 1
//! and 10): the Landlock helper's way out of the user's terminal (a session of its own, so no
//! controlling terminal) and its capabilities (root's included: the bounding set emptied, the
//! ambient, inheritable, permitted and effective sets cleared, so that no `exec` gives any
//! back). bubblewrap does the same with its own flags (`bwrap::WALLS`, `--new-session`). Owns
//! only these calls; it never execs.

use rustix::thread::{
    capability_is_in_bounding_set, clear_ambient_capability_set,
    remove_capability_from_bounding_set, set_capabilities, CapabilitySet, CapabilitySets,
};

/// Why the privileges could not be dropped.
#[derive(Debug)]
pub struct CapsError(pub String);

impl std::fmt::Display for CapsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CapsError {}

/// Starts a new session (no controlling terminal from here on: `/dev/tty` cannot be opened,
/// the terminal's signals do not reach the command, and `TIOCSTI` on it needs a capability it
/// will not have). Fails when the caller leads a process group.
pub fn leave_terminal() -> Result<(), CapsError> {
    rustix::process::setsid()
        .map(drop)
        .map_err(|e| CapsError(format!("cannot start a session of its own: {e}")))
}

/// Drops every capability of the calling thread, for good. The bounding set can only be
/// emptied by a caller that may (`CAP_SETPCAP`: root); for any other caller it does not matter,
/// as with `no_new_privs` no `exec` grants a capability.
pub fn drop_all() -> Result<(), CapsError> {
    let fail = |what: &str, e: rustix::io::Errno| CapsError(format!("cannot {what}: {e}"));
    // Ambient capabilities are new in 4.3; an older kernel has none to clear.
    match clear_ambient_capability_set() {
        Ok(()) | Err(rustix::io::Errno::INVAL) => {}
        Err(e) => return Err(fail("clear the ambient capabilities", e)),
    }
    let privileged = rustix::thread::capabilities(None)
        .map_err(|e| fail("read the capabilities", e))?
        .effective
        .contains(CapabilitySet::SETPCAP);
    if privileged {
        for cap in CapabilitySet::all().iter() {
            if capability_is_in_bounding_set(cap).unwrap_or(false) {
                remove_capability_from_bounding_set(cap)
                    .map_err(|e| fail("empty the bounding set", e))?;
            }
        }
    }
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    set_capabilities(None, none).map_err(|e| fail("drop the capabilities", e))
}
