//! `keel --export SESSION [OUT.html]` (issue 16, point 17): a scripted session with a table, a
//! rust block, an edit and a bash call, exported without a provider, checked as HTML text and,
//! where Chromium is installed (`/usr/bin/chromium` or `KEEL_CHROMIUM`; `.ci/run` installs
//! Debian's), as the DOM a headless browser builds from it. Without Chromium the DOM test says
//! it was skipped.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::support::Sandbox;

/// A sandbox holding one finished scripted session (fixtures/providers/export.json) that
/// edited `lib.rs` and ran a bash command; returns it with the session's file and id.
fn exported_session() -> (Sandbox, PathBuf, String) {
    let s = Sandbox::new();
    std::fs::write(s.work().join("lib.rs"), "fn a() {}\nfn b() {}\n").unwrap();
    let run = s.scripted(
        "-p",
        "export.json",
        &["export this <script>alert('prompt')</script>"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let files = s.session_files();
    assert_eq!(files.len(), 1);
    let header = std::fs::read_to_string(&files[0]).unwrap();
    let header: serde_json::Value = serde_json::from_str(header.lines().next().unwrap()).unwrap();
    let id = header["id"].as_str().unwrap().to_string();
    (s, files[0].clone(), id)
}

/// The `<main>` part of a page (the stylesheet and header are not transcript).
fn main_of(html: &str) -> &str {
    &html[html.find("<main>").expect("a <main>")..]
}

fn check_transcript(html: &str) {
    let main = main_of(html);
    for part in [
        "<h2>Plan</h2>",
        "<table>",
        "<th style=\"text-align: center\">説明</th>",
        "<td style=\"text-align: left\"><code>edit</code></td>",
        "<td style=\"text-align: right\">12</td>",
        "<pre class=\"code\" data-lang=\"rust\"><code><span class=\"hl-kw\">fn</span>",
        "<span class=\"hl-cm\">// new</span>",
        "<span class=\"key\">path</span> <span class=\"mono\">lib.rs</span>",
        "<span class=\"del\">-fn b() {}</span>",
        "<span class=\"add\">+fn c() -&gt; &amp;&#39;static str { &quot;see&quot; } // new</span>",
        "<pre class=\"code\" data-lang=\"bash\"><code>",
        "<details class=\"thinking\"><summary>thinking</summary>",
        "Done: <code>b</code> is now <code>c</code>.",
    ] {
        assert!(main.contains(part), "missing {part:?} in\n{main}");
    }
    // Hostile text from the user and the model is text, never markup.
    assert!(!main.contains("<script"), "{main}");
    assert!(main.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(main.contains("&lt;script&gt;alert(&#39;prompt&#39;)&lt;/script&gt;"));
    // Arguments are fields, not JSON with escapes.
    assert!(!main.contains("oldText") && !main.contains("\\n"), "{main}");
    // Self-contained: no external resources, no scripts.
    assert!(!html.contains("src=\"http") && !html.contains("<link") && !html.contains("<script"));
}

#[test]
fn export_by_id_prefix_writes_pis_default_name_without_a_provider() {
    let (s, file, id) = exported_session();
    let run = s.run(&["--export", &id[..13]]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let stem = file.file_stem().unwrap().to_string_lossy().to_string();
    let want = s.work().join(format!("keel-session-{stem}.html"));
    assert_eq!(run.stdout, format!("{}\n", want.display()));
    assert_eq!(run.stderr, "");
    let html = std::fs::read_to_string(&want).unwrap();
    check_transcript(&html);
    let mode = std::fs::metadata(&want).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "exports are private");
}

#[test]
fn export_by_path_to_a_named_file() {
    let (s, file, _) = exported_session();
    let run = s.run(&["--export", file.to_str().unwrap(), "out/page.html"]);
    assert_ne!(run.code, 0, "a missing directory is an error");
    assert!(run.stderr.contains("cannot write"), "{}", run.stderr);
    std::fs::create_dir(s.work().join("out")).unwrap();
    let run = s.run(&["--export", file.to_str().unwrap(), "out/page.html"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = s.work().join("out/page.html");
    assert_eq!(run.stdout, format!("{}\n", out.display()));
    check_transcript(&std::fs::read_to_string(out).unwrap());
}

#[test]
fn export_of_an_unknown_session_is_a_clear_error() {
    let (s, _, _) = exported_session();
    let run = s.run(&["--export", "zzzz"]);
    assert_eq!(run.code, 3, "unknown session: exit 3 as for --session");
    assert!(
        run.stderr.starts_with("Error: no session \"zzzz\""),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("Hint: "), "{}", run.stderr);
    assert_eq!(run.stdout, "");
    let run = s.run(&["--export", "missing/file.jsonl"]);
    assert_eq!(run.code, 3);
    assert!(run.stderr.contains("no session file at"), "{}", run.stderr);
    let run = s.run(&["--export", "x", "out.html", "a prompt"]);
    assert_eq!(run.code, 2, "a prompt with --export is a usage error");
}

/// Chromium, if installed.
fn chromium() -> Option<PathBuf> {
    match std::env::var_os("KEEL_CHROMIUM") {
        Some(p) => Some(PathBuf::from(p)),
        None => Some(PathBuf::from("/usr/bin/chromium")).filter(|p| p.exists()),
    }
}

/// The DOM headless Chromium builds from `page` (scripts would run; none may exist).
fn dump_dom(chromium: &Path, page: &Path, profile: &Path) -> String {
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .env("HOME", profile)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_exported_page_renders_in_headless_chromium() {
    let Some(chromium) = chromium() else {
        crate::common::support::skipped("the HTML export in Chromium: no Chromium (/usr/bin/chromium or KEEL_CHROMIUM; .ci/run installs it)");
        return;
    };
    let (s, _, id) = exported_session();
    let run = s.run(&["--export", &id, "page.html"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let profile = s.dir.path().join("chromium");
    std::fs::create_dir(&profile).unwrap();
    let dom = dump_dom(&chromium, &s.work().join("page.html"), &profile);
    let main = main_of(&dom);
    // The table with its cells, as the browser parsed it.
    let table = &main[main.find("<table>").expect("a table")..main.find("</table>").unwrap()];
    for cell in [
        "<th style=\"text-align: center\">説明</th>",
        "<td style=\"text-align: left\"><code>edit</code></td>",
    ] {
        assert!(table.contains(cell), "{cell} not in {table}");
    }
    assert_eq!(
        table.matches("<tr>").count(),
        3,
        "header and two rows: {table}"
    );
    // Highlighted code and the diff lines.
    assert!(main.contains("<span class=\"hl-kw\">fn</span>"), "{main}");
    assert!(main.contains("<span class=\"del\">-fn b() {}</span>"));
    assert!(main.contains("<span class=\"add\">+fn c()"));
    // The hostile text stayed text: the browser made no script element of it.
    assert!(!dom.contains("<script"), "{dom}");
    assert!(main.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
}
