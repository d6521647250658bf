//! `keel web` in a real browser (issue 49, point 6): Debian's Chromium (`/usr/bin/chromium` or
//! `KEEL_CHROMIUM`) driven over the DevTools protocol by puppeteer-core (pinned; `.ci/run`
//! installs it and sets `KEEL_PUPPETEER`), against a real daemon with the scripted provider,
//! on a 390×844 phone viewport. The sessions list; a prompt typed in the page; the approval it
//! asks for shown with its buttons; a reload while it waits replays the stream exactly; the
//! approval answered in the browser runs the tool (a client on the daemon's socket sees it);
//! the answer, full of `<script>`, `javascript:` and `onerror=`, rendered inert; a second tab
//! on the session shows the same transcript; notifications for the approval and the run's end,
//! none for a replay; a page of another origin in the same browser
//! reaches nothing. Screenshots go to target/web-artifacts/. Skipped, with a message, without
//! Chromium or puppeteer-core.

use std::path::PathBuf;
use std::process::Command;

use serde::Deserialize;
use serde_json::json;

use crate::common::daemon::{self, Daemon};
use crate::common::support::Sandbox;
use crate::web::Web;

/// The answer: its text holds what must never run.
const HOSTILE: &str = "Done. <script>window.pwned = 1</script> [click](javascript:window.pwned=2) \
    <img src=x onerror=\"window.pwned=3\"> <a href=\"javascript:window.pwned=4\">a</a> **bold**";

/// What the page did, as the driver reports it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    listed: Vec<String>,
    seqs_before_reload: Vec<u64>,
    seqs_after_reload: Vec<u64>,
    attaches_after_reload: Vec<serde_json::Value>,
    dialog_after_reload: bool,
    allow_in_view: bool,
    scroll_width: u64,
    inner_width: u64,
    final_seqs: Vec<u64>,
    transcript: String,
    pwned: Option<serde_json::Value>,
    scripts: u64,
    images: u64,
    javascript_links: u64,
    strong: u64,
    cross_origin: serde_json::Value,
    second_transcript: String,
    second_seqs: Vec<u64>,
    notes_before_reload: Vec<String>,
    final_notes: Vec<String>,
}

/// The driver: argv is puppeteer-core's directory; the rest comes in the environment.
const DRIVER: &str = r#"
import { pathToFileURL } from 'node:url';
const [, , dir] = process.argv;
const { default: puppeteer } = await import(pathToFileURL(`${dir}/lib/puppeteer/puppeteer-core.js`));
const { KEEL_URL: url, KEEL_SESSION: id, KEEL_CHROMIUM: chromium, KEEL_ARTIFACTS: shots } = process.env;
const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-extensions'],
});
const shot = (page, name) => page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
const out = {};
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 390, height: 844, isMobile: true, hasTouch: true });
  page.on('dialog', (d) => d.dismiss());
  // Notifications allowed, and the tab not in front: what the page would show is recorded.
  await page.evaluateOnNewDocument(() => {
    window.notes = [];
    window.Notification = class {
      static permission = 'granted';
      constructor(title) { window.notes.push(title); }
    };
    document.hasFocus = () => false;
  });
  page.on('console', (m) => console.error(`console: ${m.text()}`));
  page.on('pageerror', (e) => console.error(`page error: ${e.message}`));
  await page.goto(url);
  const button = `#sessions button[data-session="${id}"]`;
  await page.waitForSelector(button, { timeout: 15000 });
  out.listed = await page.$$eval('#sessions button', (bs) => bs.map((b) => b.dataset.session));
  await shot(page, '1-list');
  await page.click(button);
  await page.waitForSelector('#prompt', { visible: true });
  await page.type('#prompt', 'go');
  await page.keyboard.press('Enter');
  const allow = '.dialog button[data-answer="allow"]';
  await page.waitForSelector(allow, { visible: true, timeout: 15000 });
  await shot(page, '2-approval');
  out.seqsBeforeReload = await page.evaluate(() => window.keel.seqs.slice());
  out.notesBeforeReload = await page.evaluate(() => window.notes.slice());
  // Mid-run (the run waits on the approval): the page comes back from the stream's start.
  await page.reload();
  await page.waitForSelector(allow, { visible: true, timeout: 15000 });
  const last = out.seqsBeforeReload[out.seqsBeforeReload.length - 1];
  await page.waitForFunction((n) => window.keel.seqs.includes(n), {}, last);
  out.seqsAfterReload = await page.evaluate(() => window.keel.seqs.slice());
  out.attachesAfterReload = await page.evaluate(() => window.keel.attaches.slice());
  out.dialogAfterReload = true;
  await page.$eval(allow, (b) => b.scrollIntoView({ block: 'nearest' }));
  out.allowInView = await page.$eval(allow, (b) => {
    const r = b.getBoundingClientRect();
    return r.left >= 0 && r.right <= window.innerWidth && r.top >= 0 && r.bottom <= window.innerHeight;
  });
  out.scrollWidth = await page.evaluate(() => document.documentElement.scrollWidth);
  out.innerWidth = await page.evaluate(() => window.innerWidth);
  await page.click(allow);
  await page.waitForFunction(() => document.querySelector('#status').textContent === 'idle'
    && document.querySelector('#transcript strong') !== null, { timeout: 15000 });
  await shot(page, '3-answered');
  out.finalSeqs = await page.evaluate(() => window.keel.seqs.slice());
  out.finalNotes = await page.evaluate(() => window.notes.slice());
  out.transcript = await page.$eval('#transcript', (t) => t.textContent);
  out.pwned = await page.evaluate(() => window.pwned ?? null);
  out.scripts = await page.$$eval('#transcript script', (s) => s.length);
  out.images = await page.$$eval('#transcript img', (s) => s.length);
  out.javascriptLinks = await page.$$eval('#transcript a', (as) =>
    as.filter((a) => (a.getAttribute('href') || '').trim().toLowerCase().startsWith('javascript')).length);
  out.strong = await page.$$eval('#transcript strong', (s) => s.length);
  // A second tab on the same session (the cookie is the browser's): the same transcript.
  const second = await browser.newPage();
  await second.setViewport({ width: 390, height: 844, isMobile: true, hasTouch: true });
  await second.goto(`${new URL(url).origin}/#s=${encodeURIComponent(id)}`);
  await second.waitForFunction(() => document.querySelector('#status').textContent === 'idle'
    && document.querySelector('#transcript strong') !== null, { timeout: 15000 });
  await shot(second, '4-second-tab');
  out.secondTranscript = await second.$eval('#transcript', (t) => t.textContent);
  out.secondSeqs = await second.evaluate(() => window.keel.seqs.slice());
  // Another origin in the same browser (another port of 127.0.0.1: the same site, so the
  // cookie goes along): its own CSP lifted, it still reaches nothing.
  const other = await browser.newPage();
  await other.setBypassCSP(true);
  await other.goto(process.env.KEEL_OTHER);
  out.crossOrigin = await other.evaluate(async (target) => {
    const ws = await new Promise((resolve) => {
      const s = new WebSocket(`ws://${target}/ws`);
      s.onopen = () => { s.close(); resolve('open'); };
      s.onerror = () => resolve('refused');
    });
    let post;
    try {
      const r = await fetch(`http://${target}/render`, {
        method: 'POST', credentials: 'include',
        headers: { 'X-Keel': '1', 'Content-Type': 'application/json' }, body: '{"text":"hi"}',
      });
      post = `status ${r.status}`;
    } catch (e) {
      post = 'refused';
    }
    return { ws, post };
  }, new URL(url).host);
} catch (e) {
  const [page] = (await browser.pages()).slice(-1);
  if (page) {
    await shot(page, 'failed');
    console.error(await page.evaluate(() => JSON.stringify(window.keel)));
  }
  throw e;
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
"#;

fn chromium() -> Option<PathBuf> {
    match std::env::var_os("KEEL_CHROMIUM") {
        Some(p) => Some(PathBuf::from(p)),
        None => Some(PathBuf::from("/usr/bin/chromium")).filter(|p| p.exists()),
    }
}

/// puppeteer-core's directory: `KEEL_PUPPETEER`, else where `.ci/run` installs it.
fn puppeteer() -> Option<PathBuf> {
    let dir = match std::env::var_os("KEEL_PUPPETEER") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("target/web-browser/node_modules/puppeteer-core"),
    };
    Some(dir).filter(|d| d.join("package.json").exists())
}

#[test]
fn the_page_lists_streams_asks_replays_on_reload_and_renders_model_text_inert() {
    let (Some(chromium), Some(puppeteer)) = (chromium(), puppeteer()) else {
        crate::common::support::skipped(
            "keel web in Chromium: no Chromium (KEEL_CHROMIUM) or no puppeteer-core (KEEL_PUPPETEER; .ci/run installs both)",
        );
        return;
    };
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let w = Web::start(&sb, &d.socket);
    let script = sb.dir.path().join("web.json");
    let turns = json!({"turns": [
        {"match": "^go", "chunks": [
            {"text": "Making the file."},
            {"toolCall": {"id": "call_touch", "name": "bash",
                          "arguments": {"command": "touch approved.txt"}}}
        ]},
        {"chunks": [{"text": HOSTILE}]}
    ]});
    std::fs::write(&script, turns.to_string()).unwrap();
    let mut direct = d.client();
    let flags = ["--permission", "ask", "--approval-timeout", "120"];
    let id = daemon::open_script(&mut direct, &sb, script.to_str().unwrap(), &flags);
    direct.call("session/attach", json!({"sessionId": id}));

    let shots = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/web-artifacts");
    std::fs::create_dir_all(&shots).unwrap();
    // A second server: another origin whose page tries to reach the first.
    let other = Web::start(&sb, &d.socket);
    let other_url = other.url.split('#').next().unwrap().to_string();
    let driver = sb.dir.path().join("driver.mjs");
    std::fs::write(&driver, DRIVER).unwrap();
    let out = Command::new("node")
        .arg(&driver)
        .arg(&puppeteer)
        .env("KEEL_URL", &w.url)
        .env("KEEL_SESSION", &id)
        .env("KEEL_OTHER", &other_url)
        .env("KEEL_CHROMIUM", &chromium)
        .env("KEEL_ARTIFACTS", &shots)
        .env("HOME", sb.dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n---\n{stderr}");
    let r: Report = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n---\n{stderr}"));

    assert_eq!(r.listed, vec![id.clone()]);
    // Before the reload: 1, 2, … up to the open dialog. After it: the same from 1 again (a new
    // page), each once, with the dialog back.
    let n = r.seqs_before_reload.len() as u64;
    assert_eq!(r.seqs_before_reload, (1..=n).collect::<Vec<_>>());
    let after = &r.seqs_after_reload;
    assert_eq!(after[..n as usize], r.seqs_before_reload[..], "{after:?}");
    assert_eq!(
        r.attaches_after_reload[0]["mode"], "replay",
        "{:?}",
        r.attaches_after_reload
    );
    assert!(r.dialog_after_reload);
    // The phone layout: no horizontal scroll, the approval's buttons reachable.
    assert!(
        r.scroll_width <= r.inner_width,
        "{} > {}",
        r.scroll_width,
        r.inner_width
    );
    assert!(r.allow_in_view);
    // Answered in the browser: the tool ran, and the socket's client saw it.
    let all = direct.events_until("agent_settled");
    assert!(sb.work().join("approved.txt").exists());
    let ended = all
        .iter()
        .find(|(_, e)| e["type"] == "tool_execution_end")
        .expect("the tool ran");
    assert_eq!(ended.1["isError"], false, "{:?}", ended.1);
    let last = all.last().unwrap().0;
    assert_eq!(
        r.final_seqs,
        (1..=last).collect::<Vec<_>>(),
        "the page saw every event once"
    );
    // The hostile answer: shown as text, nothing of it run or made an element.
    assert!(
        r.transcript.contains("<script>window.pwned = 1</script>"),
        "{}",
        r.transcript
    );
    assert_eq!(r.pwned, None);
    assert_eq!((r.scripts, r.images, r.javascript_links), (0, 0, 0));
    assert_eq!(r.strong, 1, "the markdown is rendered");
    // A second tab opened on the session afterwards: every event once, the same transcript.
    assert_eq!(r.second_seqs, r.final_seqs);
    assert_eq!(r.second_transcript, r.transcript);
    // Notifications (the tab not in front): the approval as it opened, the run's end; nothing
    // again for what the reload replayed.
    assert_eq!(r.notes_before_reload, ["keel: waiting for approval"]);
    assert_eq!(r.final_notes, ["keel: run finished"]);
    // Another origin: its WebSocket refused (403: the Origin check, the cookie went along),
    // its POST stopped at the preflight.
    let refused = json!({"ws": "refused", "post": "refused"});
    assert_eq!(r.cross_origin, refused);
}
