//! The daemon's server (`DESIGN.md` §10): a thin Unix-socket transport over shared session
//! hosts, and the services it runs. `server` the accept loop and lifetime; `connection`
//! protocol v2 on one connection; `open` `session/open`; `run` `keel daemon run` (lock,
//! bind, serve); `scheduler` the scheduled tasks; `journal` the NATS journal. Server code only: it imports no front end, no client and no
//! command of the command line (the flags a session is opened with are read by the leaf
//! `cli::args`). What server and clients share (socket paths, the protocol) is in `wire`.

pub mod connection;
pub mod journal;
pub mod open;
pub mod run;
pub mod scheduler;
pub mod server;
