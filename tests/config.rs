//! Configuration: the defaults, and precedence defaults < file < env < flags
//! (one test function, because it sets process environment variables);
//! a daemon with the smallest page cache serving more data than fits in it.

mod common;

use clap::Parser;
use common::{all_turns, append_req, create_session, user_turn, Binary};
use mnemo::config::{Config, LogFormat, Overrides, StoreKind, CACHE_MB_RANGE, DEFAULT_CACHE_MB};
use mnemo::pb::memory_service_client::MemoryServiceClient;

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    o: Overrides,
}

#[test]
fn defaults_and_precedence() {
    for v in [
        "MNEMO_CONFIG",
        "MNEMO_LISTEN",
        "MNEMO_DATA_DIR",
        "MNEMO_STORE",
        "MNEMO_LOG_FORMAT",
        "MNEMO_CACHE_MB",
    ] {
        std::env::remove_var(v);
    }
    // Defaults.
    let c = Config::resolve(&Args::parse_from(["t"]).o).unwrap();
    assert_eq!(c, Config::default());
    assert_eq!(c.listen.to_string(), "127.0.0.1:50051");
    assert_eq!(c.data_dir.to_str(), Some("./mnemo-data"));
    assert_eq!(c.store, StoreKind::Sled);
    assert_eq!(c.limits.max_message_bytes, 4 * 1024 * 1024);
    assert_eq!(c.limits.max_turns_per_append, 256);
    assert_eq!(c.limits.max_turn_bytes, 1024 * 1024);
    assert_eq!(c.limits.max_page_size, 1000);
    assert_eq!(c.cache_mb, DEFAULT_CACHE_MB);

    // File over defaults.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mnemo.toml");
    std::fs::write(
        &file,
        "listen = \"127.0.0.1:7000\"\ndata_dir = \"/from/file\"\nlog_format = \"json\"\ncache_mb = 64\n[limits]\nmax_turns_per_append = 10\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let c = Config::resolve(&Args::parse_from(["t", "--config", f]).o).unwrap();
    assert_eq!(c.listen.to_string(), "127.0.0.1:7000");
    assert_eq!(c.data_dir.to_str(), Some("/from/file"));
    assert_eq!(c.log_format, LogFormat::Json);
    assert_eq!(c.limits.max_turns_per_append, 10);
    assert_eq!(c.cache_mb, 64);
    assert_eq!(
        c.limits.max_turn_bytes,
        1024 * 1024,
        "unset keys keep defaults"
    );

    // Env over file.
    std::env::set_var("MNEMO_CONFIG", f);
    std::env::set_var("MNEMO_LISTEN", "127.0.0.1:7001");
    std::env::set_var("MNEMO_CACHE_MB", "32");
    let c = Config::resolve(&Args::parse_from(["t"]).o).unwrap();
    assert_eq!(c.listen.to_string(), "127.0.0.1:7001");
    assert_eq!(c.cache_mb, 32);
    assert_eq!(c.data_dir.to_str(), Some("/from/file"));

    // Flags over env.
    let c = Config::resolve(
        &Args::parse_from(["t", "--listen", "127.0.0.1:7002", "--data-dir", "/flag"]).o,
    )
    .unwrap();
    assert_eq!(c.listen.to_string(), "127.0.0.1:7002");
    assert_eq!(c.data_dir.to_str(), Some("/flag"));
    std::env::remove_var("MNEMO_CONFIG");
    std::env::remove_var("MNEMO_LISTEN");
    std::env::remove_var("MNEMO_CACHE_MB");

    // The page cache: at its bounds and one past them.
    let cache =
        |mb: u64| Config::resolve(&Args::parse_from(["t", "--cache-mb", &mb.to_string()]).o);
    for ok in [*CACHE_MB_RANGE.start(), *CACHE_MB_RANGE.end()] {
        assert_eq!(cache(ok).unwrap().cache_mb, ok);
    }
    for bad in [0, CACHE_MB_RANGE.start() - 1, CACHE_MB_RANGE.end() + 1] {
        let e = cache(bad).unwrap_err();
        assert!(e.to_string().contains("cache_mb must be from 8"), "{e}");
    }

    // A bad file is a clear error.
    std::fs::write(&file, "listen = 5\n").unwrap();
    let e = Config::resolve(&Args::parse_from(["t", "--config", f]).o).unwrap_err();
    assert!(e.to_string().contains("invalid config file"), "{e}");
    std::fs::write(&file, "nonsense_key = 1\n").unwrap();
    assert!(Config::resolve(&Args::parse_from(["t", "--config", f]).o).is_err());
}

/// With the smallest page cache the daemon still stores and serves more
/// data than the cache holds, across a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_smallest_page_cache_serves_more_than_it_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let min = CACHE_MB_RANGE.start().to_string();
    let args = ["--cache-mb", min.as_str()];
    let daemon = Binary::start_with(&dir, &[], &args);
    let mut c = MemoryServiceClient::connect(daemon.url()).await.unwrap();
    create_session(&mut c, "ns", "big").await;
    // 12 MiB of turns, 1.5 times the cache.
    let line = "x".repeat(32 * 1024);
    for batch in 0..48 {
        let turns = (0..8)
            .map(|i| user_turn(&format!("{batch}-{i} {line}")))
            .collect();
        c.append_turns(append_req("ns", "big", turns))
            .await
            .unwrap();
    }
    drop(c);
    assert!(daemon.terminate().success());
    let daemon = Binary::start_with(&dir, &[], &args);
    let mut c = MemoryServiceClient::connect(daemon.url()).await.unwrap();
    let turns = all_turns(&mut c, "ns", "big").await;
    assert_eq!(turns.len(), 48 * 8);
    for (n, t) in turns.iter().enumerate() {
        let want = format!("{}-{} ", n / 8, n % 8);
        assert!(
            t.content.starts_with(&want) && t.content.ends_with(&line),
            "turn {n}"
        );
    }
    drop(c);
    assert!(daemon.terminate().success());
}
