//! `mnemo retention --dry-run`: what a retention pass (`[[retention]]`
//! tables of the config) would remove, per namespace and kind, with the
//! oldest record's time; removes nothing. The same decisions as the
//! daemon's passes (`memory::retention::plan`), so a pass run at the same
//! time removes exactly these counts. Removing is the daemon's job (every
//! `limits.retention_sweep_secs`): without `--dry-run` the command says so
//! and removes nothing. On sled the daemon must be stopped (sled allows
//! one process per data directory); on PostgreSQL it reads the shared
//! database while daemons run.

use crate::config::{Config, Overrides, RetentionPolicy};
use crate::memory::retention::{self, RetentionPlan};
use crate::model::{calendar, now_nanos, UnixNanos};

/// `mnemo retention`
#[derive(Debug, clap::Args)]
pub struct RetentionArgs {
    /// Print what a pass would remove now; remove nothing.
    #[arg(long)]
    dry_run: bool,
    /// Evaluate as of this time instead of now, in unix seconds (decimals
    /// allowed): what a pass then would remove, if nothing changed meanwhile.
    #[arg(long, value_name = "UNIX_SECONDS")]
    at: Option<String>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: Overrides,
}

/// Parses unix seconds with up to nine decimals, exactly.
fn parse_at(s: &str) -> Result<UnixNanos, String> {
    let bad = || format!("--at {s:?} is not unix seconds (e.g. 1767225600 or 1767225600.5)");
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    if frac.len() > 9 || !frac.chars().all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    let secs: i64 = whole.parse().map_err(|_| bad())?;
    let frac: i64 = format!("{frac:0<9}").parse().map_err(|_| bad())?;
    secs.checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(if secs < 0 { -frac } else { frac }))
        .ok_or_else(bad)
}

/// `2026-01-31T12:00:00Z`.
fn utc(n: UnixNanos) -> String {
    let secs = n.div_euclid(1_000_000_000);
    let (y, m, d) = calendar::civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

fn print(plan: &RetentionPlan, json: bool) -> Result<(), String> {
    if json {
        let v = serde_json::json!({
            "at": plan.at,
            "at_utc": utc(plan.at),
            "namespaces": plan.namespaces.iter().map(|(ns, kinds)| {
                (ns.clone(), serde_json::Value::Object(kinds.iter().map(|(k, d)| {
                    (k.to_string(), serde_json::json!({
                        "count": d.count,
                        "oldest": d.oldest,
                        "oldest_utc": d.oldest.map(utc),
                    }))
                }).collect::<serde_json::Map<_, _>>()))
            }).collect::<serde_json::Map<_, _>>(),
            "total": plan.totals().total(),
        });
        println!("{v}");
        return Ok(());
    }
    println!(
        "retention as of {} (dry run: nothing removed)",
        utc(plan.at)
    );
    if plan.namespaces.is_empty() {
        println!("nothing is due");
        return Ok(());
    }
    println!(
        "{:<32} {:<14} {:>10}  oldest",
        "namespace", "kind", "records"
    );
    for (ns, kinds) in &plan.namespaces {
        for (kind, d) in kinds {
            let oldest = d.oldest.map_or_else(|| "-".to_owned(), utc);
            println!("{ns:<32} {kind:<14} {:>10}  {oldest}", d.count);
        }
    }
    println!("total: {} records", plan.totals().total());
    Ok(())
}

/// Runs `mnemo retention`.
pub fn retention(args: RetentionArgs) -> Result<(), String> {
    let config = Config::resolve(&args.store).map_err(|e| e.to_string())?;
    let policy = RetentionPolicy::new(config.retention.clone()).map_err(|e| e.to_string())?;
    if !args.dry_run {
        return Err(format!(
            "retention is applied by the running daemon, a pass every limits.retention_sweep_secs ({} s) and one at start; this command only previews it: add --dry-run",
            config.limits.retention_sweep_secs
        ));
    }
    let at = match &args.at {
        Some(s) => parse_at(s)?,
        None => now_nanos(),
    };
    if !policy.is_active() {
        eprintln!("no [[retention]] table removes anything: every record is kept");
    }
    let (store, _) = super::admin::open_store(&args.store)?;
    let plan = retention::plan(store.store(), &policy, at).map_err(|e| e.to_string())?;
    print(&plan, args.json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_is_parsed_exactly() {
        assert_eq!(parse_at("1").unwrap(), 1_000_000_000);
        assert_eq!(parse_at("1767225600.5").unwrap(), 1_767_225_600_500_000_000);
        assert_eq!(parse_at("2.000000001").unwrap(), 2_000_000_001);
        assert!(parse_at("1.0000000001").is_err());
        assert!(parse_at("x").is_err());
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
    }
}
