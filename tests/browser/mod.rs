//! A headless Chromium driven over WebDriver (the W3C protocol: JSON over
//! HTTP to `chromedriver`), for the inspector's end-to-end tests. The
//! protocol is a handful of requests, so this speaks it with the reqwest
//! client mnemo already depends on instead of adding a WebDriver crate.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

/// The W3C key of an element reference in WebDriver responses.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Finds `chromedriver` and Chromium, or says why not.
pub fn find() -> Result<(PathBuf, PathBuf), String> {
    let which = |names: &[&str]| {
        names.iter().find_map(|n| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|p| p.join(n))
                    .find(|p| p.is_file())
            })
        })
    };
    let driver = which(&["chromedriver"]).ok_or("chromedriver is not installed")?;
    let browser = which(&["chromium", "chromium-browser", "google-chrome"])
        .ok_or("chromium is not installed")?;
    Ok((driver, browser))
}

/// A running chromedriver and one browser session; both end on drop.
pub struct Browser {
    driver: Child,
    http: reqwest::Client,
    session: String,
    base: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver on a free port and a headless Chromium with a
    /// fresh profile and everything that would reach out to the network
    /// turned off.
    pub async fn start(driver: &PathBuf, browser: &PathBuf) -> Browser {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").expect("free port");
            l.local_addr().expect("addr").port()
        };
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(r) = http.get(format!("{base}/status")).send().await {
                if r.status().is_success() {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let profile = tempfile::tempdir().expect("profile dir");
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": browser,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1200,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ]
            }
        }}});
        let mut b = Browser {
            driver: child,
            http,
            session: String::new(),
            base,
            _profile: profile,
        };
        let v = b.call("POST", "/session", caps).await;
        b.session = v["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session id in {v}"))
            .to_owned();
        b
    }

    async fn call(&self, method: &str, path: &str, body: Value) -> Value {
        let url = if path == "/session" {
            format!("{}{path}", self.base)
        } else {
            format!("{}/session/{}{path}", self.base, self.session)
        };
        let req = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body),
        };
        let r = req.send().await.expect("chromedriver answers");
        let v: Value = r.json().await.expect("chromedriver answers JSON");
        if let Some(err) = v["value"]["error"].as_str() {
            panic!(
                "WebDriver {method} {path}: {err}: {}",
                v["value"]["message"]
            );
        }
        v["value"].clone()
    }

    /// Ends the browser session (Chromium exits), then chromedriver.
    pub async fn quit(mut self) {
        let url = format!("{}/session/{}", self.base, self.session);
        let _ = self.http.delete(url).send().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }

    /// Loads `url` and waits for the page to load.
    pub async fn goto(&self, url: &str) {
        self.call("POST", "/url", json!({ "url": url })).await;
    }

    /// The current URL.
    pub async fn url(&self) -> String {
        self.call("GET", "/url", Value::Null)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The element `css` selects, or panics.
    pub async fn find(&self, css: &str) -> Element<'_> {
        let v = self
            .call(
                "POST",
                "/element",
                json!({"using": "css selector", "value": css}),
            )
            .await;
        let Some(id) = v[ELEMENT].as_str() else {
            let page = self
                .run("return document.documentElement.outerHTML;", json!([]))
                .await;
            panic!("no element {css}: {v}\npage: {page}");
        };
        Element {
            browser: self,
            id: id.to_owned(),
        }
    }

    /// How many elements `css` selects.
    pub async fn count(&self, css: &str) -> usize {
        self.call(
            "POST",
            "/elements",
            json!({"using": "css selector", "value": css}),
        )
        .await
        .as_array()
        .map_or(0, Vec::len)
    }

    /// Runs `script` (a function body; `arguments` holds `args`) and
    /// returns what it returns.
    pub async fn run(&self, script: &str, args: Value) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            json!({"script": script, "args": args}),
        )
        .await
    }

    /// Waits until `script` returns true (up to `secs`), else panics with
    /// `what`.
    pub async fn wait_for(&self, what: &str, secs: u64, script: &str) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if self.run(script, json!([])).await == Value::Bool(true) {
                return;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Vec<u8> {
        let v = self.call("GET", "/screenshot", Value::Null).await;
        base64::engine::general_purpose::STANDARD
            .decode(v.as_str().expect("base64 PNG"))
            .expect("valid base64")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // After `quit` this finds chromedriver gone already; after a
        // failed test it at least ends chromedriver.
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// An element of the current page.
pub struct Element<'a> {
    browser: &'a Browser,
    id: String,
}

impl Element<'_> {
    /// Clicks it.
    pub async fn click(&self) {
        self.browser
            .call("POST", &format!("/element/{}/click", self.id), json!({}))
            .await;
    }

    /// Its rendered text.
    pub async fn text(&self) -> String {
        self.browser
            .call("GET", &format!("/element/{}/text", self.id), Value::Null)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Clears it (an input) and types `text`.
    pub async fn type_text(&self, text: &str) {
        self.browser
            .call("POST", &format!("/element/{}/clear", self.id), json!({}))
            .await;
        self.browser
            .call(
                "POST",
                &format!("/element/{}/value", self.id),
                json!({ "text": text }),
            )
            .await;
    }
}
