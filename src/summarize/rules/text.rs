//! Text basics: sentences, words, stems, content words, clipping.
//! Pure functions of their input; they return slices of it, never new text.

use super::*;

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

pub(crate) fn ends_with_abbreviation(before_dot: &str) -> bool {
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
    restore_apostrophes(&mut out);
    out
}

/// Chat drops apostrophes ("im gonna", "Ill see if I can…", "dont"): the
/// contraction is restored so the rules read one spelling. "ill" is a
/// contraction only where "I'll" can stand: first in the clause or after
/// a word that opens one, and before another word ("I feel ill" stays).
fn restore_apostrophes(words: &mut [(usize, String)]) {
    for i in 0..words.len() {
        let fixed = match words[i].1.as_str() {
            "im" => "i'm",
            "ive" => "i've",
            "dont" => "don't",
            "didnt" => "didn't",
            "doesnt" => "doesn't",
            "cant" => "can't",
            "couldnt" => "couldn't",
            "wouldnt" => "wouldn't",
            "shouldnt" => "shouldn't",
            "isnt" => "isn't",
            "wasnt" => "wasn't",
            "havent" => "haven't",
            "ill" => {
                let opens = i == 0
                    || matches!(
                        words[i - 1].1.as_str(),
                        "and"
                            | "but"
                            | "then"
                            | "think"
                            | "guess"
                            | "ok"
                            | "okay"
                            | "yeah"
                            | "yes"
                            | "kk"
                            | "k"
                            | "lol"
                            | "well"
                            | "sure"
                            | "alright"
                            | "now"
                            | "also"
                            | "maybe"
                            | "probably"
                            | "definitely"
                    );
                if !(opens && i + 1 < words.len()) {
                    continue;
                }
                "i'll"
            }
            _ => continue,
        };
        words[i].1 = fixed.to_string();
    }
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
pub(crate) fn word_bit(w: &[u8]) -> u128 {
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
pub(crate) fn stopwords() -> &'static BTreeSet<&'static str> {
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

pub(crate) const LEAD_FILLERS: &[&str] = &[
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
