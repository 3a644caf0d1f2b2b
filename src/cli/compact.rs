//! `mnemo compact`: makes removed records' bytes leave a stopped daemon's
//! sled data directory (after an erase, or retention). Rebuilds the search
//! index from the store (its old segments, deleted documents included,
//! are removed, and the outbox is drained), removes search indexes an
//! earlier start moved aside, then rewrites the sled database into fresh
//! files (`store::compact`).

use crate::config::{Config, Overrides, StoreKind};
use crate::store::compact::{self, size_of};
use crate::store::engine::Read;
use crate::store::keys;

const UNFINISHED_ERASE: &str = "an erase is unfinished in this data directory: start the daemon to finish it (it resumes by itself), stop it, then compact";

/// `mnemo compact`
#[derive(Debug, clap::Args)]
pub struct CompactArgs {
    #[command(flatten)]
    store: Overrides,
}

/// Runs `mnemo compact`.
pub fn compact(args: CompactArgs) -> Result<(), String> {
    let config = Config::resolve(&args.store).map_err(|e| e.to_string())?;
    match config.store {
        StoreKind::Sled => {}
        StoreKind::Postgres => {
            return Err("on PostgreSQL an erase deletes the rows in its transactions; run VACUUM (FULL) on the table to return their space and overwrite the dead tuples (see docs/operations.md, \"Erasure and retention\")".into())
        }
        StoreKind::Memory => return Err("compact works on a sled data directory: --store sled".into()),
    }
    let dir = config.data_dir.clone();
    // Finish an interrupted run first, or the store cannot be opened.
    if compact::interrupted(&dir).is_none() {
        let (store, _) = super::admin::open_store(&args.store)?;
        if !store
            .store()
            .erase_jobs(1)
            .map_err(|e| e.to_string())?
            .is_empty()
        {
            return Err(UNFINISHED_ERASE.into());
        }
        drop(store);
        let started = std::time::Instant::now();
        let index_before = size_of(&dir.join(crate::server::SEARCH_INDEX_DIR));
        super::knowledge::reindex(&args.store)?;
        eprintln!(
            "search index rebuilt: {index_before} bytes before, {} after ({:.1} s)",
            size_of(&dir.join(crate::server::SEARCH_INDEX_DIR)),
            started.elapsed().as_secs_f64()
        );
    }
    // Indexes moved aside as damaged hold documents too.
    for entry in
        std::fs::read_dir(&dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?
    {
        let entry = entry.map_err(|e| e.to_string())?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&format!("{}.damaged-", crate::server::SEARCH_INDEX_DIR)) {
            std::fs::remove_dir_all(entry.path())
                .map_err(|e| format!("cannot remove {}: {e}", entry.path().display()))?;
            eprintln!("removed {}", entry.path().display());
        }
    }
    let check = |engine: &crate::store::engine::SledEngine| -> crate::Result<()> {
        if engine
            .scan(std::ops::Bound::Unbounded, &keys::erase_jobs(), 1)?
            .is_empty()
        {
            return Ok(());
        }
        Err(crate::Error::FailedPrecondition(
            crate::error::Precondition::SubjectErasing,
            UNFINISHED_ERASE.into(),
        ))
    };
    let done = compact::compact(
        &dir,
        config.cache_mb,
        &check,
        &mut super::admin::progress("records copied"),
    )
    .map_err(|e| e.to_string())?;
    super::admin::end_progress();
    println!(
        "compacted {} records in {}: sled files {} bytes before, {} after",
        done.records,
        dir.display(),
        done.bytes_before,
        done.bytes_after
    );
    Ok(())
}
