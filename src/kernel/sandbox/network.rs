//! The network a sandboxed command may reach (`DESIGN.md` §14, issue 30 point 4): off, on, or
//! an allowlist of host names (`crates.io`, `*.npmjs.org`) that keel's proxy serves, each on
//! ports 80 and 443 unless it names its port (`example.com:8443`, `example.com:*`). Owns the
//! [`Network`] value, the host patterns and their matching (as Claude's sandbox-runtime: exact
//! names, `*.suffix` for subdomains only, case-insensitive; the ports are keel's), what the
//! allowlist says of a destination ([`verdict`]), and the violation record the proxy hands
//! back. It never reads settings or flags: the caller builds the value.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::policy::SandboxPolicy;
use super::{Mechanism, Sandbox};

/// What the commands the model runs may reach. Written `"off"`, `"on"` or `{"allow": [HOST…]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// Nothing (a network namespace of its own, or new inet sockets refused).
    Off,
    /// Everything the user can reach.
    On,
    /// Only these hosts, by name, through keel's HTTP/HTTPS proxy (the sandbox has no other
    /// way out). Needs bubblewrap: under the Landlock fallback it is [`Network::Off`].
    Allow(Vec<HostPattern>),
}

/// One allowlist entry: a host, exact (`crates.io`) or `*.suffix` (any subdomain of `suffix`,
/// not `suffix` itself: list both to allow both, as in Claude's sandbox-runtime), and the
/// ports it is allowed on: 80 and 443 unless the entry names one (`example.com:8443`) or any
/// (`example.com:*`). Written and read as that text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct HostPattern {
    pub host: HostName,
    pub ports: Ports,
}

/// The host of an allowlist entry (lowercased, no trailing dot).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum HostName {
    Exact(String),
    Suffix(String),
}

/// The ports an allowlist entry allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ports {
    /// No port named: 80 and 443 (HTTP and HTTPS).
    Web,
    /// `name:PORT`: that port only (list the name again for more).
    One(u16),
    /// `name:*`: any port.
    Any,
}

impl Ports {
    pub fn allows(self, port: u16) -> bool {
        match self {
            Ports::Web => port == 80 || port == 443,
            Ports::One(p) => p == port,
            Ports::Any => true,
        }
    }
}

/// Why a host pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternError {
    pub pattern: String,
    pub reason: &'static str,
}

impl std::fmt::Display for PatternError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bad network host `{}`: {}", self.pattern, self.reason)
    }
}

impl std::error::Error for PatternError {}

impl HostPattern {
    /// `example.com` or `*.example.com` (lowercased, a trailing dot dropped), optionally
    /// followed by `:PORT` (1 to 65535) or `:*`. No scheme, path or other wildcard; `*.x`
    /// needs at least two labels (`*.com` is too broad).
    pub fn parse(text: &str) -> Result<HostPattern, PatternError> {
        let fail = |reason| PatternError {
            pattern: text.to_string(),
            reason,
        };
        let lower = text.trim().to_ascii_lowercase();
        let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
        let general =
            "a host name or *.suffix, and :port or :* (no scheme, path or other wildcard)";
        if !lower.chars().all(|c| valid(c) || c == '*' || c == ':') {
            return Err(fail(general));
        }
        let (name, ports) = match lower.rsplit_once(':') {
            None => (lower.as_str(), Ports::Web),
            Some((name, "*")) => (name, Ports::Any),
            Some((name, port)) => match port.parse::<u16>() {
                Ok(p) if p > 0 && port.bytes().all(|b| b.is_ascii_digit()) => (name, Ports::One(p)),
                _ => return Err(fail("a port is a number from 1 to 65535, or *")),
            },
        };
        let name = name.trim_end_matches('.');
        let (suffix, name) = match name.strip_prefix("*.") {
            Some(rest) => (true, rest.to_string()),
            None => (false, name.to_string()),
        };
        if name.is_empty() {
            return Err(fail("empty host name"));
        }
        if !name.chars().all(valid) {
            return Err(fail(general));
        }
        let host = match suffix {
            true if !name.contains('.') => return Err(fail("*.suffix needs at least two labels")),
            true => HostName::Suffix(name),
            false => HostName::Exact(name),
        };
        Ok(HostPattern { host, ports })
    }

    /// Whether `host` (as a request names it) is this entry's, whatever the port. An IP
    /// address matches only an exact entry that spells it.
    pub fn names(&self, host: &str) -> bool {
        let host = normal_host(host);
        match &self.host {
            HostName::Exact(name) => *name == host,
            HostName::Suffix(_) if host.parse::<IpAddr>().is_ok() => false,
            HostName::Suffix(suffix) => host
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.ends_with('.') && head.len() > 1),
        }
    }

    /// Whether this entry allows `host` on `port`.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        self.ports.allows(port) && self.names(host)
    }
}

impl std::str::FromStr for HostPattern {
    type Err = PatternError;
    fn from_str(s: &str) -> Result<HostPattern, PatternError> {
        HostPattern::parse(s)
    }
}

impl TryFrom<String> for HostPattern {
    type Error = PatternError;
    fn try_from(s: String) -> Result<HostPattern, PatternError> {
        HostPattern::parse(&s)
    }
}

impl From<HostPattern> for String {
    fn from(p: HostPattern) -> String {
        p.to_string()
    }
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.host {
            HostName::Exact(name) => f.write_str(name)?,
            HostName::Suffix(suffix) => write!(f, "*.{suffix}")?,
        }
        match self.ports {
            Ports::Web => Ok(()),
            Ports::One(p) => write!(f, ":{p}"),
            Ports::Any => f.write_str(":*"),
        }
    }
}

/// `host` lowercased, without IPv6 brackets or a trailing dot.
pub fn normal_host(host: &str) -> String {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// What the allowlist says of a destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// An exact entry allows it: the name may resolve to any address.
    Listed,
    /// Only a `*.` entry allows it: the name must resolve to public addresses.
    Wildcard,
    /// An entry names the host, but none allows this port.
    WrongPort,
    /// No entry names the host.
    Unlisted,
}

/// What `allow` says of `host:port`.
pub fn verdict(allow: &[HostPattern], host: &str, port: u16) -> Verdict {
    let exact = |p: &&HostPattern| matches!(p.host, HostName::Exact(_));
    let on_port: Vec<&HostPattern> = allow.iter().filter(|p| p.matches(host, port)).collect();
    if on_port.iter().any(exact) {
        Verdict::Listed
    } else if !on_port.is_empty() {
        Verdict::Wildcard
    } else if allow.iter().any(|p| p.names(host)) {
        Verdict::WrongPort
    } else {
        Verdict::Unlisted
    }
}

/// Why the proxy refused a destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ViolationReason {
    /// The host is not in the allowlist.
    NotAllowed,
    /// The host is, but not on this port (80 and 443 unless its entry names the port).
    PortNotAllowed,
    /// The name matched a `*.` pattern but resolves to a loopback, private, link-local or
    /// otherwise non-public address (DNS rebinding onto the machine or its network): only a
    /// name listed exactly may.
    PrivateAddress,
    /// The request did not name the host it was sent to: a `Host` header naming another, a
    /// TLS ClientHello whose server name (SNI) is another or absent, a ClientHello keel could
    /// not read, or a stream on port 443 that is not TLS.
    HostMismatch,
}

/// Whether `ip` is an address of the public internet (not loopback, private, link-local,
/// shared, documentation, multicast or unspecified).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b)))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80)
        }
    }
}

/// A destination the proxy refused: what a sandbox-violation event reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NetViolation {
    /// The host as the request named it (normalised).
    pub host: String,
    pub port: u16,
    pub reason: ViolationReason,
    /// For [`ViolationReason::HostMismatch`]: the other host the request named (its `Host`
    /// header or TLS server name), when it named one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub named: Option<String>,
}

impl SandboxPolicy {
    /// The network in force: `network` (direct access) wins over an allowlist.
    pub fn network_mode(&self) -> Network {
        match (self.network, &self.network_allow) {
            (true, _) => Network::On,
            (false, Some(allow)) => Network::Allow(allow.clone()),
            (false, None) => Network::Off,
        }
    }

    /// Puts `network` in force.
    pub fn set_network(&mut self, network: Network) {
        (self.network, self.network_allow) = match network {
            Network::Off => (false, None),
            Network::On => (true, None),
            Network::Allow(allow) => (false, Some(allow)),
        };
    }
}

impl Sandbox {
    /// This sandbox with `network` in force (`None`, or the sandbox is off: as built). An
    /// allowlist needs bubblewrap (the proxy is reached from inside a network namespace);
    /// under Landlock it becomes `Off` with a warning. `vars`: the test-only
    /// `KEEL_SANDBOX_PROXY_RESOLVE` (see [`resolve_overrides`]).
    pub fn with_network(
        mut self,
        network: Option<Network>,
        vars: &BTreeMap<String, String>,
        warnings: &mut Vec<String>,
    ) -> Sandbox {
        // `--sandbox off` reaches everything already; nothing to narrow.
        let Some(network) = network.filter(|_| self.mechanism != Mechanism::Off) else {
            return self;
        };
        let network = match (&self.mechanism, network) {
            (Mechanism::Landlock { .. }, Network::Allow(allow)) => {
                warnings.push(landlock_warning(&allow));
                Network::Off
            }
            (_, network) => network,
        };
        self.policy.set_network(network);
        self.zygote = self.zygote.fresh();
        self.proxy =
            super::proxy::ProxySlot::new(resolve_overrides(vars), std::env::current_exe().ok());
        self
    }
}

fn landlock_warning(allow: &[HostPattern]) -> String {
    let hosts: Vec<String> = allow.iter().map(HostPattern::to_string).collect();
    format!(
        "the network allowlist ({}) needs bubblewrap: under the Landlock fallback there is no \
         network namespace to route through keel's proxy, so the network is off. Install \
         bubblewrap (apt-get install bubblewrap)",
        hosts.join(", ")
    )
}

/// TEST ONLY: one entry of `KEEL_SANDBOX_PROXY_RESOLVE` (see [`resolve_overrides`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolveOverride {
    pub name: String,
    /// The request's port this entry is for (`None`: any).
    pub port: Option<u16>,
    pub ip: IpAddr,
    /// The port to connect to instead (`None`: the request's).
    pub to_port: Option<u16>,
}

/// TEST ONLY: `KEEL_SANDBOX_PROXY_RESOLVE=name=ip[,name:port=ip:port…]` makes the proxy
/// connect `name` (on any port, or on `port` only) to `ip` (on the request's port, or on the
/// one given) without asking DNS (tests serve made-up names, and their port 443, from
/// 127.0.0.1). The allowlist is still checked against the name and the request's port.
pub fn resolve_overrides(vars: &BTreeMap<String, String>) -> Vec<ResolveOverride> {
    let Some(spec) = vars.get("KEEL_SANDBOX_PROXY_RESOLVE") else {
        return Vec::new();
    };
    spec.split(',')
        .filter_map(|pair| {
            let (from, to) = pair.split_once('=')?;
            let (name, port) = match from.rsplit_once(':') {
                Some((name, port)) => (name, Some(port.trim().parse().ok()?)),
                None => (from, None),
            };
            let to = to.trim();
            let (ip, to_port) = match to.parse::<std::net::SocketAddr>() {
                Ok(a) => (a.ip(), Some(a.port())),
                Err(_) => (to.parse().ok()?, None),
            };
            Some(ResolveOverride {
                name: normal_host(name),
                port,
                ip,
                to_port,
            })
        })
        .collect()
}

/// Where the overrides send `host:port`, if they name it (an entry for that port first).
pub fn overridden(
    overrides: &[ResolveOverride],
    host: &str,
    port: u16,
) -> Option<std::net::SocketAddr> {
    let for_name = |o: &&ResolveOverride| o.name == host;
    let o = overrides
        .iter()
        .filter(for_name)
        .find(|o| o.port == Some(port))
        .or_else(|| overrides.iter().filter(for_name).find(|o| o.port.is_none()))?;
    Some(std::net::SocketAddr::new(o.ip, o.to_port.unwrap_or(port)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn exact_names_and_subdomain_suffixes_match_as_claudes_do() {
        let exact = HostPattern::parse("Crates.IO.").unwrap();
        assert_eq!(exact.host, HostName::Exact("crates.io".into()));
        assert!(exact.matches("crates.io", 443));
        assert!(exact.matches("CRATES.io.", 80));
        assert!(!exact.matches("static.crates.io", 443));
        assert!(!exact.matches("evilcrates.io", 443));
        let suffix = HostPattern::parse("*.npmjs.org").unwrap();
        assert_eq!(suffix.to_string(), "*.npmjs.org");
        assert!(suffix.matches("registry.npmjs.org", 443));
        assert!(suffix.matches("a.b.npmjs.org", 443));
        assert!(
            !suffix.matches("npmjs.org", 443),
            "the apex is not a subdomain"
        );
        assert!(!suffix.matches("evilnpmjs.org", 443));
        assert!(!suffix.matches(".npmjs.org", 443));
        let ip = HostPattern::parse("127.0.0.1").unwrap();
        assert!(ip.matches("127.0.0.1", 80));
        assert!(!HostPattern::parse("*.0.0.1").unwrap().names("127.0.0.1"));
    }

    #[test]
    fn a_name_is_allowed_on_80_and_443_unless_its_entry_names_a_port() {
        let web = HostPattern::parse("example.com").unwrap();
        assert_eq!(web.ports, Ports::Web);
        assert!(web.matches("example.com", 80) && web.matches("example.com", 443));
        assert!(!web.matches("example.com", 8443) && !web.matches("example.com", 22));
        let one = HostPattern::parse("Example.com.:8443").unwrap();
        assert_eq!(one.to_string(), "example.com:8443");
        assert!(one.matches("example.com", 8443));
        assert!(
            !one.matches("example.com", 443),
            "a named port is the only one"
        );
        let any = HostPattern::parse("*.example.com:*").unwrap();
        assert_eq!(any.to_string(), "*.example.com:*");
        assert!(any.matches("a.example.com", 1) && any.matches("a.example.com", 65535));
        assert_eq!(HostPattern::parse(&any.to_string()).unwrap(), any);

        let allow = [
            HostPattern::parse("api.example.com:8080").unwrap(),
            HostPattern::parse("*.example.com").unwrap(),
            HostPattern::parse("ssh.example.org:22").unwrap(),
        ];
        assert_eq!(verdict(&allow, "api.example.com", 8080), Verdict::Listed);
        assert_eq!(verdict(&allow, "api.example.com", 443), Verdict::Wildcard);
        assert_eq!(verdict(&allow, "www.example.com", 443), Verdict::Wildcard);
        assert_eq!(verdict(&allow, "www.example.com", 8080), Verdict::WrongPort);
        assert_eq!(verdict(&allow, "ssh.example.org", 443), Verdict::WrongPort);
        assert_eq!(verdict(&allow, "ssh.example.org", 22), Verdict::Listed);
        assert_eq!(verdict(&allow, "example.org", 22), Verdict::Unlisted);
    }

    #[test]
    fn bad_patterns_are_refused() {
        for bad in [
            "",
            "*.",
            "*.com",
            "*.com:443",
            "https://x.org",
            "x.org:",
            "x.org:0",
            "x.org:65536",
            "x.org:+1",
            "x.org:80:80",
            "x.org:**",
            "x.org/p",
            "a*.x.org",
            "*",
            ":443",
        ] {
            assert!(HostPattern::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_policy_holds_the_network_value() {
        let mut p = SandboxPolicy::new(
            super::super::SandboxMode::WorkspaceWrite,
            &super::super::Places::default(),
            &[],
            &[],
            &[],
            false,
        );
        assert_eq!(p.network_mode(), Network::Off);
        let allow = vec![HostPattern::parse("crates.io").unwrap()];
        p.set_network(Network::Allow(allow.clone()));
        assert!(!p.network, "no direct access under an allowlist");
        assert_eq!(p.network_mode(), Network::Allow(allow));
        let json = serde_json::to_string(&p).unwrap();
        assert!(json.contains(r#""networkAllow":["crates.io"]"#), "{json}");
        let back: SandboxPolicy = serde_json::from_str(&json).unwrap();
        assert_eq!(back, p);
        p.set_network(Network::On);
        assert_eq!(p.network_mode(), Network::On);
    }

    #[test]
    fn with_the_sandbox_off_the_network_stays_on() {
        let allow = vec![HostPattern::parse("crates.io").unwrap()];
        let mut warnings = Vec::new();
        let sb = Sandbox::off(std::path::Path::new("/nonexistent"));
        let sb = sb.with_network(Some(Network::Allow(allow)), &BTreeMap::new(), &mut warnings);
        assert_eq!(sb.policy.network_mode(), Network::On);
        assert!(warnings.is_empty());
    }

    #[test]
    fn test_resolver_overrides_parse() {
        let vars = BTreeMap::from([(
            "KEEL_SANDBOX_PROXY_RESOLVE".to_string(),
            "Allowed.Test=127.0.0.1,bad,x=notip,web.test:443=127.0.0.1:8443,y:z=::1".to_string(),
        )]);
        let o = resolve_overrides(&vars);
        let to = |ip: [u8; 4], port| std::net::SocketAddr::new(ip.into(), port);
        assert_eq!(o.len(), 2, "{o:?}");
        assert_eq!(
            overridden(&o, "allowed.test", 81),
            Some(to([127, 0, 0, 1], 81))
        );
        assert_eq!(
            overridden(&o, "web.test", 443),
            Some(to([127, 0, 0, 1], 8443))
        );
        assert_eq!(overridden(&o, "web.test", 80), None);
        assert_eq!(overridden(&o, "other.test", 80), None);
    }
}
