//! The hidden `keel __sandbox-forward` helper of the network allowlist: run by bubblewrap
//! inside the sandbox, it starts the relay to keel's proxy and execs the command
//! (`kernel::sandbox::forward`). Owns only its arguments and error output.

use std::path::PathBuf;

use crate::exit::Exit;
use crate::kernel::sandbox::forward;
use crate::output::{ColorChoice, Output};

/// `keel __sandbox-forward SOCKET -- PROGRAM [ARGS…]`, or `keel __sandbox-forward --relay
/// SOCKET` (the relay itself, its listener as stdin).
#[derive(Debug, clap::Args)]
pub struct ForwardArgs {
    /// The proxy's socket inside the sandbox.
    socket: PathBuf,
    /// Be the relay: accept on the listener that is stdin, pipe each connection to SOCKET.
    #[arg(long)]
    relay: bool,
    /// The command to exec.
    #[arg(last = true, required_unless_present = "relay")]
    argv: Vec<String>,
}

/// Returns only on failure (exit 70 with the reason on stderr).
pub fn run(args: ForwardArgs) -> Exit {
    let mut out = Output::stdio(ColorChoice::Never);
    let e = match args.relay {
        true => forward::relay(&args.socket),
        false => forward::exec_forwarded(&args.socket, &args.argv),
    };
    out.err(&format!("Error: keel sandbox network: {e}\n"));
    Exit::Internal
}
