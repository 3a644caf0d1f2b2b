//! Token counting behind one small interface. Counts use `bpe-openai`, a
//! linear-time BPE whose counts equal tiktoken's for cl100k_base and
//! o200k_base (checked against tiktoken-rs in tests). tiktoken-rs itself is
//! quadratic on long runs without whitespace (about 21 s for 200,000
//! characters), a denial-of-service vector for a server; bpe-openai counts
//! 1 MiB of one repeated character in milliseconds.
//!
//! Counting is CPU work: call it from a blocking thread, never directly on
//! an async runtime thread.

use crate::model::{Encoding, NewTurn};

fn tokenizer(encoding: Encoding) -> &'static bpe_openai::Tokenizer {
    match encoding {
        Encoding::Cl100kBase => bpe_openai::cl100k_base(),
        Encoding::O200kBase => bpe_openai::o200k_base(),
    }
}

/// Tokens of `text` in `encoding`.
pub fn count(encoding: Encoding, text: &str) -> usize {
    if text.is_empty() {
        return 0;
    }
    tokenizer(encoding).count(text)
}

/// A lower bound of `text`'s token count in either encoding, without
/// running the tokenizer: its whitespace-separated words. The OpenAI
/// pre-tokenizers cut text into pieces that never hold characters of two
/// such words (a piece is at most one leading whitespace or punctuation
/// character and a run without whitespace, or whitespace alone), and every
/// piece is at least one token. A packer uses it to leave out, unmeasured,
/// a line that cannot fit.
pub fn at_least(text: &str) -> usize {
    text.split_whitespace().count()
}

/// Tokens of a turn: its content plus its tool call's name, arguments,
/// result and error details, each counted on its own.
pub fn count_turn(encoding: Encoding, turn: &NewTurn) -> u32 {
    let mut n = count(encoding, &turn.content);
    if let Some(t) = &turn.tool_call {
        n += count(encoding, &t.tool_name)
            + count(encoding, &t.arguments_json)
            + count(encoding, &t.result)
            + count(encoding, &t.error_details);
    }
    // Turns are bounded to a few MiB, far below u32::MAX tokens.
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Loads both tokenizers' tables so the first request does not pay for it.
pub fn warm_up() {
    count(Encoding::Cl100kBase, "warm up");
    count(Encoding::O200kBase, "warm up");
}
