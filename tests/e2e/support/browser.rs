//! A real headless Chromium for the console's tests: Debian's `chromium`
//! driven by its `chromedriver` over WebDriver (fantoccini), both started
//! here on a free port with a fresh profile, and found through the variables
//! `scripts/prereqs/30-chromium.sh` exports.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

static TAGS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How long any one wait for the page lasts before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);
/// The window sizes of the screenshots.
pub const LAPTOP: (u32, u32) = (1280, 900);
pub const PHONE: (u32, u32) = (390, 844);

fn tool(variable: &str) -> String {
    std::env::var(variable).unwrap_or_else(|_| {
        panic!(
            "{variable} is not set: the console test needs Debian's chromium and chromium-driver. \
             Run the tests with scripts/test, or `source scripts/prereqs/30-chromium.sh` first."
        )
    })
}

/// Chromium under chromedriver; both end when this is dropped.
pub struct Browser {
    pub client: Client,
    driver: Child,
    driver_port: u16,
    session: String,
    _profile: tempfile::TempDir,
    shots: Option<PathBuf>,
}

impl Browser {
    pub async fn start() -> Browser {
        let chromium = tool("AGENTHOST_TEST_CHROMIUM");
        let chromedriver = tool("AGENTHOST_TEST_CHROMEDRIVER");
        let driver_port = free_port();
        let driver = Command::new(&chromedriver)
            .arg(format!("--port={driver_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {chromedriver}: {e}"));
        let driver_url = format!("http://127.0.0.1:{driver_port}");
        wait_ready(&driver_url).await;
        let profile = tempfile::tempdir().expect("profile dir");
        let capabilities = json!({
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    format!("--user-data-dir={}", profile.path().display()),
                    format!("--window-size={},{}", LAPTOP.0, LAPTOP.1),
                ],
            },
            // Every console message, uncaught error, CSP violation and failed load.
            "goog:loggingPrefs": {"browser": "ALL"},
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!()
        };
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&driver_url)
            .await
            .expect("a WebDriver session with headless Chromium");
        let session = client
            .session_id()
            .await
            .expect("session id")
            .expect("a session");
        // A relative directory is taken from the workspace root (tests run in host/).
        let shots = std::env::var_os("AGENTHOST_CONSOLE_SCREENSHOTS")
            .map(|dir| super::workspace().join(PathBuf::from(dir)));
        let browser = Browser {
            client,
            driver,
            driver_port,
            session,
            _profile: profile,
            shots,
        };
        browser.resize(LAPTOP).await;
        browser
    }

    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.expect("navigate");
    }

    /// Sets the location's hash, as following a link would.
    pub async fn go(&self, hash: &str) {
        self.js(&format!("location.hash = {}", json!(hash))).await;
    }

    /// Runs `expression` in the page and returns its value.
    pub async fn js(&self, expression: &str) -> Value {
        self.client
            .execute(&format!("return ({expression});"), vec![])
            .await
            .unwrap_or_else(|e| panic!("evaluate `{expression}`: {e}"))
    }

    /// Waits until `expression` is truthy in the page; returns its value.
    pub async fn until(&self, what: &str, expression: &str) -> Value {
        let started = Instant::now();
        loop {
            let value = self.js(expression).await;
            let truthy = match &value {
                Value::Null | Value::Bool(false) => false,
                Value::String(s) => !s.is_empty(),
                Value::Number(n) => n.as_f64() != Some(0.0),
                _ => true,
            };
            if truthy {
                return value;
            }
            if started.elapsed() > PATIENCE {
                let page = self.js("document.body.innerText").await;
                let errors = self.errors().await;
                panic!(
                    "waited {PATIENCE:?} for {what} (`{expression}`); the page reads:\n{page}\n\
                     the browser logged: {errors:#?}"
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The element matching `css`, once it exists.
    pub async fn find(&self, css: &str) -> Element {
        self.until(
            &format!("an element matching {css}"),
            &format!("document.querySelector({})", json!(css)),
        )
        .await;
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("find {css}: {e}"))
    }

    /// The visible text of the element matching `css`, once it exists.
    pub async fn text(&self, css: &str) -> String {
        self.find(css).await.text().await.expect("text")
    }

    /// The text of the element matching `css`, once it contains `needle`:
    /// read in the same evaluation that saw it, since a view that re-renders
    /// (a list following its stream) may replace the element just after.
    pub async fn text_with(&self, css: &str, needle: &str) -> String {
        let seen = self
            .until(
                &format!("{css} to say `{needle}`"),
                &format!(
                    "(t => t?.includes({}) ? t : null)(document.querySelector({})?.innerText)",
                    json!(needle),
                    json!(css)
                ),
            )
            .await;
        seen.as_str().unwrap_or_default().to_string()
    }

    /// Clicks the element matching `css` (a real click, through WebDriver),
    /// once it is shown: a view that is still being swapped in (the nav
    /// right after signing in) exists before it can be clicked.
    pub async fn click(&self, css: &str) {
        self.until(
            &format!("a visible element matching {css}"),
            &format!(
                "document.querySelector({})?.checkVisibility({{visibilityProperty: true}})",
                json!(css)
            ),
        )
        .await;
        self.find(css)
            .await
            .click()
            .await
            .unwrap_or_else(|e| panic!("click {css}: {e}"));
    }

    /// Clicks the button (or link) whose text is exactly `label`, inside the
    /// element matching `scope` (a real click, through WebDriver).
    pub async fn click_labelled(&self, scope: &str, label: &str) {
        // Tag the element so that WebDriver can find it by CSS.
        let tag = format!(
            "t{}",
            TAGS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        self.until(
            &format!("a button `{label}` in {scope}"),
            &format!(
                "(() => {{ const found = [...document.querySelectorAll({scope})]
                    .flatMap((s) => [...s.querySelectorAll('button, a')])
                    .find((b) => b.textContent.trim() === {label} && !b.disabled);
                  if (found) found.dataset.testTarget = {tag};
                  return !!found; }})()",
                scope = json!(scope),
                label = json!(label),
                tag = json!(tag),
            ),
        )
        .await;
        self.click(&format!("[data-test-target=\"{tag}\"]")).await;
    }

    /// Types `text` into the field matching `css`, replacing what it held.
    pub async fn fill(&self, css: &str, text: &str) {
        let field = self.find(css).await;
        field.clear().await.expect("clear");
        field
            .send_keys(text)
            .await
            .unwrap_or_else(|e| panic!("type into {css}: {e}"));
    }

    /// Chooses the option with `value` in the select matching `css`.
    pub async fn select(&self, css: &str, value: &str) {
        self.until(
            &format!("option {value} in {css}"),
            &format!(
                "document.querySelector({})?.querySelector('option[value=' + CSS.escape({}) + ']')",
                json!(css),
                json!(value)
            ),
        )
        .await;
        self.find(css)
            .await
            .select_by_value(value)
            .await
            .unwrap_or_else(|e| panic!("select {value} in {css}: {e}"));
    }

    /// The browser's log entries at level SEVERE since the last call: console
    /// errors, uncaught exceptions, CSP violations, failed loads.
    pub async fn errors(&self) -> Vec<Value> {
        let client = super::client();
        let response: Value = client
            .post(format!(
                "http://127.0.0.1:{}/session/{}/se/log",
                self.driver_port, self.session
            ))
            .json(&json!({"type": "browser"}))
            .send()
            .await
            .expect("read the browser log")
            .json()
            .await
            .expect("the browser log");
        let entries = response["value"].as_array().cloned().unwrap_or_default();
        entries
            .into_iter()
            .filter(|e| e["level"] == "SEVERE")
            .collect()
    }

    /// Fails if the browser logged any error since the last check.
    pub async fn assert_no_errors(&self, during: &str) {
        let errors = self.errors().await;
        assert!(
            errors.is_empty(),
            "the browser logged errors during {during}: {errors:#?}"
        );
    }

    pub async fn resize(&self, (width, height): (u32, u32)) {
        self.client
            .set_window_size(width, height)
            .await
            .expect("resize");
    }

    /// With `AGENTHOST_CONSOLE_SCREENSHOTS=<dir>`, saves `<dir>/<name>-laptop.png`
    /// and `<dir>/<name>-phone.png` of the current view, scrolled to show the
    /// element matching `show` if given; otherwise nothing.
    pub async fn screenshot(&self, name: &str, show: Option<&str>) {
        let Some(dir) = &self.shots else { return };
        std::fs::create_dir_all(dir).expect("screenshot dir");
        for (label, size) in [("laptop", LAPTOP), ("phone", PHONE)] {
            self.resize(size).await;
            if let Some(css) = show {
                self.js(&format!(
                    "document.querySelector({}).scrollIntoView({{block: 'center'}})",
                    json!(css)
                ))
                .await;
            }
            // Two frames: the layout for the new width is painted.
            self.client
                .execute_async(
                    "const done = arguments[0]; requestAnimationFrame(() => requestAnimationFrame(() => done(true)));",
                    vec![],
                )
                .await
                .expect("wait for a paint");
            let png = self.client.screenshot().await.expect("screenshot");
            std::fs::write(dir.join(format!("{name}-{label}.png")), png).expect("save screenshot");
        }
        self.resize(LAPTOP).await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ending the WebDriver session quits Chromium; then chromedriver goes.
        // Plain HTTP, since drop cannot await (and a panicking test drops too).
        let request = format!(
            "DELETE /session/{} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.session, self.driver_port
        );
        if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.driver_port)) {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            if stream.write_all(request.as_bytes()).is_ok() {
                // The answer's head comes once Chromium has quit.
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && matches!(stream.read(&mut byte), Ok(1)) {
                    head.push(byte[0]);
                }
            }
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

async fn wait_ready(driver_url: &str) {
    let client = super::client();
    let started = Instant::now();
    loop {
        let ready = client
            .get(format!("{driver_url}/status"))
            .send()
            .await
            .ok()
            .map(|r| r.status().is_success())
            .unwrap_or(false);
        if ready {
            return;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "chromedriver did not answer on {driver_url}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
