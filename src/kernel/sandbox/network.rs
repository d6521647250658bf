//! The network a sandboxed command may reach (`DESIGN.md` §14, issue 30 point 4): off, on, or
//! an allowlist of host names (`crates.io`, `*.npmjs.org`) that keel's proxy serves. Owns the
//! [`Network`] value, the host patterns and their matching (as Claude's sandbox-runtime: exact
//! names, `*.suffix` for subdomains only, case-insensitive), and the violation record the proxy
//! hands back. It never reads settings or flags: the caller builds the value.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::policy::SandboxPolicy;
use super::{Mechanism, Sandbox};

/// What the commands the model runs may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Network {
    /// Nothing (a network namespace of its own, or new inet sockets refused).
    Off,
    /// Everything the user can reach.
    On,
    /// Only these hosts, by name, through keel's HTTP/HTTPS proxy (the sandbox has no other
    /// way out). Needs bubblewrap: under the Landlock fallback it is [`Network::Off`].
    Allow(Vec<HostPattern>),
}

/// One allowlist entry: an exact host name, or `*.suffix` (any subdomain of `suffix`, not
/// `suffix` itself: list both to allow both, as in Claude's sandbox-runtime).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum HostPattern {
    Exact(String),
    Suffix(String),
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
    /// `example.com` or `*.example.com` (lowercased, a trailing dot dropped). No scheme, port,
    /// path or other wildcard; `*.x` needs at least two labels (`*.com` is too broad).
    pub fn parse(text: &str) -> Result<HostPattern, PatternError> {
        let fail = |reason| PatternError {
            pattern: text.to_string(),
            reason,
        };
        let lower = text.trim().trim_end_matches('.').to_ascii_lowercase();
        let (suffix, name) = match lower.strip_prefix("*.") {
            Some(rest) => (true, rest.to_string()),
            None => (false, lower),
        };
        if name.is_empty() {
            return Err(fail("empty host name"));
        }
        let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
        if !name.chars().all(valid) {
            return Err(fail(
                "a host name or *.suffix only (no scheme, port, path or other wildcard)",
            ));
        }
        match suffix {
            true if !name.contains('.') => Err(fail("*.suffix needs at least two labels")),
            true => Ok(HostPattern::Suffix(name)),
            false => Ok(HostPattern::Exact(name)),
        }
    }

    /// Whether `host` (as a request names it) is this pattern's. An IP address matches only an
    /// exact entry that spells it.
    pub fn matches(&self, host: &str) -> bool {
        let host = normal_host(host);
        match self {
            HostPattern::Exact(name) => *name == host,
            HostPattern::Suffix(_) if host.parse::<IpAddr>().is_ok() => false,
            HostPattern::Suffix(suffix) => host
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.ends_with('.') && head.len() > 1),
        }
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
        match self {
            HostPattern::Exact(name) => f.write_str(name),
            HostPattern::Suffix(suffix) => write!(f, "*.{suffix}"),
        }
    }
}

/// `host` lowercased, without IPv6 brackets or a trailing dot.
pub fn normal_host(host: &str) -> String {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// Whether `host` is in `allow`.
pub fn allowed(allow: &[HostPattern], host: &str) -> bool {
    allow.iter().any(|p| p.matches(host))
}

/// Why the proxy refused a destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ViolationReason {
    /// The host is not in the allowlist.
    NotAllowed,
    /// The name matched a `*.` pattern but resolves to a loopback, private, link-local or
    /// otherwise non-public address (DNS rebinding onto the machine or its network): only a
    /// name listed exactly may.
    PrivateAddress,
}

/// Whether `host` is allowed by an exact entry of `allow` (not only by a `*.` pattern).
pub fn listed_exactly(allow: &[HostPattern], host: &str) -> bool {
    allow
        .iter()
        .any(|p| matches!(p, HostPattern::Exact(_)) && p.matches(host))
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

/// TEST ONLY: `KEEL_SANDBOX_PROXY_RESOLVE=name=ip[,name=ip…]` makes the proxy connect `name`
/// to `ip` without asking DNS (tests serve made-up names from 127.0.0.1). The allowlist is
/// still checked against the name.
pub fn resolve_overrides(vars: &BTreeMap<String, String>) -> Vec<(String, IpAddr)> {
    let Some(spec) = vars.get("KEEL_SANDBOX_PROXY_RESOLVE") else {
        return Vec::new();
    };
    spec.split(',')
        .filter_map(|pair| {
            let (name, ip) = pair.split_once('=')?;
            Some((normal_host(name), ip.trim().parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn exact_names_and_subdomain_suffixes_match_as_claudes_do() {
        let exact = HostPattern::parse("Crates.IO.").unwrap();
        assert_eq!(exact, HostPattern::Exact("crates.io".into()));
        assert!(exact.matches("crates.io"));
        assert!(exact.matches("CRATES.io."));
        assert!(!exact.matches("static.crates.io"));
        assert!(!exact.matches("evilcrates.io"));
        let suffix = HostPattern::parse("*.npmjs.org").unwrap();
        assert_eq!(suffix.to_string(), "*.npmjs.org");
        assert!(suffix.matches("registry.npmjs.org"));
        assert!(suffix.matches("a.b.npmjs.org"));
        assert!(!suffix.matches("npmjs.org"), "the apex is not a subdomain");
        assert!(!suffix.matches("evilnpmjs.org"));
        assert!(!suffix.matches(".npmjs.org"));
        let ip = HostPattern::parse("127.0.0.1").unwrap();
        assert!(ip.matches("127.0.0.1"));
        assert!(!HostPattern::parse("*.0.0.1").unwrap().matches("127.0.0.1"));
    }

    #[test]
    fn bad_patterns_are_refused() {
        for bad in [
            "",
            "*.",
            "*.com",
            "https://x.org",
            "x.org:443",
            "x.org/p",
            "a*.x.org",
            "*",
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
            "Allowed.Test=127.0.0.1,bad,x=notip".to_string(),
        )]);
        let o = resolve_overrides(&vars);
        assert_eq!(o, [("allowed.test".to_string(), [127, 0, 0, 1].into())]);
    }
}
