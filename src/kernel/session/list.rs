//! Where session files live and finding them: directory and file names (pi's), summaries for
//! the picker, and the `--continue` / `--resume` lookups. Reads files, never writes them, and
//! never prints: problems come back as `SessionError`s.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::written::{ContentView, MessageView};
use super::{SessionError, SessionErrorKind, SessionHeader};
use crate::kernel::clock::parse_iso;
use crate::kernel::field::Field;

/// The directory holding the sessions of `cwd`: `home/sessions/--<cwd>--`, where `<cwd>` loses
/// its leading `/` or `\` and has every `/`, `\` and `:` replaced by `-` (pi's naming).
pub fn session_dir(home: &Path, cwd: &Path) -> PathBuf {
    let cwd = cwd.to_string_lossy();
    let trimmed = cwd
        .strip_prefix('/')
        .or_else(|| cwd.strip_prefix('\\'))
        .unwrap_or(&cwd);
    let safe = trimmed.replace(['/', '\\', ':'], "-");
    home.join("sessions").join(format!("--{safe}--"))
}

/// The file name of a session: `<timestamp with : and . replaced by ->_<id>.jsonl`.
pub fn file_name(header: &SessionHeader) -> String {
    format!(
        "{}_{}.jsonl",
        header.timestamp.replace([':', '.'], "-"),
        header.id
    )
}

/// One session as the picker and `--continue` see it (also `session/list`'s items, in
/// camelCase).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    /// The session file.
    pub path: PathBuf,
    /// The header id.
    pub id: String,
    /// The header cwd.
    pub cwd: String,
    /// The header timestamp.
    pub created: String,
    /// Unix ms of the last entry's timestamp, or the file mtime if no entry has one.
    pub modified_ms: i64,
    /// How many `message` entries the file holds.
    pub message_count: usize,
    /// The text of the first user message.
    pub first_message: Option<String>,
    /// The latest `session_info` name.
    pub name: Option<String>,
}

/// Only the fields of an entry line that a summary needs; the rest is skipped unparsed.
#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(rename = "type")]
    kind: String,
    timestamp: Option<Value>,
    #[serde(borrow)]
    message: Option<&'a serde_json::value::RawValue>,
    name: Option<Value>,
}

/// The first non-blank line as a session header.
fn read_header(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> Option<SessionHeader> {
    loop {
        buf.clear();
        if reader.read_until(b'\n', buf).ok()? == 0 {
            return None;
        }
        if !buf.trim_ascii().is_empty() {
            let v: Value = serde_json::from_slice(buf).ok()?;
            return SessionHeader::from_json(&v).ok();
        }
    }
}

/// Reads a file line by line into a summary without keeping entries. `None` if it has no
/// valid header or (with `cwd`) belongs to another directory.
fn summarize(path: &Path) -> Option<SessionSummary> {
    let file = fs::File::open(path).ok()?;
    let mut reader = BufReader::new(file);
    let mut buf = Vec::new();
    let header = read_header(&mut reader, &mut buf)?;
    let mut sum = SessionSummary {
        path: path.to_path_buf(),
        id: header.id,
        cwd: header.cwd,
        created: header.timestamp,
        modified_ms: 0,
        message_count: 0,
        first_message: None,
        name: None,
    };
    let mut last_ms = None;
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Ok(peek) = serde_json::from_slice::<Peek>(&buf) else {
            continue;
        };
        if let Some(ms) = peek
            .timestamp
            .as_ref()
            .and_then(Value::as_str)
            .and_then(parse_iso)
        {
            last_ms = Some(ms);
        }
        match peek.kind.as_str() {
            "message" => {
                sum.message_count += 1;
                if sum.first_message.is_none() {
                    sum.first_message = peek
                        .message
                        .and_then(|raw| serde_json::from_str::<Field<MessageView>>(raw.get()).ok())
                        .and_then(user_text_of);
                }
            }
            "session_info" => {
                if let Some(Value::String(name)) = peek.name {
                    sum.name = Some(name);
                }
            }
            _ => {}
        }
    }
    sum.modified_ms = last_ms.or_else(|| mtime_ms(path)).unwrap_or(0);
    Some(sum)
}

/// The text blocks of a user message (`content` as string or block array), if it is one.
fn user_text_of(m: Field<MessageView>) -> Option<String> {
    let m = m.given()?;
    if m.role.given().as_deref() != Some("user") {
        return None;
    }
    match m.content.given()? {
        ContentView::Text(s) => Some(s),
        ContentView::Blocks(blocks) => {
            let texts: Vec<String> = blocks
                .into_iter()
                .filter_map(Field::given)
                .filter(|b| b.kind.clone().given().as_deref() == Some("text"))
                .filter_map(|b| b.text.given())
                .collect();
            Some(texts.join("\n"))
        }
    }
}

fn mtime_ms(path: &Path) -> Option<i64> {
    let modified = fs::metadata(path).ok()?.modified().ok()?;
    let since = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
    i64::try_from(since.as_millis()).ok()
}

fn summaries(dir: &Path) -> Vec<SessionSummary> {
    let Ok(read) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<SessionSummary> = read
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl") && p.is_file())
        .filter_map(|p| summarize(&p))
        .collect();
    newest_first(&mut out);
    out
}

/// Sorts by `modified_ms`, newest first (the path breaks ties, so the order is stable).
fn newest_first(sessions: &mut [SessionSummary]) {
    sessions.sort_by(|a, b| {
        b.modified_ms
            .cmp(&a.modified_ms)
            .then_with(|| b.path.cmp(&a.path))
    });
}

/// Every `*.jsonl` in `dir` with a valid session header, newest first by `modified_ms`.
/// A missing or unreadable directory lists nothing.
pub fn list(dir: &Path) -> Vec<SessionSummary> {
    summaries(dir)
}

/// Every session of every directory under `home/sessions/`, newest first (the picker's
/// "all directories" view).
pub fn list_all(home: &Path) -> Vec<SessionSummary> {
    let Ok(read) = fs::read_dir(home.join("sessions")) else {
        return Vec::new();
    };
    let mut out: Vec<SessionSummary> = read
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .flat_map(|dir| summaries(&dir))
        .collect();
    newest_first(&mut out);
    out
}

/// For `--continue`: the newest session in `dir` whose header `cwd` equals `cwd`, by the time
/// of its last entry. Reads only each file's header and tail, so it stays fast for huge files.
pub fn find_latest(dir: &Path, cwd: &str) -> Option<PathBuf> {
    let read = fs::read_dir(dir).ok()?;
    let mut best: Option<(i64, PathBuf)> = None;
    for path in read.filter_map(Result::ok).map(|e| e.path()) {
        if path.extension().is_none_or(|x| x != "jsonl") || !path.is_file() {
            continue;
        }
        let Ok(file) = fs::File::open(&path) else {
            continue;
        };
        let mut buf = Vec::new();
        let Some(header) = read_header(&mut BufReader::new(file), &mut buf) else {
            continue;
        };
        if header.cwd != cwd {
            continue;
        }
        let ms = last_entry_ms(&path)
            .or_else(|| mtime_ms(&path))
            .unwrap_or(0);
        if best
            .as_ref()
            .is_none_or(|(b, p)| ms > *b || (ms == *b && path > *p))
        {
            best = Some((ms, path));
        }
    }
    best.map(|(_, p)| p)
}

/// The timestamp of the last readable entry within the file's final 64 KiB.
fn last_entry_ms(path: &Path) -> Option<i64> {
    use std::io::{Read, Seek, SeekFrom};
    const TAIL: u64 = 64 * 1024;
    let mut file = fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(TAIL))).ok()?;
    let mut tail = Vec::new();
    file.take(TAIL).read_to_end(&mut tail).ok()?;
    tail.split(|b| *b == b'\n').rev().find_map(|line| {
        let peek: Peek<'_> = serde_json::from_slice(line).ok()?;
        if peek.kind == "session" {
            return None;
        }
        peek.timestamp
            .as_ref()
            .and_then(Value::as_str)
            .and_then(parse_iso)
    })
}

/// Characters of a session id shown where room is short (the TUI's header, the pickers).
pub const SHORT_ID_CHARS: usize = 8;

/// The part of a session id shown where room is short: its last [`SHORT_ID_CHARS`]
/// characters. A UUIDv7 starts with its creation time, so sessions made within the same
/// minute share their first characters; the end is random.
pub fn short_id(id: &str) -> &str {
    match id.char_indices().rev().nth(SHORT_ID_CHARS - 1) {
        Some((at, _)) => &id[at..],
        None => id,
    }
}

/// Whether `query` names session `id` when not exactly: a prefix or an end of it (the short
/// id shown is the end, see [`short_id`]). The one rule `--resume`, `--session`, `keel attach`
/// and the daemon's live sessions share.
pub fn id_matches(id: &str, query: &str) -> bool {
    !query.is_empty() && (id.starts_with(query) || id.ends_with(query))
}

/// For `--resume ID` / `--session ID`: the session whose id equals `query`, else the only one
/// whose id starts or ends with it ([`id_matches`]). Never guesses: no match is `NotFound` (listing known ids), several
/// are `Ambiguous` (listing every candidate).
pub fn resolve(dir: &Path, query: &str) -> Result<PathBuf, SessionError> {
    let all = list(dir);
    let exact: Vec<&SessionSummary> = all.iter().filter(|s| s.id == query).collect();
    let candidates = if exact.is_empty() && !query.is_empty() {
        all.iter().filter(|s| id_matches(&s.id, query)).collect()
    } else {
        exact
    };
    match candidates.as_slice() {
        [one] => Ok(one.path.clone()),
        [] => Err(not_found(dir, query, &all)),
        many => {
            let mut msg = format!("session id {query:?} is ambiguous; it matches:");
            for s in many {
                msg.push_str(&format!("\n  {}  {}", s.id, s.path.display()));
            }
            Err(SessionError::new(SessionErrorKind::Ambiguous, msg))
        }
    }
}

fn not_found(dir: &Path, query: &str, all: &[SessionSummary]) -> SessionError {
    let mut msg = format!("no session {query:?} in {}", dir.display());
    if all.is_empty() {
        msg.push_str(" (it holds no sessions)");
    } else {
        msg.push_str("; known sessions, newest first:");
        for s in all.iter().take(10) {
            let first = s.first_message.as_deref().map(preview).unwrap_or_default();
            msg.push_str(&format!("\n  {}  {first}", s.id));
        }
        if all.len() > 10 {
            msg.push_str(&format!("\n  … and {} more", all.len() - 10));
        }
    }
    SessionError::new(SessionErrorKind::NotFound, msg)
}

/// The first line of `text`, cut to 60 characters.
fn preview(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    let mut out: String = line.chars().take(60).collect();
    if line.chars().count() > 60 || text.lines().nth(1).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    const VALID: &str = include_str!("../../../fixtures/sessions/valid.jsonl");
    const NO_HEADER: &str = include_str!("../../../fixtures/sessions/no-header.jsonl");

    /// Writes a session with one user message at `last_ts` and returns its path.
    fn session(dir: &Path, id: &str, cwd: &str, last_ts: &str, text: &str) -> PathBuf {
        let path = dir.join(format!("{id}.jsonl"));
        let ts = "2026-01-01T00:00:00.000Z";
        let head = json!({"type": "session", "version": 3, "id": id, "timestamp": ts, "cwd": cwd});
        let msg = json!({"role": "user", "content": text, "timestamp": 0});
        let entry = json!({"type": "message", "id": "0000abcd", "parentId": null,
                           "timestamp": last_ts, "message": msg});
        fs::write(&path, format!("{head}\n{entry}\n")).unwrap();
        path
    }

    #[test]
    fn directory_and_file_names_follow_pi() {
        let home = Path::new("/h/.keel");
        let dir = session_dir(home, Path::new("/home/u/proj"));
        assert_eq!(dir, PathBuf::from("/h/.keel/sessions/--home-u-proj--"));
        let win = session_dir(home, Path::new("C:\\Users\\u"));
        assert_eq!(win, PathBuf::from("/h/.keel/sessions/--C--Users-u--"));
        let header = SessionHeader {
            id: "01a22a4d-c23c-773e-be8a-b1dc1a1a060b".into(),
            timestamp: "2026-11-30T02:34:28.797Z".into(),
            cwd: "/p".into(),
            parent_session: None,
        };
        assert_eq!(
            file_name(&header),
            "2026-11-30T02-34-28-797Z_01a22a4d-c23c-773e-be8a-b1dc1a1a060b.jsonl"
        );
        assert_eq!(
            header.to_json().to_string(),
            r#"{"type":"session","version":3,"id":"01a22a4d-c23c-773e-be8a-b1dc1a1a060b","timestamp":"2026-11-30T02:34:28.797Z","cwd":"/p"}"#
        );
    }

    #[test]
    fn list_summarizes_valid_files_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let valid = dir.path().join("valid.jsonl");
        fs::write(&valid, VALID).unwrap();
        fs::write(dir.path().join("no-header.jsonl"), NO_HEADER).unwrap();
        fs::write(dir.path().join("notes.txt"), VALID).unwrap();
        let newer = session(dir.path(), "newer", "/x", "2027-01-01T00:00:00.000Z", "hey");
        let all = list(dir.path());
        let paths: Vec<&Path> = all.iter().map(|s| s.path.as_path()).collect();
        assert_eq!(paths, [newer.as_path(), valid.as_path()]);
        let want = SessionSummary {
            path: valid,
            id: "01a22a52-7c1d-7a3e-9f10-3b5c2d4e6f70".into(),
            cwd: "/home/u/proj".into(),
            created: "2026-11-30T02:39:46.717Z".into(),
            modified_ms: parse_iso("2026-11-30T02:39:50.000Z").unwrap(),
            message_count: 5,
            first_message: Some("list the files".into()),
            name: Some("my run".into()),
        };
        assert_eq!(all[1], want);
        assert!(list(&dir.path().join("missing")).is_empty());
    }

    /// The first user message's text, whatever shape its content has: text blocks only, in
    /// order; messages that are not a user's object are passed over.
    #[test]
    fn the_first_user_text_is_read_from_any_content_shape() {
        let dir = tempfile::tempdir().unwrap();
        let first = |messages: &[Value]| {
            let path = dir.path().join("s.jsonl");
            let head = json!({"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"});
            let mut text = format!("{head}\n");
            for (i, m) in messages.iter().enumerate() {
                let e = json!({"type": "message", "id": format!("{i:08}"), "parentId": null,
                               "timestamp": "2026-01-01T00:00:01.000Z", "message": m});
                text.push_str(&format!("{e}\n"));
            }
            fs::write(&path, text).unwrap();
            list(dir.path()).remove(0).first_message
        };
        let blocks = json!({"role": "user", "content": [
            {"type": "text", "text": "a"}, {"type": "image"}, 5, null,
            {"type": "text", "text": 1}, {"text": "no type"}, {"type": "text", "text": "b"}]});
        assert_eq!(first(&[blocks]).as_deref(), Some("a\nb"));
        let assistant = json!({"role": "assistant", "content": "not this"});
        let user = json!({"role": "user", "content": "this"});
        assert_eq!(first(&[assistant, user]).as_deref(), Some("this"));
        for odd in [
            json!(["user", "x"]),
            json!({"role": "user", "content": null}),
            json!({"role": "user", "content": 3}),
            json!({"role": "user"}),
            json!(null),
        ] {
            assert_eq!(first(std::slice::from_ref(&odd)), None, "{odd}");
        }
    }

    #[test]
    fn list_all_merges_every_directory_newest_first() {
        let home = tempfile::tempdir().unwrap();
        let a = session_dir(home.path(), Path::new("/a"));
        let b = session_dir(home.path(), Path::new("/b"));
        fs::create_dir_all(&a).unwrap();
        fs::create_dir_all(&b).unwrap();
        let old = session(&a, "old", "/a", "2026-01-01T00:00:00.000Z", "first");
        let mid = session(&b, "mid", "/b", "2026-02-01T00:00:00.000Z", "second");
        let new = session(&a, "new", "/a", "2026-03-01T00:00:00.000Z", "third");
        let paths: Vec<PathBuf> = list_all(home.path()).into_iter().map(|s| s.path).collect();
        assert_eq!(paths, [new, mid, old]);
        assert!(list_all(&home.path().join("missing")).is_empty());
    }

    #[test]
    fn find_latest_uses_last_entry_time_and_cwd() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // written first (older mtime) but with the newest entry
        let want = session(d, "b-newest", "/a", "2026-06-01T00:00:00.000Z", "b");
        session(d, "a-older", "/a", "2026-05-01T00:00:00.000Z", "a");
        session(d, "c-other", "/c", "2026-07-01T00:00:00.000Z", "c");
        assert_eq!(find_latest(d, "/a"), Some(want));
        assert_eq!(find_latest(d, "/nowhere"), None);
    }

    #[test]
    fn resolve_never_guesses() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let abc = session(d, "abc", "/p", "2026-01-03T00:00:00.000Z", "first\nsecond");
        let abcd = session(d, "abcd", "/p", "2026-01-02T00:00:00.000Z", "two");
        let xyz = session(d, "xyz9", "/p", "2026-01-01T00:00:00.000Z", "three");
        assert_eq!(resolve(d, "abc").unwrap(), abc);
        assert_eq!(resolve(d, "abcd").unwrap(), abcd);
        assert_eq!(resolve(d, "xy").unwrap(), xyz);
        let amb = resolve(d, "ab").unwrap_err();
        assert_eq!(amb.kind, SessionErrorKind::Ambiguous);
        let want = format!(
            "session id \"ab\" is ambiguous; it matches:\n  abc  {}\n  abcd  {}",
            abc.display(),
            abcd.display()
        );
        assert_eq!(amb.message, want);
        let none = resolve(d, "q").unwrap_err();
        assert_eq!(none.kind, SessionErrorKind::NotFound);
        let want = format!(
            "no session \"q\" in {}; known sessions, newest first:\n  abc  first…\n  abcd  two\n  xyz9  three",
            d.display()
        );
        assert_eq!(none.message, want);
        assert_eq!(resolve(d, "").unwrap_err().kind, SessionErrorKind::NotFound);
        let empty = tempfile::tempdir().unwrap();
        let err = resolve(empty.path(), "abc").unwrap_err();
        assert!(err.message.ends_with("(it holds no sessions)"), "{err}");
    }
}
