//! The daemon's protocol v1 (`DESIGN.md` §10): what a client and the daemon's server say to each
//! other over the socket, declared once and used by both sides.

/// The protocol the daemon speaks (`p1` in the socket name).
pub const PROTOCOL: u64 = 1;
