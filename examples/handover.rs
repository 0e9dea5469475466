//! What several writers would cost on SlateDB 0.18, for RFC 0004 (v3), measured on a real
//! store: a local directory, or an S3 bucket (the test server in `cargo xtask bench`'s runs).
//!
//! - **Hand-over** (design a): two writer handles of one database take turns; each turn opens
//!   SlateDB's `Db` (which bumps the writer epoch and fences the other handle), writes one batch
//!   and waits until it is durable. A fenced handle's next write fails.
//! - **Kept role**: one handle writes one batch after another (today's single writer).
//! - **Conditional create** (design b): a commit as an object created only if absent
//!   (`PutMode::Create`, S3's `If-None-Match: *`); two racers for one name, one wins.
//!
//! Prints the median time and the object-store requests of each step: SlateDB's own request
//! counters for the `Db` steps, one request per conditional create. Asserts nothing about time.
//!
//! ```text
//! cargo run --release -p moraine-core --example handover -- DIR [ROUNDS]
//! AWS_ACCESS_KEY_ID=.. AWS_SECRET_ACCESS_KEY=.. AWS_ENDPOINT=http://127.0.0.1:PORT \
//!   cargo run --release -p moraine-core --example handover -- s3://BUCKET/PREFIX [ROUNDS]
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload};
use slatedb::{Db, WriteBatch};
use slatedb_common::metrics::DefaultMetricsRecorder;

/// The store the first argument names (a directory, or `s3://bucket/prefix` on the endpoint in
/// AWS_ENDPOINT, with the credentials in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY).
fn store(arg: &str) -> Arc<dyn ObjectStore> {
    if let Some(rest) = arg.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let endpoint = std::env::var("AWS_ENDPOINT").expect("AWS_ENDPOINT (the test server)");
        assert!(
            endpoint.starts_with("http://127.0.0.1:") || endpoint.starts_with("http://localhost:"),
            "this measurement talks to a loopback test server only, not {endpoint}"
        );
        let s3 = object_store::aws::AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_endpoint(endpoint)
            .with_allow_http(true)
            .with_region("us-east-1")
            .with_access_key_id(std::env::var("AWS_ACCESS_KEY_ID").expect("AWS_ACCESS_KEY_ID"))
            .with_secret_access_key(
                std::env::var("AWS_SECRET_ACCESS_KEY").expect("AWS_SECRET_ACCESS_KEY"),
            )
            .with_virtual_hosted_style_request(false)
            .build()
            .expect("an S3 client");
        let prefix = Path::from(prefix);
        return Arc::new(object_store::prefix::PrefixStore::new(s3, prefix));
    }
    std::fs::create_dir_all(arg).expect("the directory");
    Arc::new(object_store::local::LocalFileSystem::new_with_prefix(arg).expect("a local store"))
}

/// The object-store requests SlateDB's handle made so far, by its own counters.
fn requests(metrics: &DefaultMetricsRecorder) -> i64 {
    moraine::status::metric_rows(metrics)
        .into_iter()
        .filter(|(name, _, _)| name == "slatedb.object_store.request_count")
        .map(|(_, _, n)| n)
        .sum()
}

/// A writer handle and its request counter.
struct Writer {
    db: Db,
    metrics: Arc<DefaultMetricsRecorder>,
}

async fn open(store: &Arc<dyn ObjectStore>) -> (Writer, Duration, i64) {
    let metrics = Arc::new(DefaultMetricsRecorder::new());
    let t = Instant::now();
    let db = Db::builder("db", store.clone())
        .with_metrics_recorder(metrics.clone())
        .build()
        .await
        .expect("open the writer");
    let took = t.elapsed();
    let n = requests(&metrics);
    if std::env::var_os("HANDOVER_DETAIL").is_some() {
        for (name, labels, v) in moraine::status::metric_rows(&metrics) {
            if name == "slatedb.object_store.request_count" && v > 0 {
                eprintln!("  open: {labels}: {v}");
            }
        }
    }
    (Writer { db, metrics }, took, n)
}

/// One batch, written and durable; its time and requests.
async fn commit(w: &Writer, k: u64) -> (Result<(), slatedb::Error>, Duration, i64) {
    let before = requests(&w.metrics);
    let t = Instant::now();
    let mut batch = WriteBatch::new();
    batch.put(format!("commit/{k:08}").as_bytes(), vec![7u8; 512]);
    // as moraine commits (src/store/commit.rs): write, flush the WAL, wait until durable
    let result = async {
        let handle = w.db.write(batch).await?;
        w.db.flush().await?;
        handle.await_durable().await
    }
    .await;
    (result, t.elapsed(), requests(&w.metrics) - before)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    xs.get(xs.len() / 2).copied().unwrap_or(f64::NAN)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(measure());
}

async fn measure() {
    let args: Vec<String> = std::env::args().collect();
    let arg = args.get(1).expect("a directory or s3://bucket/prefix");
    let rounds: usize = args
        .get(2)
        .map(|r| r.parse().expect("ROUNDS"))
        .unwrap_or(20);
    let store = store(arg);

    // a database with some history, as a lake has
    let (first, _, _) = open(&store).await;
    for k in 0..50 {
        commit(&first, k).await.0.expect("seed");
    }
    first.db.flush().await.expect("flush");
    first.db.close().await.expect("close");

    // hand-over: two handles alternate, each open fencing the other
    let (mut open_ms, mut open_req, mut turn_ms, mut turn_req) = (vec![], vec![], vec![], vec![]);
    let mut holders: Vec<Option<Writer>> = vec![None, None];
    let mut fenced_refused = 0;
    for r in 0..rounds {
        let me = r % 2;
        // the other handle, fenced by the open below, must refuse its next write
        let (w, took, n) = open(&store).await;
        open_ms.push(ms(took));
        open_req.push(n as f64);
        let (result, took, n) = commit(&w, 1000 + r as u64).await;
        result.expect("a commit after taking the role");
        turn_ms.push(ms(took));
        turn_req.push(n as f64);
        if let Some(other) = holders[1 - me].take() {
            if commit(&other, 5000 + r as u64).await.0.is_err() {
                fenced_refused += 1;
            }
            let _ = other.db.close().await;
        }
        if let Some(old) = holders[me].replace(w) {
            let _ = old.db.close().await;
        }
    }
    for h in holders.into_iter().flatten() {
        let _ = h.db.close().await;
    }
    println!(
        "hand-over ({rounds} turns): open taking the role {:.1} ms, {:.0} requests; \
         the commit after it {:.1} ms, {:.0} requests; fenced handles refused {fenced_refused} of {}",
        median(open_ms),
        median(open_req),
        median(turn_ms),
        median(turn_req),
        rounds - 1
    );

    // kept role: one handle commits one batch after another
    let (w, _, _) = open(&store).await;
    let (mut kept_ms, mut kept_req) = (vec![], vec![]);
    for k in 0..rounds as u64 {
        let (result, took, n) = commit(&w, 9000 + k).await;
        result.expect("a commit");
        kept_ms.push(ms(took));
        kept_req.push(n as f64);
    }
    let _ = w.db.close().await;
    println!(
        "kept role ({rounds} commits): commit {:.1} ms, {:.0} requests",
        median(kept_ms),
        median(kept_req)
    );

    // conditional create: a commit record put only if absent; two racers for each name
    let (mut create_ms, mut losers) = (vec![], 0);
    for k in 0..rounds {
        let name = Path::from(format!("commits/{k:020}.json"));
        let put = |body: &'static [u8]| {
            let (store, name) = (store.clone(), name.clone());
            async move {
                let t = Instant::now();
                let r = store
                    .put_opts(
                        &name,
                        PutPayload::from_static(body),
                        PutOptions::from(PutMode::Create),
                    )
                    .await;
                (r, t.elapsed())
            }
        };
        let ((a, ta), (b, tb)) = futures::join!(put(b"writer a"), put(b"writer b"));
        for (r, t) in [(a, ta), (b, tb)] {
            match r {
                Ok(_) => create_ms.push(ms(t)),
                Err(object_store::Error::AlreadyExists { .. }) => losers += 1,
                Err(e) => panic!("conditional create: {e}"),
            }
        }
    }
    println!(
        "conditional create ({rounds} names, two racers each): winner {:.1} ms, 1 request; \
         racers refused {losers} of {rounds}",
        median(create_ms)
    );
}
