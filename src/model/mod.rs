//! The bottom layer: what mnemo remembers, as plain data. Sessions, turns
//! and tool calls; structured summaries and their items; facts and
//! episodes; audit, review, fold and idempotency records; size limits.
//!
//! Everything here is serde data the store persists and every layer above
//! shares. It imports nothing else of the crate and decides nothing: rules
//! live in the domain (`memory`), persistence in `store`.

pub mod calendar;
pub mod erasure;
pub mod knowledge;
pub mod limits;
pub mod records;
pub mod retention;
pub mod session;
pub mod summary;

pub use erasure::*;
pub use knowledge::*;
pub use records::*;
pub use retention::*;
pub use session::*;
pub use summary::*;
