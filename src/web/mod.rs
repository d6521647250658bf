//! `keel web`: the daemon's sessions in a browser (`DESIGN.md` §21, `docs/web.md`). A small
//! HTTP server (axum) that is a client of the daemon, as `keel daemon bridge` is: the daemon
//! stays Unix-socket only. It serves the page's embedded files (`assets`), trades the token of
//! the printed URL's fragment for a cookie (`POST /auth`), renders message text with the HTML
//! export's renderer (`POST /render`) and relays each WebSocket to its own daemon connection,
//! frame for line, without reading what it relays (`relay`). Every request passes `guard`
//! first. It binds loopback addresses only: TLS is not served, so a non-loopback address is
//! refused (exit 2); `ssh -L` or a tailnet reach it from elsewhere.

mod assets;
pub mod guard;
mod relay;
mod sse;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Request, State, WebSocketUpgrade};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use crate::error::StartupError;
use crate::exit::Exit;
use crate::mode::Env;
use crate::output::Output;
use crate::wire::web::{AuthRequest, RenderRequest, RenderResult, CUSTOM_HEADER};
use guard::{Guard, Refusal, Seen};

/// What `keel web` was asked for.
#[derive(Debug, Clone)]
pub struct WebOptions {
    /// The address to bind (loopback only).
    pub host: IpAddr,
    /// The port (0: any free one).
    pub port: u16,
    /// The daemon's socket.
    pub socket: PathBuf,
    /// Open the URL in the user's browser.
    pub open: bool,
}

/// What every handler shares.
struct Shared {
    guard: Guard,
    socket: PathBuf,
    env: Env,
}

/// Serves until interrupted; prints the URL (with its token) on stdout, nowhere else.
pub async fn serve(opts: WebOptions, env: &Env, out: &mut Output) -> Result<Exit, StartupError> {
    if !opts.host.is_loopback() {
        return Err(StartupError::usage(format!(
            "keel web binds loopback addresses only, not {}",
            opts.host
        ))
        .hint(
            "TLS is not served: reach it from elsewhere with `ssh -L` or a tailnet (docs/web.md)",
        ));
    }
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(opts.host, opts.port))
        .await
        .map_err(|e| StartupError::config("cannot listen for keel web").cause(e.to_string()))?;
    let addr = listener
        .local_addr()
        .map_err(|e| StartupError::internal("keel web has no address").cause(e.to_string()))?;
    let random = |what: &str| {
        guard::secret().map_err(|e| {
            StartupError::internal(format!("cannot make the {what}")).cause(e.to_string())
        })
    };
    let token = random("token")?;
    let shared = Arc::new(Shared {
        guard: Guard::new(addr.port(), token.clone(), random("cookie")?),
        socket: opts.socket,
        env: env.clone(),
    });
    let app = router(shared);
    let url = format!("http://{addr}/#t={token}");
    tracing::info!("keel web listening on {addr}");
    if out
        .out(format!("{url}\n").as_bytes())
        .and_then(|_| out.flush())
        .is_err()
    {
        return Ok(out.stdout_exit());
    }
    // Kept until the server ends: the browser may read it late.
    let _opened = if opts.open { open(&url) } else { None };
    tokio::select! {
        served = axum::serve(listener, app) => match served {
            Ok(()) => Ok(Exit::Success),
            Err(e) => Err(StartupError::internal("keel web failed").cause(e.to_string())),
        },
        _ = tokio::signal::ctrl_c() => Ok(Exit::Success),
    }
}

/// The routes, every one behind the guard.
fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(|| async { assets::page(assets::INDEX) }))
        .route("/app.js", get(|| async { assets::page(assets::APP_JS) }))
        .route("/app.css", get(|| async { assets::page(assets::APP_CSS) }))
        .route(
            "/export.css",
            get(|| async { assets::page(assets::EXPORT_CSS) }),
        )
        .route("/auth", post(auth))
        .route("/render", post(render))
        .route("/ws", get(ws))
        .route("/events/{session}", get(sse::events))
        .layer(middleware::from_fn_with_state(shared.clone(), check))
        .with_state(shared)
}

/// The guard, then the headers every answer carries.
async fn check(State(s): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let h = req.headers();
    let text = |name: &str| h.get(name).and_then(|v| v.to_str().ok());
    let seen = Seen {
        method: req.method().as_str(),
        path: req.uri().path(),
        host: text(header::HOST.as_str()),
        origin: text(header::ORIGIN.as_str()),
        custom: text(CUSTOM_HEADER),
        cookie: text(header::COOKIE.as_str()),
    };
    let mut response = match s.guard.check(&seen) {
        Ok(()) => next.run(req).await,
        Err(r) => refuse(r),
    };
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CACHE_CONTROL, "no-store"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::CONTENT_SECURITY_POLICY, assets::CSP),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

fn refuse(r: Refusal) -> Response {
    let status = StatusCode::from_u16(r.status()).unwrap_or(StatusCode::FORBIDDEN);
    (status, r.text()).into_response()
}

/// `POST /auth {token}` → 204 with the cookie, or 401.
async fn auth(State(s): State<Arc<Shared>>, body: Bytes) -> Response {
    match serde_json::from_slice::<AuthRequest>(&body) {
        Ok(a) if s.guard.token_matches(&a.token) => {
            let mut headers = HeaderMap::new();
            if let Ok(v) = HeaderValue::from_str(&s.guard.set_cookie()) {
                headers.insert(header::SET_COOKIE, v);
            }
            (StatusCode::NO_CONTENT, headers).into_response()
        }
        _ => refuse(Refusal::Unauthenticated),
    }
}

/// `POST /render {text}` → `{html}`: the HTML export's markdown renderer (sanitized).
async fn render(body: Bytes) -> Response {
    let Ok(r) = serde_json::from_slice::<RenderRequest>(&body) else {
        return (StatusCode::BAD_REQUEST, "bad render request\n").into_response();
    };
    let mut html = String::new();
    crate::host::html::markdown::render(&mut html, &r.text);
    match serde_json::to_vec(&RenderResult { html }) {
        Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// `GET /ws`: a connection to the daemon (started if none runs), then the relay.
async fn ws(State(s): State<Arc<Shared>>, upgrade: WebSocketUpgrade) -> Response {
    let daemon = match crate::client::open::start_local(&s.socket, &s.env).await {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!("keel web: no daemon: {}", e.message);
            return (StatusCode::BAD_GATEWAY, "the daemon cannot be reached\n").into_response();
        }
    };
    upgrade
        .max_message_size(relay::MAX_LINE)
        .max_frame_size(relay::MAX_LINE)
        .on_upgrade(move |socket| relay::relay(socket, daemon))
}

/// Opens `url` in the user's browser through a private file that redirects to it, so the
/// token is never on a command line (`/proc/PID/cmdline` is readable by every user). The
/// directory holding the file; `None` when it could not be made or opened (said in the log).
fn open(url: &str) -> Option<tempfile::TempDir> {
    let dir = tempfile::Builder::new()
        .prefix("keel-web-")
        .tempdir()
        .ok()?;
    let file = dir.path().join("open.html");
    let page = format!(
        "<!doctype html><meta http-equiv=\"refresh\" content=\"0;url={}\"><title>keel</title>",
        crate::host::html::escape(url)
    );
    if let Err(e) = std::fs::write(&file, page) {
        tracing::warn!("keel web --open: {e}");
        return None;
    }
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    // tokio reaps it when it ends.
    match tokio::process::Command::new(opener)
        .arg(&file)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        Ok(_) => Some(dir),
        Err(e) => {
            tracing::warn!("keel web --open: cannot run {opener}: {e}");
            None
        }
    }
}
