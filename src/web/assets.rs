//! The page's files, embedded in the binary (no build step, no Node toolchain): the HTML
//! shell, its script and stylesheet, and the HTML export's stylesheet for rendered messages.
//! All of it is public (it is served before the token is traded); no secret is in it.

use axum::http::header;
use axum::response::{IntoResponse, Response};

/// One embedded file: its media type and bytes.
pub struct Asset {
    pub media: &'static str,
    pub body: &'static str,
}

pub const INDEX: Asset = Asset {
    media: "text/html; charset=utf-8",
    body: include_str!("assets/index.html"),
};
pub const APP_JS: Asset = Asset {
    media: "text/javascript; charset=utf-8",
    body: include_str!("assets/app.js"),
};
pub const APP_CSS: Asset = Asset {
    media: "text/css; charset=utf-8",
    body: include_str!("assets/app.css"),
};
pub const EXPORT_CSS: Asset = Asset {
    media: "text/css; charset=utf-8",
    body: include_str!("../host/html/style.css"),
};

/// The page's Content-Security-Policy: its own script and styles only, no inline script, no
/// other origin; the WebSocket and `fetch` go to this server. Model text that slipped through
/// as markup still could not run.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// The answer serving `asset`.
pub fn page(asset: Asset) -> Response {
    ([(header::CONTENT_TYPE, asset.media)], asset.body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_small_and_runs_no_inline_script() {
        let total: usize = [INDEX, APP_JS, APP_CSS, EXPORT_CSS]
            .iter()
            .map(|a| a.body.len())
            .sum();
        assert!(total <= 300 * 1024, "{total} bytes");
        assert!(
            !INDEX.body.contains("<script>"),
            "inline script in index.html"
        );
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(!APP_JS.body.contains(sink), "{sink} in app.js");
        }
    }
}
