//! A real Prometheus server (Debian's `prometheus`, which `.ci/run`
//! installs) on loopback scrapes `wf serve` every 100 ms while instances
//! run and a prune deletes them; its own query engine then finds no reset
//! and no negative `increase()` in any counter (SPEC §8: counters never go
//! down), and the increase it computes is the work that was done.

use crate::Test;
use crate::serve::{Server, TOKEN, until};
use serde_json::Value;
use std::process::{Child, Command, Stdio};

/// A Prometheus server scraping one target, killed when dropped.
struct Prometheus {
    child: Child,
    base: String,
    client: reqwest::Client,
    rt: tokio::runtime::Runtime,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port free on loopback now (Prometheus takes no port 0 it would tell).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Prometheus {
    fn start(t: &Test, target: &str) -> Prometheus {
        let port = free_port();
        let config = t.write(
            "prometheus.yml",
            &format!(
                "global:\n  scrape_interval: 100ms\n  scrape_timeout: 100ms\n\
                 scrape_configs:\n  - job_name: wf\n    authorization:\n      credentials: {TOKEN}\n\
                 \x20   static_configs:\n      - targets: ['{target}']\n"
            ),
        );
        let log = std::fs::File::create(t.tmp_path().join("prometheus.log")).expect("log");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                t.tmp_path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect(
                "prometheus (Debian's prometheus package) is needed: apt-get install prometheus",
            );
        let p = Prometheus {
            child,
            base: format!("http://127.0.0.1:{port}"),
            client: reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("client"),
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime"),
        };
        until("Prometheus to be ready", || p.get("/-/ready").is_some());
        p
    }

    fn get(&self, path: &str) -> Option<String> {
        let url = format!("{}{path}", self.base);
        self.rt.block_on(async {
            let r = self.client.get(url).send().await.ok()?;
            r.status().is_success().then_some(())?;
            r.text().await.ok()
        })
    }

    /// The instant vector of PromQL `q`: each series' labels and value.
    fn query(&self, q: &str) -> Vec<(Value, f64)> {
        let url = format!("{}/api/v1/query", self.base);
        let body: Value = self.rt.block_on(async {
            self.client
                .get(url)
                .query(&[("query", q)])
                .send()
                .await
                .expect("query")
                .json()
                .await
                .expect("json")
        });
        assert_eq!(body["status"], "success", "{q}: {body}");
        body["data"]["result"]
            .as_array()
            .expect("a vector")
            .iter()
            .map(|s| {
                let v = s["value"][1]
                    .as_str()
                    .expect("a value")
                    .parse()
                    .expect("a number");
                (s["metric"].clone(), v)
            })
            .collect()
    }

    /// The value of the one series `q` answers, if it answers one.
    fn one(&self, q: &str) -> Option<f64> {
        match &self.query(q)[..] {
            [(_, v)] => Some(*v),
            _ => None,
        }
    }

    /// Waits until Prometheus has scraped `q` at `value`.
    #[track_caller]
    fn until_scraped(&self, q: &str, value: f64) {
        until(&format!("Prometheus to scrape {q} == {value}"), || {
            self.one(q) == Some(value)
        });
    }
}

#[test]
fn a_real_prometheus_sees_no_counter_reset_across_a_prune() {
    let t = Test::new();
    let ok = "name: ok\nsteps:\n  - id: a\n    run: 'true'\n  - id: b\n    needs: [a]\n    run: 'true'\n";
    for _ in 0..3 {
        t.run_yaml("ok.yaml", ok, &[]).1.code(0);
    }
    let s = Server::start(&t, &[], &[]);
    let target = s.base.trim_start_matches("http://").trim_end_matches('/');
    let p = Prometheus::start(&t, target);
    let attempts = "wf_attempts_total{workflow=\"ok\",outcome=\"ok\"}";
    p.until_scraped("up{job=\"wf\"}", 1.0);
    p.until_scraped(attempts, 6.0);
    // Pruned: the instances go, the counters stay.
    t.wf(&["prune", "--older-than", "0s"]).code(0);
    p.until_scraped("wf_instances{workflow=\"ok\",status=\"completed\"}", 0.0);
    for _ in 0..2 {
        t.run_yaml("ok.yaml", ok, &[]).1.code(0);
    }
    p.until_scraped(attempts, 10.0);
    p.until_scraped("wf_instances{workflow=\"ok\",status=\"completed\"}", 2.0);
    // Over everything it scraped: no reset of any counter, no negative
    // increase, and the increase of the attempts is the 4 made since the
    // first scrape (extrapolated by at most a scrape interval or so at
    // each end of a window some seconds long, where a reset at the prune
    // would have added the 6 again).
    let window = "[1m]";
    for counter in ["wf_attempts_total", "wf_runs_total"] {
        let resets = p.query(&format!("resets({counter}{window})"));
        assert!(!resets.is_empty(), "{counter}: no series");
        assert!(
            resets.iter().all(|(_, v)| *v == 0.0),
            "{counter} was reset: {resets:?}"
        );
        let increases = p.query(&format!("increase({counter}{window})"));
        assert!(
            increases.iter().all(|(_, v)| *v >= 0.0),
            "{counter}: {increases:?}"
        );
    }
    let increase = p
        .one(&format!("increase({attempts}{window})"))
        .expect("the attempts' increase");
    assert!((4.0..6.0).contains(&increase), "increase {increase}");
}
