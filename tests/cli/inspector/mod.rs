//! The web inspector in a real browser: Debian's headless Chromium driven
//! through WebDriver (chromedriver, with fantoccini) against `wf serve` on a
//! real database. Every page renders with real data, the actions change
//! the history, a running step's output arrives live, no page logs a
//! console error, no request leaves the machine, and the pages fit a
//! 360 px screen. `.ci/run` installs chromium and chromium-driver; without
//! them these tests fail, naming them.
//!
//! `WF_SCREENSHOTS=DIR` makes `screenshots_of_the_main_pages` (ignored in
//! the plain run) write the pages at 1280 and 360 px wide into DIR
//! (`scripts/screenshots` runs it for docs/inspector.md).

mod authoring;
mod bulk;
mod compare;
mod follows;
mod list;
mod queues;
mod scopes;
mod upgrades;
mod waterfall;
mod workflows;

use crate::Test;
use crate::serve::{PATIENCE, Server, TOKEN, until};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A chromedriver and a headless Chromium session on it.
struct Browser {
    driver: Child,
    client: Option<Client>,
    rt: tokio::runtime::Runtime,
    _profile: tempfile::TempDir,
}

/// chromedriver's `se/log` (Selenium's extension, which chromedriver
/// serves): the browser's console entries since the last read.
#[derive(Debug)]
struct BrowserLog;

impl fantoccini::wd::WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(r#"{"type": "browser"}"#.into()))
    }
}

impl Browser {
    fn start() -> Browser {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("chromedriver is missing ({e}): install Debian's chromium and chromium-driver (`.ci/run` does)")
            });
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(start.elapsed() < PATIENCE, "chromedriver did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        let profile = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let caps: serde_json::Map<String, Value> = serde_json::from_value(json!({
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--window-size=1280,900", "--no-first-run", "--disable-extensions",
                    "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--metrics-recording-only", "--no-default-browser-check",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
            "goog:loggingPrefs": { "browser": "ALL" },
        }))
        .unwrap();
        let client = rt
            .block_on(
                ClientBuilder::rustls()
                    .expect("rustls")
                    .capabilities(caps)
                    .connect(&format!("http://127.0.0.1:{port}")),
            )
            .unwrap_or_else(|e| panic!("cannot start Chromium through chromedriver: {e}"));
        Browser {
            driver,
            client: Some(client),
            rt,
            _profile: profile,
        }
    }

    fn c(&self) -> &Client {
        self.client.as_ref().unwrap()
    }

    fn goto(&self, url: &str) {
        self.rt.block_on(self.c().goto(url)).unwrap();
    }

    fn text(&self, css: &str) -> String {
        self.rt
            .block_on(async {
                let e = self.c().find(Locator::Css(css)).await?;
                e.text().await
            })
            .unwrap_or_else(|e| panic!("{css}: {e}"))
    }

    fn count(&self, css: &str) -> usize {
        self.rt
            .block_on(self.c().find_all(Locator::Css(css)))
            .map_or(0, |v| v.len())
    }

    fn js(&self, script: &str) -> Value {
        self.rt.block_on(self.c().execute(script, vec![])).unwrap()
    }

    fn click(&self, css: &str) {
        self.rt
            .block_on(async {
                let e = self.c().find(Locator::Css(css)).await?;
                e.click().await
            })
            .unwrap_or_else(|e| panic!("click {css}: {e}"));
    }

    fn fill(&self, css: &str, text: &str) {
        self.rt
            .block_on(async {
                let e = self.c().find(Locator::Css(css)).await?;
                e.clear().await?;
                e.send_keys(text).await
            })
            .unwrap_or_else(|e| panic!("fill {css}: {e}"));
    }

    fn url(&self) -> String {
        self.rt
            .block_on(self.c().current_url())
            .unwrap()
            .to_string()
    }

    fn page(&self) -> String {
        self.rt.block_on(self.c().source()).unwrap()
    }

    /// Waits (bounded) until the page's text contains `needle`.
    #[track_caller]
    fn wait_text(&self, needle: &str) {
        let start = Instant::now();
        loop {
            let body = self.js("return document.body.innerText;");
            if body.as_str().is_some_and(|b| b.contains(needle)) {
                return;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "the page never showed {needle:?}: {body}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The console's errors since the last call.
    fn console_errors(&self) -> Vec<String> {
        let log = self
            .rt
            .block_on(self.c().issue_cmd(BrowserLog))
            .unwrap_or(Value::Null);
        log.as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Every URL the page loaded, and that none left `base`.
    #[track_caller]
    fn only_from(&self, base: &str) {
        let urls = self.js(
            "return [location.href].concat(performance.getEntriesByType('resource').map(e => e.name));",
        );
        for u in urls.as_array().unwrap() {
            let u = u.as_str().unwrap();
            assert!(u.starts_with(base), "a request left the server: {u}");
        }
    }

    /// Whether the page stays wider than the window (a sideways scroll)
    /// once it is laid out at the window's width (a resize takes effect
    /// with the next layout: awaited, up to a few seconds).
    fn overflows(&self) -> bool {
        let start = Instant::now();
        loop {
            let wide = self
                .js("return document.documentElement.scrollWidth > window.innerWidth + 1;")
                .as_bool()
                .unwrap_or(true);
            if !wide || start.elapsed() > Duration::from_secs(3) {
                return wide;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The widths (of 1280 and 360 px) at which page `url` is wider than
    /// the window; the window is left at 360 px.
    #[track_caller]
    fn too_wide_at(&self, url: &str) -> Vec<u32> {
        let mut wide = Vec::new();
        for (w, h) in [(1280, 900), (360, 740)] {
            self.resize(w, h);
            self.goto(url);
            if self.overflows() {
                wide.push(w);
            }
        }
        wide
    }

    fn resize(&self, w: u32, h: u32) {
        self.rt.block_on(self.c().set_window_size(w, h)).unwrap();
    }

    fn screenshot(&self) -> Vec<u8> {
        self.rt.block_on(self.c().screenshot()).unwrap()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(c) = self.client.take() {
            let _ = self.rt.block_on(c.close());
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// A server with some history, and a browser signed in to it.
struct Scene {
    t: Test,
    s: Server,
    b: Browser,
    done: String,
    failed: String,
    waiting: String,
}

const FANOUT: &str = "name: fanout
inputs:
  who: { default: world }
labels: { team: core }
outputs:
  greeting: \"${{ steps.greet.output.said }}\"
steps:
  - id: prepare
    run: echo preparing
  - id: items
    needs: [prepare]
    for_each: [a, b, c]
    run: echo item ${{ item }}
  - id: greet
    needs: [prepare]
    run: echo \"said=hello ${{ inputs.who }}\" >> \"$WF_OUTPUT\"
  - id: report
    needs: [items, greet]
    run: echo done
";

const GATED: &str = "name: gated
steps:
  - id: gate
    wait_for_event: { name: go }
  - id: after
    needs: [gate]
    run: echo got it
    compensate:
      run: echo undo
";

fn scene() -> Scene {
    let t = Test::new();
    let (done, r) = t.run_yaml("fanout.yaml", FANOUT, &["--input", "who=ana"]);
    r.code(0);
    let (failed, r) = t.run_yaml(
        "bad.yaml",
        "name: bad\nsteps:\n  - id: boom\n    run: echo 'disk full' >&2; exit 3\n",
        &[],
    );
    r.code(1);
    let (waiting, r) = t.run_yaml("gated.yaml", GATED, &[]);
    r.code(3);
    let path = t.write("fanout.yaml", FANOUT);
    t.wf(&["workflow", "add", path.to_str().unwrap()]).code(0);
    let s = Server::start(&t, &[], &[]);
    let b = Browser::start();
    // The sign-in link sets the session cookie.
    b.goto(&format!("{}/?token={TOKEN}", s.base));
    assert_eq!(b.url(), format!("{}/", s.base));
    Scene {
        t,
        s,
        b,
        done,
        failed,
        waiting,
    }
}

#[test]
fn every_page_renders_the_history_without_errors_or_outside_requests() {
    let Scene {
        t,
        s,
        b,
        done,
        failed,
        waiting,
    } = scene();
    let base = s.base.clone();
    // The list: three instances, their statuses.
    b.goto(&format!("{base}/"));
    let _ = &t;
    assert_eq!(b.count("tbody tr"), 3);
    let list = b.text("tbody");
    for (id, status) in [
        (&done, "completed"),
        (&failed, "failed"),
        (&waiting, "waiting"),
    ] {
        assert!(list.contains(&id[..12]), "{list}");
        assert!(list.contains(status), "{list}");
    }
    // Filtered.
    b.goto(&format!("{base}/?status=failed"));
    assert_eq!(b.count("tbody tr"), 1);
    assert!(b.text("tbody").contains(&failed[..12]));
    // An instance: header, graph, steps, attempts, trace, outputs.
    b.goto(&format!("{base}/instances/{}", &done[..8]));
    assert!(b.text("h1").contains(&done));
    assert_eq!(b.count(".across svg.graph g.node"), 4, "a box per step");
    assert_eq!(
        b.count(".across svg.graph path.edge"),
        4,
        "an arrow per need"
    );
    assert_eq!(b.count(".across svg.graph g.node.s-completed"), 4);
    let steps = b.text("#live table");
    for key in ["prepare", "items[0]", "items[2]", "greet", "report"] {
        assert!(steps.contains(key), "{steps}");
    }
    assert!(b.page().contains("hello ana"), "the outputs are shown");
    assert!(b.count(".waterfall .bar") >= 6, "the trace waterfall");
    assert!(b.text("main").contains("team=core"));
    // A failed one shows its error; its logs page its stderr.
    b.goto(&format!("{base}/instances/{failed}"));
    assert!(b.text("#live").contains("exit.3"));
    b.goto(&format!("{base}/instances/{failed}/logs/boom?attempt=1"));
    b.wait_text("disk full");
    // Workflows and queues.
    b.goto(&format!("{base}/workflows"));
    assert!(b.text("tbody").contains("fanout"));
    b.goto(&format!("{base}/queues"));
    b.wait_text("No queue");
    // A queue with one admitted (a sleeper holding its slot) and one waiting.
    let q = t.write(
        "q.yaml",
        "name: q\nqueue: { key: deploy-prod, concurrency: 1, hold_while_suspended: true }\nsteps:\n  - id: nap\n    sleep: 1h\n",
    );
    t.wf(&["run", q.to_str().unwrap()]).code(3);
    t.wf(&["run", q.to_str().unwrap(), "--detach"]).code(0);
    b.goto(&format!("{base}/queues"));
    let cells = b.js("return [...document.querySelectorAll('tbody tr:first-child td')].map(td => td.innerText.trim());");
    assert_eq!(
        cells.as_array().unwrap()[..4],
        [json!("deploy-prod"), json!("1"), json!("1"), json!("1")],
        "{cells}"
    );
    for page in ["/", &format!("/instances/{done}"), "/workflows", "/queues"] {
        b.goto(&format!("{base}{page}"));
        b.only_from(&base);
    }
    let errors = b.console_errors();
    assert!(errors.is_empty(), "console errors: {errors:?}");
    // At 360 px wide, no page scrolls sideways (tables scroll in their box).
    b.resize(360, 740);
    for page in ["/", &format!("/instances/{done}"), "/workflows", "/queues"] {
        b.goto(&format!("{base}{page}"));
        assert!(
            !b.overflows(),
            "{page} is wider than 360 px: {}",
            b.js("return [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).slice(0, 8).map(e => e.tagName + '.' + e.className.baseVal ?? e.className).join(' ');")
        );
    }
    // Reading needs no JavaScript: the pages are whole as served.
    let html = s
        .raw("GET", "/", &[("cookie", s.sign_in(TOKEN))], None)
        .text();
    assert!(
        html.contains(&done[..12]) && html.contains("<table"),
        "{html}"
    );
    let _ = t;
}

#[test]
fn the_actions_change_the_history() {
    let Scene {
        t, s, b, waiting, ..
    } = scene();
    let base = s.base.clone();
    // Signal, with a payload, confirmed in a form.
    b.goto(&format!("{base}/instances/{waiting}"));
    b.click("a[href$='/act/signal']");
    b.fill("input[name=event]", "go");
    b.fill("textarea[name=data]", r#"{"approved": true}"#);
    b.click("button[type=submit]");
    b.wait_text("Event delivered.");
    assert_eq!(t.inspect(&waiting)["events"][0]["name"], "go");
    // Resume runs it here.
    b.click("a[href$='/act/resume']");
    b.click("button[type=submit]");
    until("the resumed run", || {
        t.inspect(&waiting)["status"] == "completed"
    });
    // Restart from a step: the confirmation says what runs again.
    b.goto(&format!("{base}/instances/{waiting}"));
    b.js("document.querySelector('select[name=from]').value = 'after';");
    b.click("form[action$='/act/restart'] button");
    b.wait_text("from `after`: `after` run again");
    b.click("button[type=submit]");
    until("the restart", || {
        let i = t.inspect(&waiting);
        i["runs"].as_array().unwrap().len() == 3 && i["status"] == "completed"
    });
    // Cancel another waiting one.
    let (other, r) = t.run_yaml("gated.yaml", GATED, &[]);
    r.code(3);
    b.goto(&format!("{base}/instances/{other}/act/cancel"));
    b.click("button[type=submit]");
    until("the cancel", || t.inspect(&other)["status"] == "canceled");
    // Terminate a third (no compensation runs).
    let (third, r) = t.run_yaml("gated.yaml", GATED, &[]);
    r.code(3);
    b.goto(&format!("{base}/instances/{third}"));
    b.click("a[href$='/act/terminate']");
    b.click("button[type=submit]");
    until("the terminate", || {
        t.inspect(&third)["status"] == "canceled"
    });
    // Retry a failed one once what failed it is fixed.
    let (failed, flag) = t.failed_until_fixed();
    std::fs::write(&flag, "").unwrap();
    b.goto(&format!("{base}/instances/{failed}"));
    b.click("a[href$='/act/retry']");
    b.click("button[type=submit]");
    until("the retry", || t.inspect(&failed)["status"] == "completed");
    // Start a registered workflow from its form.
    b.goto(&format!("{base}/workflows/fanout/start"));
    b.fill("input[name='input.who']", "bo");
    b.fill("textarea[name=labels]", "via=browser");
    b.click("button[type=submit]");
    b.wait_text("Started");
    let list: Value =
        serde_json::from_str(&t.wf(&["list", "--label", "via=browser", "--json"]).stdout).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(
        t.inspect(list[0]["id"].as_str().unwrap())["inputs"]["who"],
        "bo"
    );
    // A form posted from another site is refused.
    let r = s.raw(
        "POST",
        &format!("/instances/{other}/act/cancel"),
        &[
            ("cookie", s.sign_in(TOKEN)),
            ("origin", "https://evil.example".into()),
        ],
        Some(Vec::new()),
    );
    assert_eq!(r.status, 403);
    let errors = b.console_errors();
    assert!(errors.is_empty(), "console errors: {errors:?}");
}

#[test]
fn a_running_steps_output_arrives_live() {
    let Scene { t, s, b, .. } = scene();
    let gate = t.path().join("gate");
    let yaml = format!(
        "name: talk\nsteps:\n  - id: talk\n    run: |\n      echo first line\n      while [ ! -e {} ]; do sleep 0.02; done\n      echo second line\n",
        gate.display()
    );
    let path = t.write("talk.yaml", &yaml);
    let _run = crate::durable::spawn(&t, &["run", path.to_str().unwrap(), "--id", "talk1"]);
    until("the step to run", || {
        t.wf(&["inspect", "talk1", "--json"]).code == 0
            && t.inspect("talk1")["steps"][0]["status"] == "running"
    });
    b.goto(&format!("{}/instances/talk1/logs/talk?attempt=1", s.base));
    b.wait_text("first line");
    assert!(!b.text("pre.out").contains("second line"));
    std::fs::write(&gate, "").unwrap();
    b.wait_text("second line");
    b.wait_text("attempt 1: ok");
    // The instance page follows it to its end by itself.
    b.goto(&format!("{}/instances/talk1", s.base));
    b.wait_text("completed");
    let errors = b.console_errors();
    assert!(errors.is_empty(), "console errors: {errors:?}");
}

#[test]
fn a_browser_without_the_session_gets_the_sign_in_page() {
    let t = Test::new();
    let s = Server::start(&t, &[], &[]);
    let b = Browser::start();
    b.goto(&format!("{}/workflows", s.base));
    b.wait_text("Sign in");
    b.fill("input[name=token]", "not the token");
    b.click("button[type=submit]");
    b.wait_text("not this server's token");
    b.fill("input[name=token]", TOKEN);
    b.click("button[type=submit]");
    // Signed in, the browser is sent on to the page it asked for.
    let want = format!("{}/workflows", s.base);
    until("the page asked for", || b.url() == want);
    b.wait_text("No workflow is registered");
}

#[test]
#[ignore = "writes the docs' screenshots: scripts/screenshots"]
fn screenshots_of_the_main_pages() {
    let dir = std::env::var("WF_SCREENSHOTS").expect("WF_SCREENSHOTS=DIR");
    // `t` kept: its directory holds the server's database.
    let Scene {
        t: _t,
        s,
        b,
        done,
        failed,
        waiting,
    } = scene();
    for (w, h) in [(1280, 900), (360, 740)] {
        b.resize(w, h);
        for (name, page) in [
            ("list", "/".to_string()),
            ("instance", format!("/instances/{done}")),
            ("workflows", "/workflows".to_string()),
            (
                "bulk",
                format!("/bulk?action=cancel&pick={waiting}&pick={failed}&pick={done}"),
            ),
        ] {
            b.goto(&format!("{}{page}", s.base));
            std::thread::sleep(Duration::from_millis(200));
            std::fs::write(format!("{dir}/{name}-{w}.png"), b.screenshot()).unwrap();
        }
    }
}

#[test]
fn groups_children_and_secrets_show_as_they_should() {
    let t = Test::new().env("PAGE_SECRET", "s3cr3t-page-value");
    t.write(
        "child.yaml",
        "name: child\ninputs:\n  region: { required: true }\nsteps:\n  - id: deploy\n    run: echo deploying ${{ inputs.region }}\n",
    );
    let parent = "name: parent
secrets: [PAGE_SECRET]
steps:
  - id: fan
    for_each: [1, 2, 3]
    run: echo item ${{ item }} $TOKEN
    env: { TOKEN: \"${{ secrets.PAGE_SECRET }}\" }
  - id: regions
    needs: [fan]
    for_each: [eu, us]
    workflow: ./child.yaml
    with: { region: \"${{ item }}\" }
";
    let (id, r) = t.run_yaml("parent.yaml", parent, &[]);
    r.code(0);
    let s = Server::start(&t, &[], &[("PAGE_SECRET", "s3cr3t-page-value")]);
    let b = Browser::start();
    b.goto(&format!("{}/?token={TOKEN}", s.base));
    b.goto(&format!("{}/instances/{id}", s.base));
    // Both fan-outs are groups, a chip per item or child.
    assert_eq!(b.count(".across svg.graph g.node.group"), 2);
    assert_eq!(b.count(".across svg.graph rect.chip"), 5);
    // The children's spans are nested under the step that made them.
    assert!(
        b.count(".waterfall .name.child") >= 4,
        "{}",
        b.text(".waterfall")
    );
    assert!(b.text("main").contains("Children"));
    // The header names each child's step and attempt.
    let kids = b.text("ul.children");
    for step in ["regions[0] #1 →", "regions[1] #1 →"] {
        assert!(kids.contains(step), "{kids}");
    }
    // The secret is masked on every page that shows the step.
    b.goto(&format!(
        "{}/instances/{id}/logs/fan%5B0%5D?attempt=1",
        s.base
    ));
    b.wait_text("item 1 ***");
    for page in [
        format!("/instances/{id}"),
        format!("/instances/{id}/logs/fan%5B1%5D"),
    ] {
        b.goto(&format!("{}{page}", s.base));
        assert!(!b.page().contains("s3cr3t"), "{page} shows the secret");
    }
    let errors = b.console_errors();
    assert!(errors.is_empty(), "console errors: {errors:?}");
}

#[test]
fn the_keyboard_reaches_the_navigation_filters_and_rows() {
    // `t` kept: its directory holds the server's database.
    let Scene {
        t: _t, s, b, done, ..
    } = scene();
    b.goto(&format!("{}/", s.base));
    // Tab from the top: the brand, the three pages, then the filters, and
    // on to the first instance's link.
    let mut reached = Vec::new();
    for _ in 0..30 {
        b.rt.block_on(async {
            let body = b.c().find(Locator::Css("body")).await?;
            let active = b.c().active_element().await.unwrap_or(body);
            active.send_keys("\u{e004}").await
        })
        .unwrap();
        let what = b.js("const e = document.activeElement; return e.tagName + ' ' + (e.getAttribute('href') || e.getAttribute('name') || '');");
        reached.push(what.as_str().unwrap_or_default().to_string());
    }
    for want in [
        "A /workflows",
        "A /queues",
        "SELECT status",
        "INPUT workflow",
    ] {
        assert!(
            reached.iter().any(|r| r == want),
            "{want} not reached: {reached:?}"
        );
    }
    assert!(
        reached.iter().any(|r| r.starts_with("A /instances/")),
        "no instance reached: {reached:?}"
    );
    // Enter on a focused link opens it.
    b.rt.block_on(async {
        let link = b
            .c()
            .find(Locator::Css(&format!("a[href='/instances/{done}']")))
            .await?;
        link.send_keys("\u{e007}").await
    })
    .unwrap();
    until("the instance page", || {
        b.url().ends_with(&format!("/instances/{done}"))
    });

    // The list's keys (issue 59, item 6): `/` to the search box, `j`/`k`
    // through the rows, `Enter` opens the one chosen.
    b.goto(&format!("{}/", s.base));
    let press = |key: &str| {
        b.rt.block_on(async {
            let body = b.c().find(Locator::Css("body")).await?;
            body.send_keys(key).await
        })
        .unwrap();
    };
    press("/");
    assert_eq!(
        b.js("return document.activeElement.getAttribute('name');"),
        json!("q")
    );
    b.js("document.activeElement.blur();");
    press("j");
    press("j");
    press("j");
    press("k");
    let chosen = b.js("const r = document.querySelector('table.instances tr.chosen a'); return r && r.getAttribute('href');");
    let second = b.js(
        "return document.querySelectorAll('table.instances tbody tr a')[1].getAttribute('href');",
    );
    assert_eq!(chosen, second, "j j j k chooses the second row");
    press("\u{e007}");
    let want = second.as_str().unwrap().to_string();
    until("the chosen instance's page", || b.url().ends_with(&want));
}
