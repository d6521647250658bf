//! The public JSON vocabulary (pi 1.x compatible): kernel events mapped to wire events, the
//! session header line and keel's `result` line, and the JSON-RPC 2.0 peer of the daemon and
//! ACP. Kernel types may change freely; these change deliberately. Pure data: nothing here
//! writes anywhere.

pub mod events;
pub mod jsonl;
pub mod jsonrpc;
pub mod pi;
pub mod protocol;
pub mod rpc;
pub mod socket;
pub mod web;
