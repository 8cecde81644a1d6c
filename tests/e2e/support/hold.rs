//! A local upstream that holds every request until the test releases it.
//! A turn of the `fetch` fixture that GETs it stays in flight until then:
//! a test that needs a running turn waits for the request to arrive and
//! releases it when it is done, instead of betting on a sleep's length.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::watch;

use super::Server;

pub struct Hold {
    /// `http://127.0.0.1:<port>`: allow it in the app's manifest (and start
    /// the server with `--outbound-allow-private`).
    pub origin: String,
    arrived: Arc<AtomicUsize>,
    /// The path and query of every request, in arrival order.
    paths: Arc<Mutex<Vec<String>>>,
    release: watch::Sender<bool>,
}

impl Hold {
    pub async fn start() -> Hold {
        let arrived = Arc::new(AtomicUsize::new(0));
        let (release, released) = watch::channel(false);
        let counter = arrived.clone();
        let paths: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen = paths.clone();
        let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
            let (counter, mut released) = (counter.clone(), released.clone());
            let path = uri
                .path_and_query()
                .map_or_else(String::new, |p| p.to_string());
            seen.lock().unwrap_or_else(|e| e.into_inner()).push(path);
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                let _ = released.wait_for(|r| *r).await;
                "released"
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the held upstream");
        let origin = format!("http://{}", listener.local_addr().expect("its address"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Hold {
            origin,
            arrived,
            paths,
            release,
        }
    }

    /// The `fetch` fixture's input that GETs this upstream.
    pub fn input(&self) -> Value {
        json!({"url": format!("{}/held", self.origin)})
    }

    /// Deploys the `fetch` fixture as app `fetch`, allowed to reach this upstream.
    pub async fn deploy_fetch(&self, server: &Server) {
        deploy_fetch(server, &[self]).await;
    }

    /// Waits until `n` requests have arrived (and are held): the turns that
    /// sent them are in flight. Panics after 60 s.
    pub async fn wait_arrived(&self, n: usize) {
        let started = Instant::now();
        while self.arrived.load(Ordering::SeqCst) < n {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{n} requests never reached the held upstream"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// How many requests have arrived so far.
    pub fn arrived(&self) -> usize {
        self.arrived.load(Ordering::SeqCst)
    }

    /// The path and query of every request so far, in arrival order.
    pub fn paths(&self) -> Vec<String> {
        self.paths.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Answers every held request, and every later one at once.
    pub fn release(&self) {
        self.release.send_replace(true);
    }
}

/// Deploys the `fetch` fixture as app `fetch`, allowed to reach every
/// upstream of `holds`.
pub async fn deploy_fetch(server: &Server, holds: &[&Hold]) {
    let allow: Vec<&str> = holds.iter().map(|h| h.origin.as_str()).collect();
    let manifest = format!(
        "[app]\nslug = \"fetch\"\n[agent]\nentry = \"agent.wasm\"\n[outbound]\nallow = {}\n",
        json!(allow)
    );
    let component = super::guest("fetch");
    server
        .deploy_files(&[("agent.wasm", &component)], &manifest)
        .await;
}
