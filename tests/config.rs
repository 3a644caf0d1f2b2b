//! Configuration: the defaults, and precedence defaults < file < env < flags.
//! One test function, because it sets process environment variables.

use clap::Parser;
use mnemo::config::{Config, LogFormat, Overrides, StoreKind};

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

    // File over defaults.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mnemo.toml");
    std::fs::write(
        &file,
        "listen = \"127.0.0.1:7000\"\ndata_dir = \"/from/file\"\nlog_format = \"json\"\n[limits]\nmax_turns_per_append = 10\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let c = Config::resolve(&Args::parse_from(["t", "--config", f]).o).unwrap();
    assert_eq!(c.listen.to_string(), "127.0.0.1:7000");
    assert_eq!(c.data_dir.to_str(), Some("/from/file"));
    assert_eq!(c.log_format, LogFormat::Json);
    assert_eq!(c.limits.max_turns_per_append, 10);
    assert_eq!(
        c.limits.max_turn_bytes,
        1024 * 1024,
        "unset keys keep defaults"
    );

    // Env over file.
    std::env::set_var("MNEMO_CONFIG", f);
    std::env::set_var("MNEMO_LISTEN", "127.0.0.1:7001");
    let c = Config::resolve(&Args::parse_from(["t"]).o).unwrap();
    assert_eq!(c.listen.to_string(), "127.0.0.1:7001");
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

    // A bad file is a clear error.
    std::fs::write(&file, "listen = 5\n").unwrap();
    let e = Config::resolve(&Args::parse_from(["t", "--config", f]).o).unwrap_err();
    assert!(e.to_string().contains("invalid config file"), "{e}");
    std::fs::write(&file, "nonsense_key = 1\n").unwrap();
    assert!(Config::resolve(&Args::parse_from(["t", "--config", f]).o).is_err());
}
