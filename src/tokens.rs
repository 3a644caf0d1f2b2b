//! Token counting behind one small interface. Counts use `bpe-openai`, a
//! linear-time BPE whose counts equal tiktoken's for cl100k_base and
//! o200k_base (checked against tiktoken-rs in tests). tiktoken-rs itself is
//! quadratic on long runs without whitespace (about 21 s for 200,000
//! characters), a denial-of-service vector for a server; bpe-openai counts
//! 1 MiB of one repeated character in milliseconds.
//!
//! Counting is CPU work: call it from a blocking thread, never directly on
//! an async runtime thread.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{LazyLock, Mutex, MutexGuard};

use crate::model::{Encoding, NewTurn};

/// Text a [`count_remembered`] memo holds before it starts over, in bytes
/// (a shard's share of it).
const MEMO_BYTES: usize = 16 << 20;
/// Independent parts of the memo, so concurrent bundles seldom wait.
const MEMO_SHARDS: usize = 16;

/// Counts already made, by encoding and text.
struct Memo {
    hasher: RandomState,
    shards: Vec<Mutex<Shard>>,
}

#[derive(Default)]
struct Shard {
    counts: [HashMap<Box<str>, u32>; 2],
    bytes: usize,
}

static MEMO: LazyLock<Memo> = LazyLock::new(|| Memo {
    hasher: RandomState::new(),
    shards: (0..MEMO_SHARDS).map(|_| Mutex::default()).collect(),
});

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

/// A shard of the memo; a poisoned one only held counts: it starts over.
fn lock(m: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    m.lock().unwrap_or_else(|e| {
        let mut g = e.into_inner();
        *g = Shard::default();
        g
    })
}

/// As [`count`], remembering the count: a bundle measures the same lines
/// in every request of a session (its summary's items, the subject's
/// episodes and facts), and counting is most of a bundle's CPU. The memo is
/// exact (keyed by the whole text) and bounded (16 MiB of text; when a
/// shard is full it is emptied and fills again).
pub fn count_remembered(encoding: Encoding, text: &str) -> usize {
    let memo = &*MEMO;
    let shard = &memo.shards[memo.hasher.hash_one(text) as usize % MEMO_SHARDS];
    let slot = usize::from(encoding == Encoding::O200kBase);
    if let Some(&n) = lock(shard).counts[slot].get(text) {
        return n as usize;
    }
    let n = count(encoding, text);
    let room = MEMO_BYTES / MEMO_SHARDS;
    // A text larger than a shard is not kept, and empties nothing.
    if text.len() <= room {
        let mut g = lock(shard);
        if g.bytes + text.len() > room {
            *g = Shard::default();
        }
        let kept = u32::try_from(n).unwrap_or(u32::MAX);
        // Two bundles may count the same text at once: its bytes count once.
        if g.counts[slot].insert(text.into(), kept).is_none() {
            g.bytes += text.len();
        }
    }
    n
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_count_is_the_count() {
        let texts = [
            "- Ship the release notes by Friday (turns 12, 14).\n",
            "Kate: I recently started watching Casa de Papel!\n",
            "",
            "ééé 日本語のテキスト 🦀🦀🦀\n",
        ];
        for enc in [Encoding::Cl100kBase, Encoding::O200kBase] {
            for t in texts {
                // First from the tokenizer, then from the memo.
                assert_eq!(count_remembered(enc, t), count(enc, t), "{t:?}");
                assert_eq!(count_remembered(enc, t), count(enc, t), "{t:?}");
            }
        }
        // The same text counts apart in each encoding.
        let t = "supercalifragilistic expialidocious tokens";
        assert_ne!(
            count(Encoding::Cl100kBase, t),
            count(Encoding::O200kBase, t)
        );
        assert_eq!(
            count_remembered(Encoding::O200kBase, t),
            count(Encoding::O200kBase, t)
        );
        assert_eq!(
            count_remembered(Encoding::Cl100kBase, t),
            count(Encoding::Cl100kBase, t)
        );
    }

    #[test]
    fn a_text_over_a_shard_is_counted_not_kept() {
        let t = "word ".repeat(MEMO_BYTES / MEMO_SHARDS / 5 + 1);
        let n = count(Encoding::Cl100kBase, &t);
        assert_eq!(count_remembered(Encoding::Cl100kBase, &t), n);
        let memo = &*MEMO;
        let kept = memo
            .shards
            .iter()
            .any(|s| s.lock().expect("shard").counts[0].contains_key(t.as_str()));
        assert!(!kept);
        assert_eq!(count_remembered(Encoding::Cl100kBase, &t), n);
    }
}
