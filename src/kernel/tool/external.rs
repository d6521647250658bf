//! The seam for tools that live outside the kernel (MCP servers today): a `ToolSource` lists
//! its tools before each model call and runs their calls. The kernel knows only this trait;
//! it never knows what protocol or process is behind a source.

use std::fmt::Debug;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

use serde_json::Value;
use tokio::sync::mpsc;

use super::{ToolOutput, ToolSpec};
use crate::kernel::abort::AbortSignal;

/// A boxed future, so `ToolSource` stays object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One external tool as the model sees it, and whether it only reads.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalSpec {
    pub spec: ToolSpec,
    /// A read-only tool runs under every `--permission`; any other obeys it like `write`,
    /// `edit` and `bash` do.
    pub read_only: bool,
}

/// What an external call may use.
#[derive(Debug, Clone)]
pub struct ExternalCall {
    /// Fires when the run is aborted: the call must stop promptly (and tell its server).
    pub abort: AbortSignal,
    /// Partial results, replace-not-append, as bash streams its tail.
    pub progress: mpsc::UnboundedSender<ToolOutput>,
    /// Where capped outputs keep their full text.
    pub temp_dir: PathBuf,
}

/// A set of tools from outside the kernel whose membership may change between model calls.
pub trait ToolSource: Send + Sync + Debug {
    /// Waits until the source knows its tools, at most its own short budget; returns at once
    /// once it has waited before. The turn loop awaits it before each model call.
    fn ready(&self) -> BoxFuture<'_, ()>;

    /// The tools offered now, in a stable order. Names never repeat a built-in tool's.
    fn tools(&self) -> Vec<ExternalSpec>;

    /// Runs one call of a tool this source listed. Never panics: failures are error outputs.
    fn call<'a>(
        &'a self,
        name: &'a str,
        args: &'a Value,
        ctx: ExternalCall,
    ) -> BoxFuture<'a, ToolOutput>;
}
