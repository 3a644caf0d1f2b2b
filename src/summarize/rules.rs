//! The rules that read free text: sentence splitting, content words,
//! entities (identifiers, amounts, dates, emails, URLs), the per-sentence
//! classifier with its importance score, and the cue phrases for actions,
//! owners, deadlines, priorities, decisions, reversals, completions and
//! questions. Every rule is a pure function of its input (plus the turn's
//! time for deadlines), so the engine stays deterministic and each rule has
//! its own unit tests below. No rule invents text: extractors return slices
//! of their input, and the only derived value is a deadline date.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use crate::model::Priority;
use crate::model::{Turn, UnixNanos};

/// Longest item text (fact, key point, decision...) in characters; longer
/// sentences are cut at a word boundary (see [`clip`]).
pub const MAX_ITEM_CHARS: usize = 300;

/// Metadata key of a client annotation (`decision`, `pending_action`,
/// `open_question`, `fact`); annotations win over heuristics.
pub const ANNOTATION_KEY: &str = "mnemo.annotation";

/// Metadata key the server sets on event turns it records itself (e.g.
/// `handoff`); clients cannot set it. Event turns are counted but yield no
/// summary items.
pub const EVENT_KEY: &str = "mnemo.event";

/// Whether a turn is an event the server recorded.
pub fn is_event(metadata: &BTreeMap<String, String>) -> bool {
    metadata.contains_key(EVENT_KEY)
}

/// Metadata key naming (by seq) the question a turn answers.
pub const ANSWER_TO_KEY: &str = "mnemo.answer_to";

// ---------------------------------------------------------------------------
// Turns
// ---------------------------------------------------------------------------

/// The name items use for a turn's speaker: the speaker id, or the role in
/// lower case when the client gave no speaker.
pub fn speaker_of(turn: &Turn) -> String {
    if turn.speaker.trim().is_empty() {
        format!("{:?}", turn.role).to_lowercase()
    } else {
        turn.speaker.clone()
    }
}

/// The time a turn happened: the client's clock when given, else the
/// server's (unix nanos, UTC).
pub fn turn_time(turn: &Turn) -> UnixNanos {
    turn.client_time.unwrap_or(turn.server_time)
}

/// A client annotation: the whole turn is taken as this kind of item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Annotation {
    /// A decision.
    Decision,
    /// A pending action.
    PendingAction,
    /// An open question.
    OpenQuestion,
    /// A key fact.
    Fact,
}

/// The turn's annotation, if its metadata carries a known one.
pub fn annotation(metadata: &BTreeMap<String, String>) -> Option<Annotation> {
    match metadata
        .get(ANNOTATION_KEY)?
        .trim()
        .to_ascii_lowercase()
        .as_str()
    {
        "decision" => Some(Annotation::Decision),
        "pending_action" | "action" => Some(Annotation::PendingAction),
        "open_question" | "question" => Some(Annotation::OpenQuestion),
        "fact" => Some(Annotation::Fact),
        _ => None,
    }
}

/// The seq of the question the turn says it answers (`mnemo.answer_to`).
pub fn answer_to(metadata: &BTreeMap<String, String>) -> Option<u64> {
    metadata.get(ANSWER_TO_KEY)?.trim().parse().ok()
}

// ---------------------------------------------------------------------------
// Text basics
// ---------------------------------------------------------------------------

/// Splits text into sentences, each a trimmed slice of the input. A
/// sentence ends at `.`, `!` or `?` followed by whitespace or the end (so
/// "$49.99" and "example.com" stay whole), or at a line break. Common
/// abbreviations ("e.g.", "Dr.") do not end a sentence.
pub fn sentences<'a>(text: &'a str) -> Vec<&'a str> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut push = |s: &'a str| {
        let t = s.trim();
        if !t.is_empty() {
            out.push(t);
        }
    };
    let (mut start, mut i) = (0, 0);
    // Byte scanning is safe: the ASCII bytes tested never occur inside a
    // multi-byte UTF-8 sequence, so every cut is on a char boundary.
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\n' {
            push(&text[start..i]);
            start = i + 1;
            i += 1;
        } else if matches!(b, b'.' | b'!' | b'?') {
            let mut j = i + 1;
            while j < bytes.len() && matches!(bytes[j], b'.' | b'!' | b'?') {
                j += 1;
            }
            while j < bytes.len() && matches!(bytes[j], b'"' | b'\'' | b')') {
                j += 1;
            }
            let at_break = j == bytes.len() || bytes[j].is_ascii_whitespace();
            if at_break && !(b == b'.' && ends_with_abbreviation(&text[start..i])) {
                push(&text[start..j]);
                start = j;
            }
            i = j;
        } else {
            i += 1;
        }
    }
    push(&text[start..]);
    out
}

fn ends_with_abbreviation(before_dot: &str) -> bool {
    let last = before_dot
        .rsplit(|c: char| c.is_whitespace() || c == '(')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    matches!(
        last.as_str(),
        "e.g" | "i.e" | "mr" | "mrs" | "ms" | "dr" | "vs" | "etc" | "approx" | "st" | "inc"
    )
}

/// Lower-case word tokens with their byte offsets: runs of letters and
/// digits, keeping inner apostrophes ("i'll", "don't").
pub fn word_spans(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let apostrophe = (c == '\'' || c == '’')
            && !cur.is_empty()
            && chars.peek().is_some_and(|(_, n)| n.is_alphabetic());
        if c.is_alphanumeric() || apostrophe {
            if cur.is_empty() {
                start = i;
            }
            if apostrophe {
                cur.push('\'');
            } else {
                cur.extend(c.to_lowercase());
            }
        } else if !cur.is_empty() {
            out.push((start, std::mem::take(&mut cur)));
        }
    }
    if !cur.is_empty() {
        out.push((start, cur));
    }
    out
}

/// Lower-case word tokens (see [`word_spans`]).
pub fn words(text: &str) -> Vec<String> {
    word_spans(text).into_iter().map(|(_, w)| w).collect()
}

/// A sentence prepared for phrase matching: its words joined by single
/// spaces, with a space at both ends so that `" phrase "` matches whole
/// words only, regardless of punctuation.
#[derive(Debug, Clone)]
pub struct Norm {
    /// `" w1 w2 ... wn "`, for word-level checks on the whole sentence.
    pub text: String,
    /// The words.
    pub words: Vec<String>,
    /// One bit per word hash: rejects most cue phrases without comparing
    /// strings (every sentence is tested against hundreds of phrases).
    mask: u128,
}

/// FNV-1a of a word, folded to a bit of [`Norm`]'s mask.
fn word_bit(w: &[u8]) -> u128 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in w {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    1 << (h % 128)
}

impl Norm {
    /// Normalizes `s`.
    pub fn new(s: &str) -> Norm {
        let words = words(s);
        let text = format!(" {} ", words.join(" "));
        let mask = words.iter().fold(0, |m, w| m | word_bit(w.as_bytes()));
        Norm { text, words, mask }
    }

    /// Whether the whole-word `phrase` occurs.
    pub fn has(&self, phrase: &str) -> bool {
        self.find(phrase).is_some()
    }

    /// Whether any of the phrases occurs.
    pub fn has_any(&self, phrases: &[&str]) -> bool {
        phrases.iter().any(|p| self.has(p))
    }

    /// Word index of the first occurrence of `phrase` (lower-case words
    /// separated by single spaces). Compares words in place: this runs for
    /// every cue phrase of every sentence, so it must not allocate.
    pub fn find(&self, phrase: &str) -> Option<usize> {
        let bytes = phrase.as_bytes();
        let first_len = bytes.iter().position(|&b| b == b' ').unwrap_or(bytes.len());
        if self.mask & word_bit(&bytes[..first_len]) == 0 {
            return None;
        }
        let first = &phrase[..first_len];
        let len = phrase.split(' ').count();
        let last_start = self.words.len().checked_sub(len)?;
        (0..=last_start).find(|&i| {
            self.words[i] == first
                && phrase
                    .split(' ')
                    .enumerate()
                    .skip(1)
                    .all(|(k, p)| self.words[i + k] == p)
        })
    }

    /// Position of the earliest of the phrases.
    pub fn find_any(&self, phrases: &[&str]) -> Option<usize> {
        phrases.iter().filter_map(|p| self.find(p)).min()
    }

    /// Whether the normalized sentence starts with `phrase`.
    pub fn starts_with(&self, phrase: &str) -> bool {
        phrase
            .split(' ')
            .enumerate()
            .all(|(k, p)| self.words.get(k).is_some_and(|w| w == p))
    }
}

/// Words that carry no topic: function words, chat filler and pronouns.
fn stopwords() -> &'static BTreeSet<&'static str> {
    static SET: OnceLock<BTreeSet<&'static str>> = OnceLock::new();
    SET.get_or_init(|| {
        [
            "a",
            "about",
            "above",
            "actually",
            "after",
            "again",
            "against",
            "all",
            "also",
            "am",
            "an",
            "and",
            "any",
            "anyone",
            "anything",
            "are",
            "aren't",
            "around",
            "as",
            "at",
            "back",
            "be",
            "because",
            "been",
            "before",
            "being",
            "below",
            "between",
            "both",
            "but",
            "by",
            "can",
            "can't",
            "cannot",
            "could",
            "couldn't",
            "did",
            "didn't",
            "do",
            "does",
            "doesn't",
            "doing",
            "don't",
            "down",
            "during",
            "each",
            "else",
            "even",
            "ever",
            "every",
            "few",
            "for",
            "from",
            "further",
            "get",
            "gets",
            "getting",
            "give",
            "go",
            "going",
            "gonna",
            "good",
            "got",
            "great",
            "had",
            "hadn't",
            "has",
            "hasn't",
            "have",
            "haven't",
            "having",
            "he",
            "hello",
            "help",
            "her",
            "here",
            "hers",
            "hey",
            "hi",
            "him",
            "his",
            "how",
            "i",
            "i'd",
            "i'll",
            "i'm",
            "i've",
            "if",
            "in",
            "into",
            "is",
            "isn't",
            "it",
            "it's",
            "its",
            "just",
            "know",
            "let",
            "let's",
            "like",
            "lol",
            "maybe",
            "me",
            "might",
            "more",
            "most",
            "much",
            "must",
            "my",
            "need",
            "needs",
            "no",
            "nope",
            "nor",
            "not",
            "now",
            "of",
            "off",
            "oh",
            "ok",
            "okay",
            "on",
            "once",
            "one",
            "only",
            "or",
            "other",
            "our",
            "ours",
            "out",
            "over",
            "own",
            "please",
            "pretty",
            "quite",
            "really",
            "right",
            "same",
            "say",
            "see",
            "she",
            "should",
            "shouldn't",
            "so",
            "some",
            "something",
            "still",
            "such",
            "sure",
            "thank",
            "thanks",
            "than",
            "that",
            "that's",
            "the",
            "their",
            "them",
            "then",
            "there",
            "there's",
            "these",
            "they",
            "they're",
            "thing",
            "things",
            "think",
            "this",
            "those",
            "though",
            "through",
            "to",
            "today",
            "too",
            "uh",
            "um",
            "under",
            "until",
            "up",
            "us",
            "very",
            "want",
            "wants",
            "was",
            "wasn't",
            "way",
            "we",
            "we'd",
            "we'll",
            "we're",
            "we've",
            "well",
            "were",
            "weren't",
            "what",
            "what's",
            "when",
            "where",
            "which",
            "while",
            "who",
            "whom",
            "why",
            "will",
            "with",
            "won't",
            "would",
            "wouldn't",
            "yeah",
            "yep",
            "yes",
            "yet",
            "you",
            "you'd",
            "you'll",
            "you're",
            "you've",
            "your",
            "yours",
        ]
        .into_iter()
        .collect()
    })
}

/// Whether `w` (lower case) is a stopword.
pub fn is_stopword(w: &str) -> bool {
    stopwords().contains(w)
}

/// A crude suffix stripper so "charged", "charges" and "charging" meet at
/// "charg". Only used for comparing words, never shown.
pub fn stem(w: &str) -> String {
    let n = w.chars().count();
    let strip = |s: &str, suf: &str, min: usize| -> Option<String> {
        (n > min && s.ends_with(suf)).then(|| s[..s.len() - suf.len()].to_string())
    };
    let mut s = strip(w, "ing", 5)
        .or_else(|| strip(w, "ed", 4))
        .or_else(|| strip(w, "es", 4))
        .or_else(|| {
            if w.ends_with("ss") {
                None
            } else {
                strip(w, "s", 3)
            }
        })
        .unwrap_or_else(|| w.to_string());
    if s.chars().count() > 4 && s.ends_with('e') {
        s.pop();
    }
    s
}

/// Stemmed content words: no stopwords, at least three characters (or any
/// token with a digit, so "ORD-9921" contributes "9921").
pub fn content_words(text: &str) -> BTreeSet<String> {
    words(text)
        .into_iter()
        .filter(|w| {
            let digit = w.chars().any(|c| c.is_ascii_digit());
            !is_stopword(w) && (digit || w.chars().count() >= 3)
        })
        .map(|w| stem(&w))
        .collect()
}

/// [`content_words`] of an already normalized sentence.
pub fn content_of(n: &Norm) -> BTreeSet<String> {
    n.words
        .iter()
        .filter(|w| {
            let digit = w.chars().any(|c| c.is_ascii_digit());
            !is_stopword(w) && (digit || w.chars().count() >= 3)
        })
        .map(|w| stem(w))
        .collect()
}

/// Fraction of `new`'s words that also occur in `old` (0 when `new` is empty).
pub fn overlap(new: &BTreeSet<String>, old: &BTreeSet<String>) -> f64 {
    if new.is_empty() {
        return 0.0;
    }
    let shared = new.intersection(old).count();
    shared as f64 / new.len() as f64
}

/// Whether `new` repeats `earlier`: more than 70% of its (lower-case) words
/// already occur there.
pub fn is_near_duplicate(new: &str, earlier: &str) -> bool {
    let a: BTreeSet<String> = words(new).into_iter().collect();
    let b: BTreeSet<String> = words(earlier).into_iter().collect();
    !a.is_empty() && !b.is_empty() && overlap(&a, &b) > 0.7
}

const LEAD_FILLERS: &[&str] = &[
    "so basically",
    "hi there",
    "hello there",
    "ok so",
    "okay so",
    "i mean",
    "you know",
    "basically",
    "hello",
    "hey",
    "hi",
    "um",
    "uh",
    "erm",
    "oh",
    "well",
];

/// Drops leading filler ("Um, ", "Well, ", "Hi there, ") from a sentence;
/// the result is still a slice of the input, so it stays verbatim.
pub fn trim_filler(sentence: &str) -> &str {
    let mut s = sentence.trim();
    loop {
        let lower = s.to_lowercase();
        let mut cut = None;
        for f in LEAD_FILLERS {
            if let Some(rest) = lower.strip_prefix(f) {
                // Only a whole word followed by punctuation or a space.
                if rest.is_empty() || rest.starts_with([',', ' ', '!', '.', '-', '—']) {
                    cut = Some(f.len());
                    break;
                }
            }
        }
        match cut {
            // `to_lowercase` of ASCII fillers keeps byte lengths, and the
            // filler matched at the start, so `n` is a char boundary of `s`
            // unless lower-casing changed lengths: check before slicing.
            Some(n) if s.is_char_boundary(n) && s[..n].eq_ignore_ascii_case(&lower[..n]) => {
                let rest = s[n..].trim_start_matches([',', ' ', '!', '.', '-', '—']);
                if rest.is_empty() {
                    return s;
                }
                s = rest;
            }
            _ => return s,
        }
    }
}

/// Cuts `text` to at most `max` characters, at a word boundary, marking the
/// cut with "…". It never cuts through an identifier: when the only word
/// boundary would lose more than half the text, the word crossing the limit
/// is kept whole (up to 4 × `max`), and only a longer unbroken token is cut
/// mid-way. The result is a prefix of `text` (plus "…").
pub fn clip(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max || max < 2 {
        return text.to_string();
    }
    // Byte index of char number `max - 1`: room for the ellipsis.
    let cut = text
        .char_indices()
        .nth(max - 1)
        .map_or(text.len(), |(i, _)| i);
    let space_before = text[..cut].rfind(char::is_whitespace);
    let token_end = text[cut..]
        .find(char::is_whitespace)
        .map_or(text.len(), |i| cut + i);
    let end = match space_before {
        Some(p) if p * 2 >= cut => p,
        _ if text[..token_end].chars().count() <= 4 * max => token_end,
        _ => cut,
    };
    if end >= text.len() {
        return text.to_string();
    }
    format!("{}…", text[..end].trim_end())
}

/// Shortens `text` to at most `max` characters — never more — preferring a
/// word boundary (when it keeps at least half), else a char boundary, and
/// marking the cut with "…". For tool results, whose length must be bounded.
pub fn shorten(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_string();
    }
    if max < 2 {
        return String::new();
    }
    let cut = text
        .char_indices()
        .nth(max - 1)
        .map_or(text.len(), |(i, _)| i);
    let end = match text[..cut].rfind(char::is_whitespace) {
        Some(p) if p * 2 >= cut => p,
        _ => cut,
    };
    format!("{}…", text[..end].trim_end())
}

/// Cuts `text` to at most `max_bytes` bytes on a char boundary (for the
/// analysis limit of huge turns).
pub fn prefix_bytes(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

// ---------------------------------------------------------------------------
// Entities
// ---------------------------------------------------------------------------

/// Kind of a token that must be kept (and checked) verbatim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EntityKind {
    /// `http(s)://…` or `www.…`.
    Url,
    /// `name@domain.tld`.
    Email,
    /// A currency amount: `$49.99`, `€12`, `100USD`.
    Amount,
    /// An ISO date, `2026-03-20`.
    Date,
    /// A number: `49.99`, `3-5`, `10:30`, `50%`, `1,000`, `20th`.
    Number,
    /// Letters and digits mixed: `ORD-9921`, `v1.2.3`, `s3_upload`.
    Identifier,
    /// A file name or path: `report.pdf`, `src/main.rs`.
    Path,
    /// A code-like name: `order_id`, `send_email`.
    Code,
}

/// A token of a text that must stay verbatim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entity<'a> {
    /// What it is.
    pub kind: EntityKind,
    /// The token, a slice of the input.
    pub text: &'a str,
}

const FILE_EXTENSIONS: &[&str] = &[
    "c", "cfg", "conf", "cpp", "csv", "doc", "docx", "go", "gz", "h", "html", "ini", "java", "jpg",
    "js", "json", "log", "md", "pdf", "png", "proto", "py", "rb", "rs", "sh", "sql", "svg", "tar",
    "toml", "ts", "tsx", "txt", "xls", "xlsx", "xml", "yaml", "yml", "zip",
];

/// Splits text into candidate tokens: whitespace and brackets, quotes and
/// semicolons separate; a comma separates unless it sits between digits
/// ("1,000"); edge punctuation is trimmed.
fn raw_tokens(text: &str) -> Vec<&str> {
    let is_sep = |c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '"' | '`' | '(' | ')' | '[' | ']' | '{' | '}' | '<' | '>' | '|' | ';'
            )
            || matches!(c, '…' | '“' | '”' | '‘' | '’' | '«' | '»')
    };
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    for (k, &(i, c)) in chars.iter().enumerate() {
        let comma_sep = c == ',' && {
            let prev_digit = k > 0 && chars[k - 1].1.is_ascii_digit();
            let next_digit = chars.get(k + 1).is_some_and(|&(_, n)| n.is_ascii_digit());
            !(prev_digit && next_digit)
        };
        if is_sep(c) || comma_sep {
            if let Some(s) = start.take() {
                out.push(&text[s..i]);
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        out.push(&text[s..]);
    }
    out.into_iter()
        .map(|t| {
            t.trim_start_matches(['\'', '*', '_', '~', ':'])
                .trim_end_matches(['.', ',', ':', '!', '?', '\'', '*', '_', '~'])
        })
        .filter(|t| !t.is_empty())
        .collect()
}

fn is_iso_date(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() >= 10
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[5..7].iter().all(u8::is_ascii_digit)
        && b[7] == b'-'
        && b[8..10].iter().all(u8::is_ascii_digit)
        && (b.len() == 10 || b[10] == b'T' || b[10] == b't')
}

fn classify_token(t: &str) -> Option<EntityKind> {
    let lower = t.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") || lower.starts_with("www.") {
        return Some(EntityKind::Url);
    }
    if let Some(at) = t.find('@') {
        if at > 0 && t[at + 1..].contains('.') && !t[at + 1..].ends_with('.') {
            return Some(EntityKind::Email);
        }
    }
    let has_digit = t.chars().any(|c| c.is_ascii_digit());
    let currency = |c: char| matches!(c, '$' | '€' | '£' | '¥' | '₹');
    if has_digit
        && (t.starts_with(currency)
            || t.ends_with(currency)
            || ["usd", "eur", "gbp"]
                .iter()
                .any(|c| lower.ends_with(c) && lower.len() > 3)
                && lower.chars().next().is_some_and(|c| c.is_ascii_digit()))
    {
        return Some(EntityKind::Amount);
    }
    if is_iso_date(t) {
        return Some(EntityKind::Date);
    }
    if has_digit {
        let numeric = t
            .chars()
            .all(|c| c.is_ascii_digit() || ".,:%/-+x#".contains(c));
        let ordinal = ["st", "nd", "rd", "th"].iter().any(|s| {
            lower.ends_with(s) && lower[..lower.len() - 2].chars().all(|c| c.is_ascii_digit())
        });
        if numeric || ordinal {
            return Some(EntityKind::Number);
        }
        if t.chars().any(char::is_alphabetic) {
            return Some(EntityKind::Identifier);
        }
        return Some(EntityKind::Number);
    }
    let alnum_around = |sep: char| {
        t.split(sep).count() > 1 && t.split(sep).all(|p| p.chars().any(char::is_alphanumeric))
    };
    if alnum_around('/') || alnum_around('\\') {
        return Some(EntityKind::Path);
    }
    if let Some((stem, ext)) = t.rsplit_once('.') {
        if stem.chars().count() > 1
            && stem
                .chars()
                .all(|c| c.is_alphanumeric() || "-_.".contains(c))
            && FILE_EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str())
        {
            return Some(EntityKind::Path);
        }
    }
    if is_domain(t) {
        return Some(EntityKind::Url);
    }
    if alnum_around('_') {
        return Some(EntityKind::Code);
    }
    None
}

/// Top-level domains common enough to call "name.tld" a host name.
const TLDS: &[&str] = &[
    "com", "org", "net", "io", "dev", "ai", "co", "app", "gov", "edu", "de", "uk", "fr", "eu",
    "se", "nl", "us", "info", "biz", "cloud", "tech", "internal", "local",
];

/// "vpn.acme-corp.com", "example.org": labels of letters, digits and
/// hyphens, the last a known top-level domain.
fn is_domain(t: &str) -> bool {
    let labels: Vec<&str> = t.split('.').collect();
    labels.len() >= 2
        && labels
            .iter()
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        && labels
            .last()
            .is_some_and(|tld| TLDS.contains(&tld.to_ascii_lowercase().as_str()))
}

/// The tokens of `text` that must be kept and checked verbatim, in order.
pub fn entities(text: &str) -> Vec<Entity<'_>> {
    raw_tokens(text)
        .into_iter()
        .filter_map(|t| classify_token(t).map(|kind| Entity { kind, text: t }))
        .collect()
}

const MONTHS: &[&str] = &[
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

fn month_number(w: &str) -> Option<u32> {
    if let Some(i) = MONTHS.iter().position(|m| *m == w) {
        return u32::try_from(i + 1).ok();
    }
    // Three-letter abbreviations, but not "may"/"mar" ambiguity beyond
    // what the day number that must follow resolves.
    if w.len() == 3 || (w.len() == 4 && w == "sept") {
        let i = MONTHS.iter().position(|m| m.starts_with(w))?;
        return u32::try_from(i + 1).ok();
    }
    None
}

fn day_number_word(w: &str) -> Option<u32> {
    let digits = w.trim_end_matches(|c: char| c.is_alphabetic());
    let suffix = &w[digits.len()..];
    if digits.is_empty() || !matches!(suffix, "" | "st" | "nd" | "rd" | "th") {
        return None;
    }
    let d: u32 = digits.parse().ok()?;
    (1..=31).contains(&d).then_some(d)
}

/// Whether a fact-worthy entity occurs: any identifier, path, amount, date,
/// email or URL, a number that is more than a bare one- or two-digit count,
/// or a month-day date ("March 20").
pub fn has_fact_entity(text: &str) -> bool {
    let strong = entities(text).iter().any(|e| match e.kind {
        EntityKind::Number => {
            e.text.chars().any(|c| !c.is_ascii_digit()) || e.text.chars().count() > 2
        }
        EntityKind::Code => false,
        _ => true,
    });
    strong || {
        let w = words(text);
        w.windows(2).any(|p| {
            (month_number(&p[0]).is_some() && day_number_word(&p[1]).is_some())
                || (day_number_word(&p[0]).is_some() && month_number(&p[1]).is_some())
        })
    }
}

// ---------------------------------------------------------------------------
// Dates
// ---------------------------------------------------------------------------

const NANOS_PER_DAY: i64 = 86_400 * 1_000_000_000;

/// Days since 1970-01-01 of a UTC time.
pub fn day_of(t: UnixNanos) -> i64 {
    t.div_euclid(NANOS_PER_DAY)
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    // Howard Hinnant's algorithm: exact for every representable date.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date (year, month, day) of a day number.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    // d is in 1..=31 and m in 1..=12 by construction.
    (
        y,
        u32::try_from(m).unwrap_or(1),
        u32::try_from(d).unwrap_or(1),
    )
}

/// `YYYY-MM-DD` of a day number.
pub fn format_day(z: i64) -> String {
    let (y, m, d) = civil_from_days(z);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Monday = 0 … Sunday = 6.
pub fn weekday(z: i64) -> i64 {
    // 1970-01-01 was a Thursday (3).
    (z + 3).rem_euclid(7)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    let next = if m == 12 {
        days_from_civil(y + 1, 1, 1)
    } else {
        days_from_civil(y, m + 1, 1)
    };
    u32::try_from(next - days_from_civil(y, m, 1)).unwrap_or(31)
}

fn valid_date(y: i64, m: u32, d: u32) -> bool {
    (1..=12).contains(&m) && d >= 1 && d <= days_in_month(y, m)
}

const WEEKDAYS: &[&str] = &[
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

fn small_number(w: &str) -> Option<i64> {
    const NAMES: &[&str] = &[
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve", "thirteen", "fourteen",
    ];
    if let Some(i) = NAMES.iter().position(|n| *n == w) {
        return i64::try_from(i).ok();
    }
    if w == "a" || w == "an" {
        return Some(1);
    }
    w.parse::<i64>().ok().filter(|n| (0..=366).contains(n))
}

fn add_business_days(mut z: i64, n: i64) -> i64 {
    let mut left = n;
    while left > 0 {
        z += 1;
        if weekday(z) < 5 {
            left -= 1;
        }
    }
    z
}

/// Every deadline date in `text`, as `YYYY-MM-DD`, in order of appearance.
/// ISO dates are taken as written; month-day dates ("March 20", "20th of
/// March") take the turn's year, or the next year when already past;
/// relative ones are resolved against `at` (the turn's time, UTC):
/// "today"/"tonight"/"end of day" (that day), "tomorrow" (+1), "`<weekday>`"
/// or "by `<weekday>`" (the next such day, 1–7 days on), "this `<weekday>`"
/// (0–6 days on), "next `<weekday>`" (the one in the following week),
/// "in/within N days|weeks|business days", "end of (the) week" (the coming
/// Friday), "end of next week", "end of (the) month".
pub fn deadlines(text: &str, at: UnixNanos) -> Vec<String> {
    let today = day_of(at);
    let (year, _, _) = civil_from_days(today);
    let mut found: Vec<(usize, i64)> = Vec::new();

    for (pos, tok) in raw_token_spans(text) {
        if is_iso_date(tok) {
            let y: i64 = tok[..4].parse().unwrap_or(0);
            let m: u32 = tok[5..7].parse().unwrap_or(0);
            let d: u32 = tok[8..10].parse().unwrap_or(0);
            if valid_date(y, m, d) {
                found.push((pos, days_from_civil(y, m, d)));
            }
        }
    }

    let spans = word_spans(text);
    let w: Vec<&str> = spans.iter().map(|(_, s)| s.as_str()).collect();
    let at_word = |i: usize| w.get(i).copied().unwrap_or("");
    let end_of_week = |z: i64| {
        let wd = weekday(z);
        if wd <= 4 {
            z + (4 - wd)
        } else {
            z + (11 - wd)
        }
    };
    let mut i = 0;
    while i < w.len() {
        let pos = spans[i].0;
        let mut hit: Option<(i64, usize)> = None; // (day, words consumed)
        match w[i] {
            "today" | "tonight" | "eod" => hit = Some((today, 1)),
            "tomorrow" => {
                let after = i >= 2 && w[i - 1] == "after" && w[i - 2] == "day";
                hit = Some((today + if after { 2 } else { 1 }, 1));
            }
            "eow" => hit = Some((end_of_week(today), 1)),
            "end" if at_word(i + 1) == "of" => {
                let (k, rest) = if at_word(i + 2) == "the" {
                    (i + 3, 3)
                } else {
                    (i + 2, 2)
                };
                hit = match at_word(k) {
                    "day" => Some((today, rest + 1)),
                    "week" => Some((end_of_week(today), rest + 1)),
                    "next" if at_word(k + 1) == "week" => Some((end_of_week(today) + 7, rest + 2)),
                    "month" => {
                        let (y, m, _) = civil_from_days(today);
                        Some((days_from_civil(y, m, days_in_month(y, m)), rest + 1))
                    }
                    _ => None,
                };
            }
            "in" | "within" => {
                if let Some(n) = small_number(at_word(i + 1)) {
                    let unit = at_word(i + 2);
                    hit = match unit {
                        "day" | "days" => Some((today + n, 3)),
                        "week" | "weeks" => Some((today + 7 * n, 3)),
                        "business" | "working" if matches!(at_word(i + 3), "day" | "days") => {
                            Some((add_business_days(today, n), 4))
                        }
                        _ => None,
                    };
                }
            }
            word => {
                if let Some(wd) = WEEKDAYS.iter().position(|d| *d == word) {
                    let wd = i64::try_from(wd).unwrap_or(0);
                    let ahead = (wd - weekday(today)).rem_euclid(7);
                    let prev = if i > 0 { w[i - 1] } else { "" };
                    let days = match prev {
                        "this" => ahead,
                        "next" => {
                            let upcoming = if ahead == 0 { 7 } else { ahead };
                            // In this week (before Sunday) → the week after.
                            if weekday(today) + upcoming <= 6 {
                                upcoming + 7
                            } else {
                                upcoming
                            }
                        }
                        _ => {
                            if ahead == 0 {
                                7
                            } else {
                                ahead
                            }
                        }
                    };
                    hit = Some((today + days, 1));
                } else if let Some(m) = month_number(word) {
                    if let Some(d) = day_number_word(at_word(i + 1)) {
                        let y = at_word(i + 2)
                            .parse::<i64>()
                            .ok()
                            .filter(|y| (1900..3000).contains(y));
                        hit = month_day(year, today, m, d, y).map(|z| (z, 2));
                    }
                } else if let Some(d) = day_number_word(word) {
                    let (k, used) = if at_word(i + 1) == "of" {
                        (i + 2, 3)
                    } else {
                        (i + 1, 2)
                    };
                    if let Some(m) = month_number(at_word(k)) {
                        let y = at_word(k + 1)
                            .parse::<i64>()
                            .ok()
                            .filter(|y| (1900..3000).contains(y));
                        hit = month_day(year, today, m, d, y).map(|z| (z, used));
                    }
                }
            }
        }
        match hit {
            Some((z, used)) => {
                found.push((pos, z));
                i += used.max(1);
            }
            None => i += 1,
        }
    }
    found.sort_by_key(|&(pos, _)| pos);
    let mut out: Vec<String> = Vec::new();
    for (_, z) in found {
        let s = format_day(z);
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

fn month_day(year: i64, today: i64, m: u32, d: u32, explicit_year: Option<i64>) -> Option<i64> {
    if let Some(y) = explicit_year {
        return valid_date(y, m, d).then(|| days_from_civil(y, m, d));
    }
    if !valid_date(year, m, d) {
        return None;
    }
    let z = days_from_civil(year, m, d);
    if z >= today {
        Some(z)
    } else {
        valid_date(year + 1, m, d).then(|| days_from_civil(year + 1, m, d))
    }
}

fn raw_token_spans(text: &str) -> Vec<(usize, &str)> {
    raw_tokens(text)
        .into_iter()
        .map(|t| {
            // Every token is a slice of `text`; its offset is pointer
            // arithmetic on the same allocation.
            (t.as_ptr() as usize - text.as_ptr() as usize, t)
        })
        .collect()
}

/// The first deadline in `text` (see [`deadlines`]).
pub fn deadline(text: &str, at: UnixNanos) -> Option<String> {
    deadlines(text, at).into_iter().next()
}

// ---------------------------------------------------------------------------
// Classification
// ---------------------------------------------------------------------------

/// What a sentence (or a turn, by its most important sentence) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TurnKind {
    /// "Hi", "Good morning".
    Greeting,
    /// Asks something.
    Question,
    /// States something (the default).
    Answer,
    /// Commits to, requests or reports work.
    Action,
    /// Decides something.
    Decision,
    /// Reports a problem.
    Complaint,
    /// Says the problem is solved.
    Resolution,
    /// Thanks, okay, pleasantries.
    SmallTalk,
}

impl TurnKind {
    /// Importance in 0..=1: decisions, actions, resolutions and complaints
    /// matter most; greetings and small talk least. Statements that carry an
    /// identifier, amount or date count more than bare ones.
    pub fn importance(self, has_entity: bool) -> f32 {
        match self {
            TurnKind::Decision => 0.9,
            TurnKind::Action | TurnKind::Resolution | TurnKind::Complaint => 0.8,
            TurnKind::Question => 0.6,
            TurnKind::Answer if has_entity => 0.7,
            TurnKind::Answer => 0.5,
            TurnKind::Greeting | TurnKind::SmallTalk => 0.1,
        }
    }
}

/// Threshold of importance for a sentence to become a key point.
pub const KEY_POINT_IMPORTANCE: f32 = 0.6;

/// Everything the engine asks of one sentence, computed from a single
/// normalization (each flag is the matching `is_*` rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cues {
    /// [`is_open_question`].
    pub open_question: bool,
    /// [`is_answer_like`].
    pub answer_like: bool,
    /// [`is_decision`].
    pub decision: bool,
    /// [`is_reversal`].
    pub reversal: bool,
    /// [`is_completion`].
    pub completion: bool,
    /// [`is_resolution`].
    pub resolution: bool,
    /// [`is_acceptance`].
    pub acceptance: bool,
    /// [`is_agreement`].
    pub agreement: bool,
    /// [`is_filler`].
    pub filler: bool,
    /// [`is_reason`].
    pub reason: bool,
    /// A commitment or a request: worth asking [`action_cue`].
    pub maybe_action: bool,
}

/// A classified sentence.
#[derive(Debug, Clone, PartialEq)]
pub struct Classified<'a> {
    /// The sentence (a slice of the turn).
    pub text: &'a str,
    /// What it does.
    pub kind: TurnKind,
    /// How much it matters, 0..=1.
    pub importance: f32,
    /// The rule flags.
    pub cues: Cues,
    /// Its [`content_words`].
    pub content: BTreeSet<String>,
}

/// Classifies one sentence. Order matters: a request ("can you…?") is an
/// action before it is a question; a question is not a decision or a
/// completion ("Is it fixed?"); complaints beat greetings ("Hi, my card
/// was charged twice").
pub fn classify_sentence(sentence: &str) -> TurnKind {
    kind_of(sentence, &Norm::new(sentence))
}

fn kind_of(sentence: &str, n: &Norm) -> TurnKind {
    if n.words.is_empty() {
        return TurnKind::SmallTalk;
    }
    if request(sentence, n).is_some() {
        return TurnKind::Action;
    }
    if is_question_norm(sentence, n) {
        return if is_small_talk_norm(n) {
            TurnKind::SmallTalk
        } else {
            TurnKind::Question
        };
    }
    if is_decision_norm(n) || is_reversal_norm(n) {
        return TurnKind::Decision;
    }
    if is_resolution_norm(n) {
        return TurnKind::Resolution;
    }
    if is_completion_norm(n) || is_commitment_norm(n) {
        return TurnKind::Action;
    }
    if is_complaint_norm(n) {
        return TurnKind::Complaint;
    }
    if is_greeting_norm(n) {
        return TurnKind::Greeting;
    }
    if is_small_talk_norm(n) {
        return TurnKind::SmallTalk;
    }
    TurnKind::Answer
}

/// Classifies a sentence, scores it and computes its cues.
pub fn classify(sentence: &str) -> Classified<'_> {
    let n = Norm::new(sentence);
    let kind = kind_of(sentence, &n);
    let cues = Cues {
        open_question: is_open_question_n(sentence, &n),
        answer_like: is_answer_like_n(sentence, &n),
        decision: is_decision_n(sentence, &n),
        reversal: is_reversal_n(sentence, &n),
        completion: is_completion_n(sentence, &n),
        resolution: is_resolution_n(sentence, &n),
        acceptance: is_acceptance_n(sentence, &n),
        agreement: is_agreement_n(sentence, &n),
        filler: is_filler_n(&n),
        reason: is_reason_n(&n),
        // Commitments, requests, and "<Name> will/to…" (see `action_cue`).
        maybe_action: is_commitment_norm(&n)
            || request(sentence, &n).is_some()
            || n.words.get(1).is_some_and(|w| {
                matches!(
                    w.as_str(),
                    "will" | "to" | "needs" | "is" | "should" | "must"
                )
            }),
    };
    Classified {
        text: sentence,
        kind,
        importance: kind.importance(has_fact_entity(sentence)),
        cues,
        content: content_of(&n),
    }
}

/// Classifies a turn's text: every sentence, and the turn's kind is that of
/// its most important sentence (the first one on ties).
pub fn classify_text(text: &str) -> (TurnKind, Vec<Classified<'_>>) {
    let all: Vec<Classified<'_>> = sentences(text).into_iter().map(classify).collect();
    let mut best: Option<&Classified<'_>> = None;
    for c in &all {
        if best.is_none_or(|b| c.importance > b.importance) {
            best = Some(c);
        }
    }
    (best.map_or(TurnKind::SmallTalk, |b| b.kind), all)
}

/// Whether the sentence says nothing: only filler, thanks or pleasantries.
pub fn is_filler(sentence: &str) -> bool {
    is_filler_n(&Norm::new(sentence))
}

fn is_filler_n(n: &Norm) -> bool {
    n.words.is_empty() || (is_small_talk_norm(n) || is_greeting_norm(n)) && content_of(n).len() <= 1
}

const GREETINGS: &[&str] = &[
    "hi",
    "hello",
    "hey",
    "good morning",
    "good afternoon",
    "good evening",
    "greetings",
    "howdy",
    "welcome",
    "hiya",
];

fn is_greeting_norm(n: &Norm) -> bool {
    GREETINGS.iter().any(|g| n.starts_with(g)) && n.words.len() <= 8
}

const SMALL_TALK: &[&str] = &[
    "thank you",
    "thanks",
    "how are you",
    "nice to meet",
    "have a nice day",
    "have a great day",
    "have a good day",
    "you're welcome",
    "no problem",
    "no worries",
    "sounds good",
    "ok",
    "okay",
    "cool",
    "great",
    "awesome",
    "perfect",
    "bye",
    "goodbye",
    "anything else",
    "is there anything",
    "how can i help",
    "how may i help",
    "what can i do for you",
    "happy to help",
    "glad to help",
    "let me know if",
    "appreciate it",
    "got it",
    "understood",
    "sure",
];

fn is_small_talk_norm(n: &Norm) -> bool {
    let content: usize = n
        .words
        .iter()
        .filter(|w| !is_stopword(w) && w.chars().count() >= 3)
        .count();
    content == 0 || n.has_any(SMALL_TALK) && content <= 2
}

/// Whether the turn's text closes the conversation ("bye", "that's all").
pub fn is_closing(text: &str) -> bool {
    Norm::new(text).has_any(&[
        "bye",
        "goodbye",
        "good bye",
        "talk soon",
        "talk to you later",
        "have a great day",
        "have a nice day",
        "have a good day",
        "have a good one",
        "that's all",
        "that is all",
        "thanks for your help",
        "thank you for your help",
        "thanks for the help",
        "see you",
        "take care",
        "closing the session",
        "closing this session",
        "end the session",
        "signing off",
    ])
}

const COMPLAINTS: &[&str] = &[
    "problem",
    "issue",
    "issues",
    "broken",
    "wrong",
    "not working",
    "doesn't work",
    "does not work",
    "isn't working",
    "error",
    "errors",
    "charged twice",
    "double charged",
    "duplicate charge",
    "failed",
    "failing",
    "fails",
    "can't",
    "cannot",
    "unable",
    "frustrated",
    "frustrating",
    "disappointed",
    "bug",
    "crash",
    "crashes",
    "crashed",
    "outage",
    "unacceptable",
    "still waiting",
    "never arrived",
    "missing",
    "overcharged",
    "incorrect",
];

fn is_complaint_norm(n: &Norm) -> bool {
    n.has_any(COMPLAINTS)
}

/// Whether a sentence reports a problem.
pub fn is_complaint(sentence: &str) -> bool {
    is_complaint_norm(&Norm::new(sentence))
}

fn is_resolution_norm(n: &Norm) -> bool {
    !has_negation(n)
        && n.has_any(&[
            "resolved",
            "that works",
            "it works",
            "everything works",
            "all set",
            "that solves",
            "solves my",
            "solved",
            "works now",
            "working now",
            "problem solved",
            "that did it",
            "that did the trick",
            "that fixed it",
            "fixed it",
            "issue is fixed",
            "problem is fixed",
        ])
}

/// Whether a sentence says the problem is solved.
pub fn is_resolution(sentence: &str) -> bool {
    is_resolution_n(sentence, &Norm::new(sentence))
}

fn is_resolution_n(sentence: &str, n: &Norm) -> bool {
    !is_question_norm(sentence, n) && is_resolution_norm(n)
}

fn has_negation(n: &Norm) -> bool {
    n.words
        .iter()
        .any(|w| w.ends_with("n't") || matches!(w.as_str(), "not" | "never" | "cannot"))
}

// ---------------------------------------------------------------------------
// Questions
// ---------------------------------------------------------------------------

const WH_WORDS: &[&str] = &[
    "what", "when", "where", "who", "whom", "whose", "which", "why", "how",
];
const AUX_WORDS: &[&str] = &[
    "is", "are", "was", "were", "do", "does", "did", "can", "could", "would", "will", "should",
    "shall", "may", "have", "has", "had", "am", "isn't", "aren't", "don't", "doesn't", "didn't",
];
const SUBJECTS: &[&str] = &[
    "you", "we", "i", "there", "they", "he", "she", "anyone", "someone", "anybody", "somebody",
    "the", "this", "that", "these", "those", "my", "our", "your", "his", "her", "its", "it",
];

fn is_question_norm(sentence: &str, n: &Norm) -> bool {
    let t = sentence.trim_end_matches(['"', '\'', ')', ' ']);
    if t.ends_with('?') {
        return true;
    }
    if t.ends_with(['.', '!']) {
        return false;
    }
    let first = n.words.first().map_or("", String::as_str);
    let second = n.words.get(1).map_or("", String::as_str);
    WH_WORDS.contains(&first)
        || AUX_WORDS.contains(&first) && SUBJECTS.contains(&second) && second != "it"
}

/// Whether a sentence asks something: it ends with '?', or it starts with a
/// wh-word, or with an auxiliary followed by a subject ("do you…"), and has
/// no other end mark.
pub fn is_question(sentence: &str) -> bool {
    is_question_norm(sentence, &Norm::new(sentence))
}

/// Whether a question is worth tracking: a real question with content, not
/// a request (which is an action), nor a pleasantry ("How are you?",
/// "Anything else I can help with?").
pub fn is_open_question(sentence: &str) -> bool {
    is_open_question_n(sentence, &Norm::new(sentence))
}

fn is_open_question_n(sentence: &str, n: &Norm) -> bool {
    is_question_norm(sentence, n)
        && request(sentence, n).is_none()
        && !is_small_talk_norm(n)
        && !content_of(n).is_empty()
}

/// Replies that say the answer is not known: the question stays open.
const NON_ANSWERS: &[&str] = &[
    "don't know",
    "do not know",
    "not sure",
    "no idea",
    "can't tell",
    "cannot tell",
    "not yet",
    "don't have",
    "do not have",
    "not me",
    "unclear",
    "no clue",
    "can't say",
    "cannot say",
    "i'd need",
    "need to check",
    "find out",
    "good question",
    "great question",
    "no one knows",
    "nobody knows",
    "not certain",
    "can't confirm",
    "cannot confirm",
    // Deferrals: someone will find out, nobody has yet.
    "looking into",
    "look into it",
    "let me check",
    "will check",
    "get back to you",
    "investigating",
    "checking on",
];

/// Whether a sentence can answer a question: a statement (not a question,
/// not a commitment to find out later) with content, or a plain yes/no.
pub fn is_answer_like(sentence: &str) -> bool {
    is_answer_like_n(sentence, &Norm::new(sentence))
}

fn is_answer_like_n(sentence: &str, n: &Norm) -> bool {
    if n.words.is_empty()
        || is_question_norm(sentence, n)
        || is_commitment_norm(n)
        || n.has_any(NON_ANSWERS)
    {
        return false;
    }
    let yes_no = [
        "yes",
        "no",
        "yeah",
        "yep",
        "nope",
        "correct",
        "exactly",
        "right",
        "confirmed",
    ]
    .contains(&n.words[0].as_str());
    yes_no || !is_small_talk_norm(n) && !is_greeting_norm(n)
}

// ---------------------------------------------------------------------------
// Actions and owners
// ---------------------------------------------------------------------------

/// Who owns an action, as far as the sentence tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnerCue {
    /// The speaker ("I will…", "we'll…").
    Speaker,
    /// The person spoken to, not named ("can you…", "please…").
    Addressee,
    /// Named: a vocative ("Bob, can you…"), a mention ("@bob") or a known
    /// participant as subject ("Alice will…", "Alice to…"). The name as
    /// written, or the participant id when it matches one.
    Named(String),
    /// Nobody ("next step is…", "waiting for…").
    Unassigned,
}

/// Verbs of a request that asks for information, not work: "can you tell
/// me…?" is a question; "can you send the file?" is an action.
const INFO_VERBS: &[&str] = &[
    "tell", "give", "confirm", "provide", "share", "clarify", "explain", "describe", "specify",
    "remind", "advise", "let", "repeat", "spell", "help", "say", "answer",
];

/// Verbs after "please" that ask for patience, not work.
const NON_TASK_VERBS: &[&str] = &[
    "let", "note", "hold", "wait", "be", "feel", "see", "accept", "allow", "bear", "find", "stand",
    "keep", "enjoy",
];

/// Words that start sentences with a comma but are not names.
const DISCOURSE_WORDS: &[&str] = &[
    "yes",
    "no",
    "ok",
    "okay",
    "sure",
    "thanks",
    "well",
    "also",
    "so",
    "actually",
    "hi",
    "hello",
    "hey",
    "great",
    "alright",
    "right",
    "now",
    "then",
    "first",
    "next",
    "finally",
    "please",
    "however",
    "otherwise",
    "fine",
    "perfect",
    "cool",
    "agreed",
    "done",
    "honestly",
    "unfortunately",
    "sorry",
    "besides",
    "again",
    "anyway",
    "yeah",
    "yep",
    "nope",
    "oh",
    "um",
    "uh",
    "wait",
    "look",
    "listen",
    "good",
    "today",
    "tomorrow",
    "meanwhile",
    "instead",
    "awesome",
    "understood",
    "noted",
    "sounds",
    "got",
    "sir",
    "madam",
    "team",
    "everyone",
    "all",
    "guys",
    "folks",
    "friends",
    "note",
    "btw",
    "thank",
    "but",
    "and",
    "or",
    "if",
    "once",
    "when",
];

/// Resolves a written name to a participant id (case-insensitive; also
/// "bob" for "bob.smith" or "bob-7"), or returns it as written.
pub fn resolve_name(name: &str, participants: &[String]) -> String {
    let lower = name.trim_start_matches('@').to_lowercase();
    for p in participants {
        let pl = p.to_lowercase();
        if pl == lower {
            return p.clone();
        }
    }
    for p in participants {
        let pl = p.to_lowercase();
        if pl.starts_with(&lower) && pl[lower.len()..].starts_with(|c: char| !c.is_alphanumeric()) {
            return p.clone();
        }
    }
    name.trim_start_matches('@').to_string()
}

fn matches_participant(name: &str, participants: &[String]) -> bool {
    let lower = name.to_lowercase();
    participants.iter().any(|p| {
        let pl = p.to_lowercase();
        pl == lower
            || pl.starts_with(&lower)
                && pl[lower.len()..].starts_with(|c: char| !c.is_alphanumeric())
    })
}

/// A vocative at the start of a sentence: one or two capitalized words
/// (or an "@name") before the first comma, after an optional greeting
/// ("Hey Bob, …"). Returns the name and the rest of the sentence.
fn vocative(sentence: &str) -> Option<(&str, &str)> {
    let s = sentence.trim();
    let comma = s.find(',')?;
    let mut head = s[..comma].trim();
    for g in ["Hey ", "Hi ", "Hello ", "OK ", "Ok ", "Okay ", "So "] {
        if let Some(rest) = head.strip_prefix(g) {
            head = rest.trim();
        }
    }
    let parts: Vec<&str> = head.split_whitespace().collect();
    let name_like = |w: &str| {
        w.chars()
            .next()
            .is_some_and(|c| c.is_uppercase() || c == '@')
            && w.chars()
                .all(|c| c.is_alphanumeric() || "-_.@'".contains(c))
            && !DISCOURSE_WORDS.contains(&w.trim_start_matches('@').to_lowercase().as_str())
    };
    ((1..=2).contains(&parts.len()) && parts.iter().all(|w| name_like(w)))
        .then(|| (head.trim_start_matches('@'), &s[comma + 1..]))
}

/// The first "@name" mention of a sentence, without the '@'.
fn mention(sentence: &str) -> Option<&str> {
    sentence.split_whitespace().find_map(|tok| {
        let name = tok
            .strip_prefix('@')?
            .trim_end_matches(|c: char| !c.is_alphanumeric());
        (!name.is_empty() && !name.contains('@')).then_some(name)
    })
}

/// The name a sentence addresses: "Bob, can you…", "Hey Bob, please…",
/// or an "@bob" mention anywhere. Returns the name as written (without
/// the '@').
pub fn addressed_name(sentence: &str) -> Option<&str> {
    vocative(sentence)
        .map(|(name, _)| name)
        .or_else(|| mention(sentence))
}

/// The request in a sentence ("can you…", "could you…", "please…"),
/// unless it only asks for information. Returns who is asked.
fn request(sentence: &str, n: &Norm) -> Option<OwnerCue> {
    // Skip a vocative so "Bob, can you…" reads as "can you…".
    let (named, body) = match vocative(sentence) {
        Some((name, rest)) => (Some(name), rest),
        // "@bob please…": the mention leads like a vocative.
        None => match sentence.trim_start().strip_prefix('@') {
            Some(rest) => (
                mention(sentence),
                rest.split_once(' ').map_or("", |(_, r)| r),
            ),
            None => (mention(sentence), sentence),
        },
    };
    let body_words = words(body);
    let w = |i: usize| body_words.get(i).map_or("", String::as_str);
    let verb_at = match (w(0), w(1)) {
        ("can" | "could" | "would" | "will", "you" | "u") => 2,
        ("can" | "could", "someone" | "anyone" | "somebody") => 2,
        ("please", _) => 1,
        // "Raj, add the index…": a name, then a bare verb.
        (first, _) if named.is_some() && vocative(sentence).is_some() && !first.is_empty() => {
            if is_stopword(first) || first.ends_with("ing") || first.ends_with("ed") {
                return None;
            }
            0
        }
        _ => return None,
    };
    // "could you please send" → the verb after "please".
    let verb_at = if w(verb_at) == "please" {
        verb_at + 1
    } else {
        verb_at
    };
    let verb = w(verb_at);
    if verb.is_empty() || INFO_VERBS.contains(&verb) || has_negation(n) {
        return None;
    }
    if w(0) == "please" && NON_TASK_VERBS.contains(&verb) {
        return None;
    }
    // "Can you see the charge?" asks about a state, not for work.
    if [
        "see", "hear", "be", "believe", "imagine", "access", "remember", "read",
    ]
    .contains(&verb)
    {
        return None;
    }
    if matches!(w(1), "someone" | "anyone" | "somebody") {
        return Some(OwnerCue::Unassigned);
    }
    Some(match named {
        Some(name) => OwnerCue::Named(name.to_string()),
        None => OwnerCue::Addressee,
    })
}

const COMMITMENTS: &[&str] = &[
    "i will",
    "i'll",
    "i'm going to",
    "i am going to",
    "i'm gonna",
    "i shall",
    "we will",
    "we'll",
    "we're going to",
    "we are going to",
    "let me",
    "i need to",
    "we need to",
    "you need to",
    "need to",
    "needs to",
    "will follow up",
    "follow up",
    "get back to",
    "waiting for",
    "waiting on",
    "next step",
    "next steps",
    "action item",
    "todo",
    "to do",
    "i'll check",
    "let's schedule",
    "let's meet",
    "let's set up",
    "let's plan",
    "let's review",
    "let's sync",
    "let's follow up",
    "let's circle back",
];

fn is_commitment_norm(n: &Norm) -> bool {
    let Some(pos) = n.find_any(COMMITMENTS) else {
        return false;
    };
    // "let me know" asks the other party for information.
    if n.has("let me know") && n.find("let me know") == Some(pos) {
        return false;
    }
    // "I won't", "we will not" — a refusal is not a commitment.
    if n.has_any(&[
        "won't",
        "will not",
        "not going to",
        "don't need to",
        "no need to",
        "will never",
    ]) {
        return false;
    }
    // A commitment to decide ("we'll use Postgres") is a decision.
    if is_decision_norm(n) {
        return false;
    }
    true
}

/// Whether a sentence commits someone to do something.
pub fn is_commitment(sentence: &str) -> bool {
    is_commitment_norm(&Norm::new(sentence))
}

/// A pending action found in a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionCue {
    /// Who owns it.
    pub owner: OwnerCue,
}

/// The pending action in a sentence, if it commits someone ("I'll check
/// the log", "will follow up", "get back to you", "waiting for…", "next
/// step…", "need to…") or asks someone for work ("Bob, can you send the
/// deck?", "please restart the router"). Questions that only ask for
/// information, refusals and bare acceptances ("Will do.") are not actions.
/// `participants` are the known speaker ids, to recognise "Alice will…".
pub fn action_cue(sentence: &str, participants: &[String]) -> Option<ActionCue> {
    let n = Norm::new(sentence);
    if let Some(owner) = request(sentence, &n) {
        let owner = match owner {
            OwnerCue::Named(name) => OwnerCue::Named(resolve_name(&name, participants)),
            o => o,
        };
        return Some(ActionCue { owner });
    }
    if is_question_norm(sentence, &n) {
        return None;
    }
    if let Some(owner) = participant_subject(sentence, &n, participants) {
        if !has_negation(&n) && !is_decision_norm(&n) && n.words.len() > 2 {
            return Some(ActionCue { owner });
        }
    }
    if !is_commitment_norm(&n) {
        return None;
    }
    // A bare acceptance carries no action of its own.
    let cue_words: BTreeSet<&str> = [
        "will", "do", "follow", "up", "get", "back", "need", "needs", "next", "step", "steps",
        "waiting", "action", "item", "todo", "going", "let", "check", "sure",
    ]
    .into_iter()
    .collect();
    let substantive = content_words(sentence)
        .iter()
        .any(|w| !cue_words.contains(w.as_str()) || w == "check");
    if !substantive && !n.has_any(&["i'll check", "get back to", "follow up", "let me check"]) {
        return None;
    }
    let owner = owner_of_commitment(sentence, &n, participants);
    Some(ActionCue { owner })
}

/// "Alice will…", "Alice to draft…", "Alice needs to…": a known
/// participant as the subject. Unknown capitalized words are not taken:
/// they are too often nouns ("Refund will be processed").
fn participant_subject(sentence: &str, n: &Norm, participants: &[String]) -> Option<OwnerCue> {
    let first = sentence
        .trim_start_matches(|c: char| !c.is_alphanumeric() && c != '@')
        .split(|c: char| c.is_whitespace() || c == ',' || c == ':')
        .next()
        .unwrap_or("");
    let first_lower = first.trim_start_matches('@').to_lowercase();
    let second = n.words.get(1).map_or("", String::as_str);
    (!first.is_empty()
        && matches_participant(first.trim_start_matches('@'), participants)
        && !is_stopword(&first_lower)
        && matches!(second, "will" | "to" | "needs" | "is" | "should" | "must"))
    .then(|| OwnerCue::Named(resolve_name(first, participants)))
}

fn owner_of_commitment(sentence: &str, n: &Norm, participants: &[String]) -> OwnerCue {
    if let Some(name) = addressed_name(sentence) {
        if sentence.contains(&format!("@{name}")) || matches_participant(name, participants) {
            return OwnerCue::Named(resolve_name(name, participants));
        }
    }
    if let Some(owner) = participant_subject(sentence, n, participants) {
        return owner;
    }
    let first_person = [
        "i", "i'll", "i'm", "i've", "we", "we'll", "we're", "let", "i'd",
    ];
    if n.has_any(&[
        "you need to",
        "you'll need to",
        "you will need to",
        "you should",
    ]) {
        return OwnerCue::Addressee;
    }
    if n.words.iter().any(|w| first_person.contains(&w.as_str()))
        && !n.has("let me know")
        && !n.has("let's")
    {
        return OwnerCue::Speaker;
    }
    OwnerCue::Unassigned
}

/// Splits a sentence addressed to several people into one clause each:
/// "Marco, please prepare X, and Lee, rerun Y" → two clauses. A clause
/// break is ", and " or "; " followed by a vocative; otherwise the
/// sentence is one clause. Clauses are slices of the sentence.
pub fn clauses(sentence: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut search = 0;
    while let Some((at, sep)) = [", and ", "; and ", "; "]
        .iter()
        .filter_map(|sep| sentence[search..].find(sep).map(|i| (search + i, *sep)))
        .min()
    {
        let rest = &sentence[at + sep.len()..];
        if vocative(rest).is_some() {
            out.push(sentence[start..at].trim());
            start = at + sep.len();
        }
        search = at + sep.len();
    }
    out.push(sentence[start..].trim());
    out.retain(|c| !c.is_empty());
    out
}

/// Whether a sentence accepts or starts work without naming it ("Will
/// do.", "On it.", "Working on it."): the speaker's latest action is now in
/// progress.
pub fn is_acceptance(sentence: &str) -> bool {
    is_acceptance_n(sentence, &Norm::new(sentence))
}

fn is_acceptance_n(sentence: &str, n: &Norm) -> bool {
    !is_question_norm(sentence, n)
        && !has_negation(n)
        && (is_started_n(n)
            || n.has_any(&[
                "will do",
                "i'll do it",
                "i'll do that",
                "i'll take care of it",
                "i'll handle it",
                "i'll look into it",
            ]))
}

/// Whether an acceptance says the work has started ("On it", "Working on
/// it"), not only that it will be done ("Will do" keeps it PENDING).
pub fn is_started(sentence: &str) -> bool {
    is_started_n(&Norm::new(sentence))
}

fn is_started_n(n: &Norm) -> bool {
    n.has_any(&[
        "on it",
        "i'm on it",
        "working on it",
        "in progress",
        "started on",
        "starting on",
        "looking into it",
        "started working",
    ])
}

/// What an action waits for: the clause after "after", "once", "waiting
/// for/on", "depends on", "blocked by/on", "as soon as", "pending" — a
/// slice of the sentence up to the next comma or end, at most eight words.
pub fn depends_on(sentence: &str) -> Vec<&str> {
    const MARKERS: &[&str] = &[
        "waiting for",
        "waiting on",
        "depends on",
        "blocked by",
        "blocked on",
        "as soon as",
        "once",
        "after",
        "pending",
    ];
    let lower = sentence.to_lowercase();
    // Lower-casing may change byte lengths for some scripts; then offsets
    // would not line up, so only work on text where they match.
    if lower.len() != sentence.len() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for m in MARKERS {
        let mut from = 0;
        while let Some(i) = lower[from..].find(m) {
            let at = from + i;
            from = at + m.len();
            let before_ok = at == 0 || !lower.as_bytes()[at - 1].is_ascii_alphanumeric();
            let after_ok = lower
                .as_bytes()
                .get(at + m.len())
                .is_some_and(|b| *b == b' ');
            if !before_ok || !after_ok {
                continue;
            }
            let rest = &sentence[at + m.len()..];
            let end = rest
                .find([',', ';', '.', '!', '?'])
                .map_or(rest.len(), |e| {
                    // Keep dots inside tokens ("v1.2", "$49.99").
                    let mut e = e;
                    while rest.as_bytes().get(e) == Some(&b'.')
                        && rest
                            .as_bytes()
                            .get(e + 1)
                            .is_some_and(|b| !b.is_ascii_whitespace())
                    {
                        e = rest[e + 1..]
                            .find([',', ';', '.', '!', '?'])
                            .map_or(rest.len(), |x| e + 1 + x);
                    }
                    e
                });
            let clause = rest[..end].trim();
            let clause = if clause.split_whitespace().count() > 8 {
                let mut idx = clause.len();
                for (k, (i, _)) in clause.match_indices(' ').enumerate() {
                    if k == 7 {
                        idx = i;
                        break;
                    }
                }
                &clause[..idx]
            } else {
                clause
            };
            // "after that" / "once done" name nothing.
            if !content_words(clause).is_empty() && !out.contains(&clause) {
                out.push(clause);
            }
        }
    }
    out
}

/// Priority words: "urgent", "asap", "critical", "blocking" → HIGH; "when
/// you can", "low priority", "nice to have" → LOW; else MEDIUM.
pub fn priority(text: &str) -> Priority {
    let n = Norm::new(text);
    if n.has_any(&[
        "urgent",
        "urgently",
        "asap",
        "critical",
        "blocking",
        "blocker",
        "immediately",
        "high priority",
        "right away",
        "p0",
        "p1",
        "emergency",
        "top priority",
    ]) {
        Priority::High
    } else if n.has_any(&[
        "when you can",
        "low priority",
        "nice to have",
        "no rush",
        "whenever",
        "eventually",
        "if you have time",
        "not urgent",
        "someday",
        "p3",
    ]) {
        Priority::Low
    } else {
        Priority::Medium
    }
}

// ---------------------------------------------------------------------------
// Completion
// ---------------------------------------------------------------------------

const COMPLETIONS: &[&str] = &[
    "connected",
    "installed",
    "added",
    "granted",
    "entered",
    "throttled",
    "rotated",
    "renewed",
    "enabled",
    "disabled",
    "removed",
    "configured",
    "migrated",
    "killed",
    "applied",
    "emailed",
    "filed",
    "logged off",
    "it works",
    "all done",
    "that's done",
    "done",
    "completed",
    "complete",
    "fixed",
    "sent",
    "processed",
    "resolved",
    "finished",
    "shipped",
    "delivered",
    "deployed",
    "merged",
    "submitted",
    "uploaded",
    "taken care of",
    "i've initiated",
    "i have initiated",
    "went through",
    "came through",
    "refunded",
    "cancelled",
    "canceled",
    "updated",
    "created",
    "booked",
    "paid",
    "issued",
    "closed",
    "handled",
    "restarted",
    "reset",
    "approved",
];

/// Words that, before a completion word, make it future or conditional.
const NOT_YET: &[&str] = &[
    "will", "i'll", "we'll", "it'll", "you'll", "they'll", "once", "if", "when", "after", "until",
    "before", "going", "should", "could", "would", "can", "need", "needs", "please", "must",
    "whether", "soon",
];

fn is_completion_norm(n: &Norm) -> bool {
    let Some(pos) = n.find_any(COMPLETIONS) else {
        return false;
    };
    if has_negation(n) {
        return false;
    }
    let before = &n.words[..pos];
    // "needs to be processed", "yet to get done": not done.
    let to_be = before.len() >= 2
        && before[before.len() - 2] == "to"
        && matches!(before[before.len() - 1].as_str(), "be" | "get");
    !to_be && !before.iter().any(|w| NOT_YET.contains(&w.as_str()))
}

/// Whether a sentence reports work done ("Done.", "The refund has been
/// processed.", "I've sent the invoice"), not future or conditional ("once
/// it is done") and not negated ("not fixed yet").
pub fn is_completion(sentence: &str) -> bool {
    is_completion_n(sentence, &Norm::new(sentence))
}

fn is_completion_n(sentence: &str, n: &Norm) -> bool {
    !is_question_norm(sentence, n) && is_completion_norm(n)
}

// ---------------------------------------------------------------------------
// Decisions
// ---------------------------------------------------------------------------

const DECISIONS: &[&str] = &[
    "we decided",
    "we've decided",
    "we have decided",
    "i decided",
    "i've decided",
    "i have decided",
    "decided to",
    "decision is",
    "final decision",
    "our decision",
    "i'll take the",
    "we'll take the",
    "i will take the",
    "we will take the",
    "approving",
    "approved",
    "decided",
    "let's go with",
    "lets go with",
    "let's use",
    "we'll use",
    "we will use",
    "we'll go with",
    "we will go with",
    "we're going with",
    "we are going with",
    "going with",
    "agreed to",
    "we agreed",
    "we agree",
    "i approve",
    "is approved",
    "are approved",
    "let's do",
    "let's proceed",
    "yes proceed",
    "go ahead with",
    "we'll stick with",
    "let's stick with",
    "let's switch to",
    "we'll switch to",
    "settled on",
    "we chose",
    "we've chosen",
    "let's not",
    "let's keep",
    "let's drop",
    "let's pick",
    "let's choose",
    "let's adopt",
    "we'll go ahead",
    "please proceed",
];

/// Verbs after "let's" that plan work rather than decide.
const LETS_PLANNING: &[&str] = &[
    "schedule", "meet", "set", "plan", "review", "sync", "follow", "circle", "check", "see",
    "talk", "discuss", "look", "get", "try", "find", "figure", "think", "recap", "regroup",
];

/// Sentence-initial verbs that change a state on the spot ("Escalating
/// to SEV-1", "Downgrading INC-4521 to SEV-3").
const STATE_CHANGES: &[&str] = &[
    "escalating",
    "downgrading",
    "upgrading",
    "raising",
    "lowering",
    "switching",
    "reverting",
    "postponing",
    "pausing",
    "freezing",
    "approving",
    "rejecting",
];

/// Word index where a sentence decides something, if it does.
fn decision_position(n: &Norm) -> Option<usize> {
    if let Some(pos) = n.find_any(DECISIONS) {
        return Some(pos);
    }
    // "let's <verb>" decides, unless the verb plans more talk or work.
    if let Some(pos) = n.find("let's") {
        let verb = n.words.get(pos + 1).map_or("", String::as_str);
        if !verb.is_empty() && !LETS_PLANNING.contains(&verb) {
            return Some(pos);
        }
    }
    // "Decision: …", "Decided then: …", "Escalating to…", "LGTM".
    let first = n.words.first().map_or("", String::as_str);
    if matches!(first, "decision" | "decided" | "lgtm") || STATE_CHANGES.contains(&first) {
        return Some(0);
    }
    // "Yes, use the staging bucket", "OK, book that one": a choice.
    let second = n.words.get(1).map_or("", String::as_str);
    let assent = ["yes", "ok", "okay", "fine", "sure", "alright", "then"];
    let choose = [
        "use", "book", "take", "pick", "choose", "go", "proceed", "keep", "ship",
    ];
    if assent.contains(&first) && choose.contains(&second) {
        return Some(1);
    }
    n.find_any(&[
        "book that",
        "book it",
        "go with that",
        "use that",
        "take that one",
    ])
}

fn is_decision_norm(n: &Norm) -> bool {
    if let Some(pos) = decision_position(n) {
        // "no decision yet" / "haven't decided" are not decisions, nor is
        // a condition ("once it is approved", "if we decide to…").
        let conditional = n.words[..pos].iter().any(|w| {
            matches!(
                w.as_str(),
                "if" | "once" | "when" | "whether" | "until" | "unless" | "after"
            )
        });
        return !conditional
            && !n.has_any(&[
                "no decision",
                "not decided",
                "haven't decided",
                "undecided",
                "decision yet",
            ]);
    }
    // "Agreed, we ship Monday." decides; a bare "Agreed." only agrees.
    n.has("agreed") && content_words(&n.text).len() >= 2
}

/// Whether a sentence states a decision ("we decided…", "let's go with…",
/// "we'll use…", "I approve…", "final decision…").
pub fn is_decision(sentence: &str) -> bool {
    is_decision_n(sentence, &Norm::new(sentence))
}

fn is_decision_n(sentence: &str, n: &Norm) -> bool {
    !is_question_norm(sentence, n) && is_decision_norm(n)
}

/// Why a decision was made: the clause from "because", "since", "so that",
/// "due to" or "as it" to the end of the sentence (a slice of it).
pub fn rationale(sentence: &str) -> Option<&str> {
    let lower = sentence.to_lowercase();
    if lower.len() != sentence.len() {
        return None;
    }
    let mut best: Option<usize> = None;
    for m in [
        " because ",
        " since ",
        " so that ",
        " due to ",
        " as it ",
        "because ",
        "since ",
    ] {
        if let Some(i) = lower.find(m) {
            // A sentence-initial marker only at position 0 ("Because…").
            if !m.starts_with(' ') && i != 0 {
                continue;
            }
            // "since Monday" is a time, not a reason.
            let next = lower[i + m.len()..].split_whitespace().next().unwrap_or("");
            if m.trim() == "since"
                && (WEEKDAYS.contains(&next)
                    || month_number(next).is_some()
                    || next.chars().any(|c| c.is_ascii_digit())
                    || next == "yesterday"
                    || next == "last")
            {
                continue;
            }
            let start = if m.starts_with(' ') { i + 1 } else { i };
            best = Some(best.map_or(start, |b: usize| b.min(start)));
        }
    }
    let start = best?;
    let clause = sentence[start..].trim().trim_end_matches(['.', '!', ';']);
    (!content_words(clause).is_empty()).then_some(clause)
}

/// Whether a sentence starts with a reason for what came before ("Because
/// it is cheaper.", "The reason is…").
pub fn is_reason(sentence: &str) -> bool {
    is_reason_n(&Norm::new(sentence))
}

fn is_reason_n(n: &Norm) -> bool {
    n.starts_with("because") || n.starts_with("that's because") || n.starts_with("the reason")
}

const STRONG_REVERSALS: &[&str] = &[
    "reverse the decision",
    "reversing the decision",
    "scratch that",
    "change of plan",
    "change of plans",
    "on second thought",
    "never mind",
    "nevermind",
    "let's not",
    "cancel that",
    "changed my mind",
    "change my mind",
    "we won't",
    "not anymore",
    "reverse that",
    "revert that",
    "forget that",
    "no longer",
];

fn is_reversal_norm(n: &Norm) -> bool {
    n.has_any(STRONG_REVERSALS)
        || n.has_any(&["actually", "instead", "rather than", "rather"])
            && decision_position(n).is_some()
}

/// Whether a sentence takes back an earlier decision ("actually, let's
/// not…", "…instead", "scratch that", "change of plan").
pub fn is_reversal(sentence: &str) -> bool {
    is_reversal_n(sentence, &Norm::new(sentence))
}

fn is_reversal_n(sentence: &str, n: &Norm) -> bool {
    !is_question_norm(sentence, n) && is_reversal_norm(n)
}

/// Whether a short sentence agrees with what was just said ("Agreed.",
/// "Sounds good", "+1", "Works for me", "LGTM").
pub fn is_agreement(sentence: &str) -> bool {
    is_agreement_n(sentence, &Norm::new(sentence))
}

fn is_agreement_n(sentence: &str, n: &Norm) -> bool {
    if is_question_norm(sentence, n) || has_negation(n) || n.words.len() > 6 {
        return false;
    }
    sentence.contains("+1")
        || sentence.contains('👍')
        || n.has_any(&[
            "agreed",
            "agree",
            "sounds good",
            "works for me",
            "yes",
            "yep",
            "ok",
            "okay",
            "sure",
            "fine by me",
            "lgtm",
            "approved",
            "i approve",
            "let's do it",
            "makes sense",
            "deal",
            "confirmed",
            "sounds great",
            "perfect",
        ])
}

// ---------------------------------------------------------------------------
// Risk
// ---------------------------------------------------------------------------

const IRREVERSIBLE: &[&str] = &[
    "delete",
    "deleted",
    "deletes",
    "deleting",
    "deletion",
    "refund",
    "refunds",
    "refunded",
    "refunding",
    "pay",
    "paid",
    "pays",
    "paying",
    "payment",
    "payments",
    "payout",
    "transfer",
    "transfers",
    "transferred",
    "transferring",
    "send",
    "sends",
    "sent",
    "sending",
    "deploy",
    "deploys",
    "deployed",
    "deploying",
    "deployment",
    "drop",
    "drops",
    "dropped",
    "dropping",
    "wire",
    "wired",
    "wiring",
    "cancel",
    "cancels",
    "cancelled",
    "canceled",
    "cancelling",
    "canceling",
    "cancellation",
    "purge",
    "purged",
    "purging",
    "wipe",
    "wiped",
    "wiping",
    "destroy",
    "destroyed",
    "destroying",
    "terminate",
    "terminated",
    "terminating",
    "revoke",
    "revoked",
    "revoking",
    "truncate",
    "truncated",
    "erase",
    "erased",
    "publish",
    "published",
    "rm",
    "shutdown",
    "withdraw",
    "withdrawal",
    "charge",
    "charged",
];

/// Whether text names an irreversible action (delete, refund, pay,
/// transfer, send, deploy, drop, wire, cancel…). Words are also split at
/// `_`, `-`, `.` and camelCase so tool names like `issueRefund` or
/// `delete_file` count.
pub fn is_irreversible(text: &str) -> bool {
    let mut parts: Vec<String> = Vec::new();
    for raw in text.split(|c: char| !c.is_alphanumeric()) {
        let mut cur = String::new();
        let mut prev_lower = false;
        for c in raw.chars() {
            if c.is_uppercase() && prev_lower {
                parts.push(std::mem::take(&mut cur));
            }
            prev_lower = c.is_lowercase();
            cur.extend(c.to_lowercase());
        }
        if !cur.is_empty() {
            parts.push(cur);
        }
    }
    parts.iter().any(|p| IRREVERSIBLE.contains(&p.as_str()))
}

// ---------------------------------------------------------------------------
// Numbers in words (prose must not contain digits it cannot cite)
// ---------------------------------------------------------------------------

/// `n` in English words ("twenty-one"); prose uses words for counts so the
/// validator never sees a number that no turn contains.
pub fn number_words(n: u64) -> String {
    const ONES: &[&str] = &[
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
    ];
    const TENS: &[&str] = &[
        "", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
    ];
    let idx = |k: u64| usize::try_from(k).unwrap_or(0);
    match n {
        0..=19 => ONES[idx(n)].to_string(),
        20..=99 => {
            let t = TENS[idx(n / 10)];
            if n % 10 == 0 {
                t.to_string()
            } else {
                format!("{t}-{}", ONES[idx(n % 10)])
            }
        }
        100..=999 => {
            let rest = n % 100;
            let h = format!("{} hundred", ONES[idx(n / 100)]);
            if rest == 0 {
                h
            } else {
                format!("{h} {}", number_words(rest))
            }
        }
        1000..=999_999 => {
            let rest = n % 1000;
            let th = format!("{} thousand", number_words(n / 1000));
            if rest == 0 {
                th
            } else {
                format!("{th} {}", number_words(rest))
            }
        }
        _ => "over a million".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-03-17 10:00 UTC, a Tuesday.
    const TUE: UnixNanos = 1_773_741_600 * 1_000_000_000;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn dates_round_trip_and_weekday() {
        assert_eq!(format_day(day_of(TUE)), "2026-03-17");
        assert_eq!(weekday(day_of(TUE)), 1);
        for z in [-800_000, -1, 0, 59, 365, 11_016, 20_529, 2_932_896] {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
        assert_eq!(
            days_from_civil(2000, 3, 1) - days_from_civil(2000, 2, 28),
            2
        );
        assert_eq!(format_day(day_of(-1)), "1969-12-31");
    }

    #[test]
    fn sentences_split_on_end_marks_not_inside_tokens() {
        let s = sentences(
            "Refund of $49.99 sent to a@b.com. See https://x.io/a.b! Ok?\nNext line e.g. this",
        );
        assert_eq!(
            s,
            vec![
                "Refund of $49.99 sent to a@b.com.",
                "See https://x.io/a.b!",
                "Ok?",
                "Next line e.g. this"
            ]
        );
    }

    #[test]
    fn entities_are_classified() {
        let e = entities("Order ORD-9921 ($49.99) on 2026-03-20, email bob@x.com, see https://a.io/x. File src/main.rs and report.pdf; 3-5 days, 1,000 units, order_id");
        let got: Vec<(EntityKind, &str)> = e.iter().map(|e| (e.kind, e.text)).collect();
        assert_eq!(
            got,
            vec![
                (EntityKind::Identifier, "ORD-9921"),
                (EntityKind::Amount, "$49.99"),
                (EntityKind::Date, "2026-03-20"),
                (EntityKind::Email, "bob@x.com"),
                (EntityKind::Url, "https://a.io/x"),
                (EntityKind::Path, "src/main.rs"),
                (EntityKind::Path, "report.pdf"),
                (EntityKind::Number, "3-5"),
                (EntityKind::Number, "1,000"),
                (EntityKind::Code, "order_id"),
            ]
        );
        assert!(entities("Hello there, nothing here.").is_empty());
        assert_eq!(
            entities("Connect to vpn.acme-corp.com now")[0].kind,
            EntityKind::Url
        );
        assert!(entities("See e.g. this").is_empty());
    }

    #[test]
    fn fact_entities_skip_small_counts() {
        assert!(has_fact_entity("Charged twice for ORD-9921"));
        assert!(has_fact_entity("Meeting on March 20"));
        assert!(has_fact_entity("It costs $5"));
        assert!(!has_fact_entity("I have 2 questions"));
    }

    #[test]
    fn classifier_per_kind() {
        use TurnKind::*;
        let cases = [
            ("Hello!", Greeting),
            ("Good morning team", Greeting),
            ("What is the refund status?", Question),
            ("The charge was posted on Monday.", Answer),
            ("I'll check the payment log and get back to you.", Action),
            ("I've processed the refund.", Action),
            (
                "We decided to use Postgres because it is cheaper.",
                Decision,
            ),
            ("I was charged twice, this is wrong.", Complaint),
            ("Thank you, that solves my issue.", Resolution),
            ("Thanks!", SmallTalk),
            ("Can you send me the invoice?", Action),
            ("Can you tell me the order number?", Question),
            ("Is it fixed?", Question),
            ("Hi, I have a billing problem", Complaint),
        ];
        for (s, k) in cases {
            assert_eq!(classify_sentence(s), k, "{s}");
        }
        assert!(Decision.importance(false) > Answer.importance(false));
        assert!(Answer.importance(true) >= KEY_POINT_IMPORTANCE);
        assert!(SmallTalk.importance(true) < KEY_POINT_IMPORTANCE);
        let (kind, all) = classify_text("Hi! I was charged twice. Thanks.");
        assert_eq!(kind, Complaint);
        assert_eq!(all.len(), 3);
    }

    #[test]
    fn key_point_filters_filler_and_near_duplicates() {
        assert!(is_filler("ok thanks"));
        assert!(is_filler("Um."));
        assert!(!is_filler("The refund is $49.99"));
        assert_eq!(
            trim_filler("Um, well, so basically the card failed"),
            "the card failed"
        );
        assert_eq!(trim_filler("Hi there, I need help"), "I need help");
        assert_eq!(trim_filler("Hill climbing"), "Hill climbing");
        assert!(is_near_duplicate(
            "the refund was processed today",
            "The refund was processed today, thanks"
        ));
        assert!(!is_near_duplicate(
            "the refund was processed",
            "we shipped the new router"
        ));
    }

    #[test]
    fn clip_cuts_at_words_and_keeps_identifiers() {
        assert_eq!(clip("short", 10), "short");
        assert_eq!(clip("alpha beta gamma delta", 12), "alpha beta…");
        let url = format!(
            "see {}",
            "https://example.com/".to_string() + &"a".repeat(30)
        );
        let c = clip(&url, 20);
        assert!(c.contains(&url[4..]), "identifier kept whole: {c}");
        let long = "x".repeat(500);
        assert_eq!(clip(&long, 10).chars().count(), 10);
        assert_eq!(prefix_bytes("héllo", 2), "h");
        assert_eq!(shorten("alpha beta gamma delta", 12), "alpha beta…");
        assert_eq!(shorten(&"é".repeat(50), 10).chars().count(), 10);
        assert_eq!(shorten("short", 10), "short");
    }

    #[test]
    fn questions_and_answers() {
        assert!(is_question("When will the refund arrive"));
        assert!(is_question("Do you have the order id"));
        assert!(!is_question("Do it now."));
        assert!(!is_question("What a day."));
        assert!(is_open_question("Which card was charged?"));
        assert!(!is_open_question("How are you?"));
        assert!(!is_open_question("Anything else I can help with?"));
        assert!(!is_open_question("Can you send the report?"));
        assert!(is_answer_like("It was the Visa card."));
        assert!(is_answer_like("Yes."));
        assert!(!is_answer_like("Let me check."));
        assert!(!is_answer_like("Thanks!"));
    }

    #[test]
    fn actions_and_owners() {
        let p = names(&["alice", "bob", "agent-7"]);
        let o = |s: &str| action_cue(s, &p).map(|c| c.owner);
        assert_eq!(o("I'll check the payment log."), Some(OwnerCue::Speaker));
        assert_eq!(o("We will follow up by email."), Some(OwnerCue::Speaker));
        assert_eq!(
            o("Bob, can you send the deck by Friday?"),
            Some(OwnerCue::Named("bob".into()))
        );
        assert_eq!(
            o("@alice please review the PR"),
            Some(OwnerCue::Named("alice".into()))
        );
        assert_eq!(
            o("Carol, please update the wiki."),
            Some(OwnerCue::Named("Carol".into()))
        );
        assert_eq!(
            o("Alice will draft the spec."),
            Some(OwnerCue::Named("alice".into()))
        );
        assert_eq!(o("Can you restart the router?"), Some(OwnerCue::Addressee));
        assert_eq!(
            o("Next step is to migrate the database."),
            Some(OwnerCue::Unassigned)
        );
        assert_eq!(
            o("Waiting for the bank to confirm."),
            Some(OwnerCue::Unassigned)
        );
        assert_eq!(
            o("You need to reset your password."),
            Some(OwnerCue::Addressee)
        );
        assert_eq!(o("Can you tell me your order number?"), None);
        assert_eq!(o("I won't be able to do that."), None);
        assert_eq!(o("Will do."), None);
        assert_eq!(o("Please let me know."), None);
        assert_eq!(o("The refund will be processed."), None);
        assert_eq!(o("We'll use Postgres."), None);
        assert!(is_acceptance("Sure, will do."));
        assert!(!is_started("Sure, will do."));
        assert!(is_started("On it!"));
        assert_eq!(
            o("Raj, add the index by Thursday."),
            Some(OwnerCue::Named("Raj".into()))
        );
        assert_eq!(o("Bob, good question."), None);
        assert_eq!(
            clauses("Marco, please prepare the request by Thursday, and Lee, rerun the test."),
            vec![
                "Marco, please prepare the request by Thursday",
                "Lee, rerun the test."
            ]
        );
        assert_eq!(
            clauses("Red, green, and blue."),
            vec!["Red, green, and blue."]
        );
        assert!(is_acceptance("On it!"));
    }

    #[test]
    fn addressed_names() {
        assert_eq!(addressed_name("Bob, can you check?"), Some("Bob"));
        assert_eq!(addressed_name("Hey Bob, please check"), Some("Bob"));
        assert_eq!(addressed_name("Thanks, I will"), None);
        assert_eq!(addressed_name("ping @carol about it"), Some("carol"));
        assert_eq!(resolve_name("Bob", &names(&["bob.smith"])), "bob.smith");
        assert_eq!(resolve_name("Dana", &names(&["bob"])), "Dana");
    }

    #[test]
    fn deadlines_resolve_against_turn_time() {
        let d = |s: &str| deadline(s, TUE);
        assert_eq!(d("by 2026-04-01"), Some("2026-04-01".into()));
        assert_eq!(d("today"), Some("2026-03-17".into()));
        assert_eq!(d("by tomorrow"), Some("2026-03-18".into()));
        assert_eq!(d("the day after tomorrow"), Some("2026-03-19".into()));
        assert_eq!(d("by Friday"), Some("2026-03-20".into()));
        assert_eq!(d("on Tuesday"), Some("2026-03-24".into()));
        assert_eq!(d("this Tuesday"), Some("2026-03-17".into()));
        assert_eq!(d("next Monday"), Some("2026-03-23".into()));
        assert_eq!(d("next Friday"), Some("2026-03-27".into()));
        assert_eq!(d("in 3 days"), Some("2026-03-20".into()));
        assert_eq!(d("within two weeks"), Some("2026-03-31".into()));
        assert_eq!(d("in 5 business days"), Some("2026-03-24".into()));
        assert_eq!(d("by end of week"), Some("2026-03-20".into()));
        assert_eq!(d("by the end of the month"), Some("2026-03-31".into()));
        assert_eq!(d("by March 20"), Some("2026-03-20".into()));
        assert_eq!(d("by 2nd of April"), Some("2026-04-02".into()));
        assert_eq!(
            d("on March 3"),
            Some("2027-03-03".into()),
            "past month-day rolls over"
        );
        assert_eq!(d("on February 30"), None);
        assert_eq!(d("no date here"), None);
        assert_eq!(
            deadlines("today or 2026-05-01", TUE),
            vec!["2026-03-17", "2026-05-01"]
        );
    }

    #[test]
    fn decisions_rationale_reversal_agreement() {
        assert!(is_decision("We decided to use Postgres."));
        assert!(is_decision("Let's go with the annual plan."));
        assert!(is_decision("Final decision: ship on Monday."));
        assert!(is_decision("I approve the refund."));
        assert!(!is_decision("Did we decide?"));
        assert!(!is_decision("No decision yet."));
        assert!(!is_decision("I'll send it once the refund is approved."));
        assert!(!is_decision("Agreed."));
        assert_eq!(
            rationale("We'll use Postgres because it is cheaper."),
            Some("because it is cheaper")
        );
        assert_eq!(
            rationale("Let's use S3 so that backups are cheap"),
            Some("so that backups are cheap")
        );
        assert_eq!(rationale("We decided since Monday to wait"), None);
        assert!(is_reason("Because the vendor raised prices."));
        assert!(is_reversal("Actually, let's not use Redis."));
        assert!(is_reversal("Let's go with MySQL instead."));
        assert!(is_reversal("Scratch that."));
        assert!(!is_reversal("Actually, the charge was $5."));
        assert!(is_agreement("Agreed."));
        assert!(is_agreement("+1"));
        assert!(!is_agreement("I don't agree."));
    }

    #[test]
    fn completions() {
        assert!(is_completion("Done."));
        assert!(is_completion("The refund has been processed."));
        assert!(is_completion("I've sent the invoice."));
        assert!(!is_completion("I will send it once it is done."));
        assert!(!is_completion("It is not fixed yet."));
        assert!(!is_completion("Is it done?"));
        assert!(is_completion(
            "Update: throttled to 40 rps; the batch finished."
        ));
        assert!(!is_completion("It needs to be processed."));
        assert!(is_resolution("Thank you, that solves my issue."));
        assert!(!is_resolution("It is not resolved."));
    }

    #[test]
    fn depends_on_clauses() {
        assert_eq!(
            depends_on("I'll email you once the refund is processed."),
            vec!["the refund is processed"]
        );
        assert_eq!(
            depends_on("Waiting for the bank to confirm, then I'll call."),
            vec!["the bank to confirm"]
        );
        assert_eq!(
            depends_on("Deploy after v1.2 is tagged."),
            vec!["v1.2 is tagged"]
        );
        assert!(depends_on("I'll do it after that.").is_empty());
    }

    #[test]
    fn priorities() {
        assert_eq!(priority("This is urgent, please fix"), Priority::High);
        assert_eq!(priority("ASAP please"), Priority::High);
        assert_eq!(priority("nice to have, when you can"), Priority::Low);
        assert_eq!(priority("please update the docs"), Priority::Medium);
    }

    #[test]
    fn irreversible_actions() {
        assert!(is_irreversible("issue_refund"));
        assert!(is_irreversible("deleteFile"));
        assert!(is_irreversible("I'll wire the money"));
        assert!(is_irreversible("Deploy to production"));
        assert!(!is_irreversible("check the logs"));
        assert!(!is_irreversible("payload sender dropdown"));
    }

    #[test]
    fn annotations_and_closing() {
        let mut m = BTreeMap::new();
        assert_eq!(annotation(&m), None);
        m.insert(ANNOTATION_KEY.to_string(), " Decision ".to_string());
        assert_eq!(annotation(&m), Some(Annotation::Decision));
        m.insert(ANSWER_TO_KEY.to_string(), "12".to_string());
        assert_eq!(answer_to(&m), Some(12));
        assert!(is_closing("Thanks for your help, bye!"));
        assert!(!is_closing("I will check the logs"));
    }

    #[test]
    fn content_words_and_stems() {
        let w = content_words("The charges were charged twice for ORD-9921");
        assert!(w.contains("charg"));
        assert!(w.contains("9921"));
        assert!(!w.contains("the"));
        assert_eq!(stem("processing"), "process");
        assert_eq!(stem("refunds"), "refund");
        assert!(overlap(&w, &w) > 0.99);
    }

    #[test]
    fn numbers_in_words() {
        assert_eq!(number_words(0), "zero");
        assert_eq!(number_words(21), "twenty-one");
        assert_eq!(number_words(305), "three hundred five");
        assert_eq!(number_words(12_000), "twelve thousand");
    }
}
