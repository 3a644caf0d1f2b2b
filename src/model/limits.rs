//! Size limits of stored values, shared by validation (which refuses what
//! is over them) and configuration (which derives message bounds from
//! them). Constants only.

/// Longest namespace or session id.
pub const MAX_ID_BYTES: usize = 128;
/// Longest subject id or speaker.
pub const MAX_NAME_BYTES: usize = 256;
/// Longest title.
pub const MAX_TITLE_BYTES: usize = 1024;
/// Most metadata entries on a session or turn.
pub const MAX_METADATA_ENTRIES: usize = 64;
/// Longest metadata key.
pub const MAX_METADATA_KEY_BYTES: usize = 128;
/// Longest metadata value.
pub const MAX_METADATA_VALUE_BYTES: usize = 4096;
/// Longest idempotency key.
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 128;

/// Longest fact text, in bytes.
pub const MAX_FACT_BYTES: usize = 4096;
/// Longest fact key, in characters.
pub const MAX_KEY_CHARS: usize = 128;
/// Most tags per fact.
pub const MAX_TAGS: usize = 16;
/// Longest tag, in characters.
pub const MAX_TAG_CHARS: usize = 64;
/// Most sources kept per fact (merged duplicates add theirs).
pub const MAX_SOURCES: usize = 16;
