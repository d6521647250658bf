//! The checks every request to `keel web` passes before anything else runs (`DESIGN.md` §21):
//! `Host` must name a loopback literal with the served port (DNS rebinding: a page of
//! `evil.example` resolved to 127.0.0.1 still sends `Host: evil.example`), `Origin` when present
//! must be exactly this server's (another port of localhost is another origin, though the same
//! site), a state-changing request carries `X-Keel: 1` (a cross-origin page cannot send a custom
//! header without a preflight, which is never granted), and everything but the page's static
//! files needs the cookie `POST /auth` set. Pure: the server maps a [`Refusal`] to its status.

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// 403: `Host` is not a loopback literal with the served port.
    Host,
    /// 403: `Origin` is present and not exactly this server's.
    Origin,
    /// 403: a state-changing request without `X-Keel: 1`.
    CustomHeader,
    /// 401: no valid cookie.
    Unauthenticated,
}

impl Refusal {
    /// The HTTP status it is answered with.
    pub fn status(self) -> u16 {
        match self {
            Refusal::Unauthenticated => 401,
            _ => 403,
        }
    }

    /// The plain-text body (never echoes what the client sent).
    pub fn text(self) -> &'static str {
        match self {
            Refusal::Host => {
                "forbidden: Host must be 127.0.0.1, localhost or [::1] with this port\n"
            }
            Refusal::Origin => "forbidden: cross-origin request\n",
            Refusal::CustomHeader => "forbidden: a state-changing request needs X-Keel: 1\n",
            Refusal::Unauthenticated => "unauthorized: open the URL keel web printed\n",
        }
    }
}

/// What one request shows the guard.
#[derive(Debug, Clone, Copy, Default)]
pub struct Seen<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub host: Option<&'a str>,
    pub origin: Option<&'a str>,
    pub custom: Option<&'a str>,
    pub cookie: Option<&'a str>,
}

/// The served port and the secrets.
#[derive(Clone)]
pub struct Guard {
    port: u16,
    token: String,
    session: String,
}

/// The page's static files: served without the cookie (the page must load to trade its token).
const PUBLIC: &[&str] = &["/", "/app.js", "/app.css", "/export.css", "/auth"];

/// The hosts a request may name (with the served port).
const LOOPBACK: &[&str] = &["127.0.0.1", "localhost", "[::1]"];

impl Guard {
    /// `token`: what the URL's fragment carries; `session`: the cookie's value.
    pub fn new(port: u16, token: String, session: String) -> Guard {
        Guard {
            port,
            token,
            session,
        }
    }

    /// The cookie's name: one per port, as cookies are shared by every port of a host.
    pub fn cookie_name(&self) -> String {
        format!("keel-web-{}", self.port)
    }

    /// The `Set-Cookie` value `POST /auth` answers with.
    pub fn set_cookie(&self) -> String {
        format!(
            "{}={}; HttpOnly; SameSite=Strict; Path=/",
            self.cookie_name(),
            self.session
        )
    }

    /// Whether `token` is the one printed (compared in constant time).
    pub fn token_matches(&self, token: &str) -> bool {
        same(token.as_bytes(), self.token.as_bytes())
    }

    /// Checks a request; `Ok` lets it through.
    pub fn check(&self, r: &Seen) -> Result<(), Refusal> {
        if !r.host.is_some_and(|h| self.host_ok(h)) {
            return Err(Refusal::Host);
        }
        if let Some(origin) = r.origin {
            if !self.origin_ok(origin) {
                return Err(Refusal::Origin);
            }
        }
        let safe = matches!(r.method, "GET" | "HEAD");
        if !safe && r.custom != Some("1") {
            return Err(Refusal::CustomHeader);
        }
        if !PUBLIC.contains(&r.path) && !r.cookie.is_some_and(|c| self.cookie_ok(c)) {
            return Err(Refusal::Unauthenticated);
        }
        Ok(())
    }

    fn host_ok(&self, host: &str) -> bool {
        let port = self.port.to_string();
        LOOPBACK.iter().any(|h| {
            host.strip_prefix(h)
                .and_then(|rest| rest.strip_prefix(':'))
                .is_some_and(|p| p == port)
        })
    }

    fn origin_ok(&self, origin: &str) -> bool {
        LOOPBACK
            .iter()
            .any(|h| origin == format!("http://{h}:{}", self.port))
    }

    /// Whether a `Cookie` header holds this server's cookie.
    fn cookie_ok(&self, header: &str) -> bool {
        let name = self.cookie_name();
        header.split(';').any(|pair| {
            pair.trim()
                .split_once('=')
                .is_some_and(|(n, v)| n == name && same(v.as_bytes(), self.session.as_bytes()))
        })
    }
}

/// Equal bytes, in time that depends only on the lengths.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// 32 random bytes from the system's generator, as 64 hex digits.
pub fn secret() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard() -> Guard {
        Guard::new(4321, "t".repeat(64), "s".repeat(64))
    }

    fn get(path: &str) -> Seen<'_> {
        Seen {
            method: "GET",
            path,
            host: Some("127.0.0.1:4321"),
            ..Seen::default()
        }
    }

    #[test]
    fn host_must_be_a_loopback_literal_with_the_port() {
        let g = guard();
        for ok in ["127.0.0.1:4321", "localhost:4321", "[::1]:4321"] {
            assert_eq!(
                g.check(&Seen {
                    host: Some(ok),
                    ..get("/")
                }),
                Ok(()),
                "{ok}"
            );
        }
        for bad in [
            "evil.example:4321",
            "127.0.0.1",
            "127.0.0.1:4322",
            "127.0.0.1:43210",
            "localhost.evil.example:4321",
            "127.0.0.2:4321",
            "",
        ] {
            let seen = Seen {
                host: Some(bad),
                ..get("/")
            };
            assert_eq!(g.check(&seen), Err(Refusal::Host), "{bad}");
        }
        assert_eq!(
            g.check(&Seen {
                host: None,
                ..get("/")
            }),
            Err(Refusal::Host)
        );
    }

    #[test]
    fn origin_when_present_must_be_exactly_this_server() {
        let g = guard();
        for ok in ["http://127.0.0.1:4321", "http://localhost:4321"] {
            assert_eq!(
                g.check(&Seen {
                    origin: Some(ok),
                    ..get("/")
                }),
                Ok(()),
                "{ok}"
            );
        }
        for bad in [
            "http://evil.example",
            "http://localhost:4322",
            "https://127.0.0.1:4321",
            "http://127.0.0.1:4321/",
            "null",
            "",
        ] {
            let seen = Seen {
                origin: Some(bad),
                ..get("/")
            };
            assert_eq!(g.check(&seen), Err(Refusal::Origin), "{bad}");
        }
    }

    #[test]
    fn state_changes_need_the_custom_header_and_the_rest_the_cookie() {
        let g = guard();
        let post = Seen {
            method: "POST",
            ..get("/auth")
        };
        assert_eq!(g.check(&post), Err(Refusal::CustomHeader));
        assert_eq!(
            g.check(&Seen {
                custom: Some("1"),
                ..post
            }),
            Ok(())
        );
        assert_eq!(g.check(&get("/ws")), Err(Refusal::Unauthenticated));
        let cookie = format!("a=b; keel-web-4321={}; c=d", "s".repeat(64));
        assert_eq!(
            g.check(&Seen {
                cookie: Some(&cookie),
                ..get("/ws")
            }),
            Ok(())
        );
        for bad in ["keel-web-4321=x", "keel-web-4322=ssss", "", "keel-web-4321"] {
            let seen = Seen {
                cookie: Some(bad),
                ..get("/ws")
            };
            assert_eq!(g.check(&seen), Err(Refusal::Unauthenticated), "{bad}");
        }
        assert!(g.token_matches(&"t".repeat(64)));
        assert!(!g.token_matches(&"t".repeat(63)));
        assert_eq!(secret().unwrap().len(), 64);
    }
}
