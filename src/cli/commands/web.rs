//! `keel web [--port N] [--host ADDR] [--open]`: the daemon's sessions in a browser
//! (`docs/web.md`). Prints one URL on stdout, with its token in the fragment; logs on stderr.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use super::Logs;
use crate::client::open::socket_for;
use crate::exit::Exit;
use crate::web::WebOptions;

/// `keel web`'s flags.
#[derive(Debug, clap::Args)]
pub struct WebArgs {
    /// The port to listen on (default: any free one).
    #[arg(long, value_name = "N", default_value_t = 0)]
    port: u16,
    /// The address to listen on: loopback only (TLS is not served; see docs/web.md for
    /// `ssh -L` and a tailnet).
    #[arg(long, value_name = "ADDR", default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    host: IpAddr,
    /// Open the URL in the browser (through a private file: the token is never on a command
    /// line).
    #[arg(long)]
    open: bool,
    /// The daemon's socket (default $KEEL_SOCKET, else the per-user runtime directory).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
}

/// `keel web`: serves until interrupted.
pub fn run(args: WebArgs) -> Exit {
    super::run(Logs::Stderr, async move |env, out| {
        let socket = socket_for(env, args.socket.as_deref())?;
        let opts = WebOptions {
            host: args.host,
            port: args.port,
            socket,
            open: args.open,
        };
        crate::web::serve(opts, env, out).await
    })
}
