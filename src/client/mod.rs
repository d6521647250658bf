//! The client side of the daemon: `dial` where a client finds the daemon (its socket, or
//! another host's over ssh) and the checks before the first byte; `spawn` one daemon per socket
//! directory however many clients start at once; `socket` protocol v2 calls on one connection;
//! `open` the socket path, connecting to the daemon or starting one, and `session/open`'s
//! params; `link` a front end's link to the session it shows, served in this process or by
//! the daemon (the one way every front end opens, sends on, follows and reconnects one), and
//! `pi` its typed pi commands; `bridge` the remote end of `--remote`. It never imports the
//! server (`src/daemon`).

pub mod bridge;
pub mod dial;
pub mod link;
pub mod open;
pub mod pi;
pub mod socket;
pub mod spawn;
