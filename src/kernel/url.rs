//! URLs as keel shows them: the credentials a URL may carry in its userinfo
//! (`scheme://user:password@host`) are never printed, in a status, a log line or an error.
//! Pure text in, text out; it never reads or writes anything.

/// `text` with the userinfo of every URL in it (`scheme://…@`) redacted: `user:password@`
/// becomes `user:***@`, and a userinfo without `:` (a token, as NATS takes one) becomes `***@`.
/// Works on one URL, a comma-separated list of them (`nats://a,nats://b`) or a whole message
/// that quotes URLs; text without `://` is returned as it is.
pub fn redact_url(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let end = after.find(ends_authority).unwrap_or(after.len());
        let authority = &after[..end];
        match authority.rfind('@') {
            Some(i) => {
                let userinfo = &authority[..i];
                match userinfo.split_once(':') {
                    Some((user, _)) => {
                        out.push_str(user);
                        out.push_str(":***");
                    }
                    None => out.push_str("***"),
                }
                out.push_str(&authority[i..]);
            }
            None => out.push_str(authority),
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Characters that end a URL's authority (host part) in running text.
fn ends_authority(c: char) -> bool {
    c.is_whitespace() || "/?#,;\"'<>()[]{}`".contains(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_redacted_in_every_url_of_a_text() {
        assert_eq!(
            redact_url("nats://user:s3cret@host:4222"),
            "nats://user:***@host:4222"
        );
        assert_eq!(redact_url("nats://tok3n@host"), "nats://***@host");
        assert_eq!(
            redact_url("nats://a:p1@h1:1,tls://b:p2@h2:2"),
            "nats://a:***@h1:1,tls://b:***@h2:2"
        );
        assert_eq!(
            redact_url("cannot reach http://u:p@ss@h/v1/models?x=a@b: refused"),
            "cannot reach http://u:***@h/v1/models?x=a@b: refused"
        );
        assert_eq!(
            redact_url("error for url (https://k:v@api.example/v1)"),
            "error for url (https://k:***@api.example/v1)"
        );
        let plain = "nats://127.0.0.1:4222 and me@example.org and http://h/a@b";
        assert_eq!(redact_url(plain), plain);
        assert_eq!(redact_url("no url"), "no url");
        assert_eq!(redact_url("x://"), "x://");
    }
}
