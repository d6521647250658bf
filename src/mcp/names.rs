//! The names the model sees for MCP tools: `mcp__<server>__<tool>`, characters outside
//! `[A-Za-z0-9_-]` replaced by `_`, at most 64 bytes, and a short deterministic hash suffix when
//! two tools would otherwise share a name. Pure functions; the raw name is kept for calls.

/// The longest name providers accept (`^[a-zA-Z0-9_-]{1,64}$`).
pub const MAX_NAME: usize = 64;
/// Descriptions longer than this are cut (at a character boundary, with a marker).
pub const MAX_DESCRIPTION: usize = 2048;

/// The sanitised `mcp__<server>__<tool>`, cut to [`MAX_NAME`] bytes.
pub fn visible(server: &str, tool: &str) -> String {
    let mut s: String = format!("mcp__{server}__{tool}")
        .chars()
        .map(|c| match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '_' | '-' => c,
            _ => '_',
        })
        .collect();
    s.truncate(MAX_NAME);
    s
}

/// `name` cut to leave room for a `_` and 8 hex digits of a hash of the raw server and tool
/// names: stable across runs and orderings.
pub fn with_hash(name: &str, server: &str, tool: &str) -> String {
    let h = fnv1a(format!("{server}\0{tool}").as_bytes());
    let keep = name.len().min(MAX_NAME - 9);
    format!("{}_{:08x}", &name[..keep], (h >> 32) as u32 ^ h as u32)
}

/// Assigns visible names to `(server, tool)` pairs in order; a name already taken (by an
/// earlier pair, or in `taken`) gets the hash suffix. `None` for a pair that still collides.
pub fn assign(pairs: &[(String, String)], taken: &[String]) -> Vec<Option<String>> {
    let mut used: Vec<String> = taken.to_vec();
    let mut out = Vec::with_capacity(pairs.len());
    for (server, tool) in pairs {
        let plain = visible(server, tool);
        // A sanitised name that another raw name also maps to is suffixed for both, so which
        // tool keeps the plain name never depends on listing order.
        let shared = pairs.iter().filter(|(s, t)| visible(s, t) == plain).count() > 1;
        let name = if shared || used.contains(&plain) {
            with_hash(&plain, server, tool)
        } else {
            plain
        };
        if used.contains(&name) {
            out.push(None);
        } else {
            used.push(name.clone());
            out.push(Some(name));
        }
    }
    out
}

/// A description cut to [`MAX_DESCRIPTION`] bytes at a character boundary.
pub fn description(text: &str) -> String {
    if text.len() <= MAX_DESCRIPTION {
        return text.to_string();
    }
    let mut end = MAX_DESCRIPTION;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… [description cut at {MAX_DESCRIPTION} bytes]",
        &text[..end]
    )
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn names_are_sanitised_and_cut_to_64() {
        assert_eq!(visible("my srv", "get.file"), "mcp__my_srv__get_file");
        let long = visible("s", &"x".repeat(100));
        assert_eq!(long.len(), 64);
    }

    #[test]
    fn colliding_names_get_stable_hash_suffixes_whatever_the_order() {
        let a = assign(
            &pairs(&[("s", "search_a"), ("s", "search.a"), ("s", "ok")]),
            &[],
        );
        let b = assign(
            &pairs(&[("s", "search.a"), ("s", "search_a"), ("s", "ok")]),
            &[],
        );
        assert_eq!(a[0], b[1]);
        assert_eq!(a[1], b[0]);
        assert_eq!(a[2].as_deref(), Some("mcp__s__ok"));
        let (n0, n1) = (a[0].clone().unwrap(), a[1].clone().unwrap());
        assert_ne!(n0, n1);
        for n in [&n0, &n1] {
            assert!(
                n.starts_with("mcp__s__search_a_") && n.len() == "mcp__s__search_a_".len() + 8,
                "{n}"
            );
        }
        let taken = assign(&pairs(&[("s", "ok")]), &["mcp__s__ok".to_string()]);
        assert!(taken[0].as_deref().unwrap().starts_with("mcp__s__ok_"));
        let long = assign(
            &pairs(&[
                ("s", &"y".repeat(80)),
                ("s", &format!("{}z", "y".repeat(80))),
            ]),
            &[],
        );
        let (l0, l1) = (long[0].clone().unwrap(), long[1].clone().unwrap());
        assert_ne!(l0, l1);
        assert!(l0.len() <= 64 && l1.len() <= 64);
    }

    #[test]
    fn descriptions_are_capped_at_a_char_boundary() {
        let d = description(&"é".repeat(2000));
        assert!(d.len() < MAX_DESCRIPTION + 60);
        assert!(d.ends_with("[description cut at 2048 bytes]"));
        assert_eq!(description("short"), "short");
    }
}
