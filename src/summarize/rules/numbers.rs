//! Numbers in words (prose must not contain digits it cannot cite).
//! Pure functions of their input; they return slices of it, never new text.

/// Cardinals below twenty, by value.
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
/// Multiples of ten, by tens digit (none below twenty).
const TENS: &[&str] = &[
    "", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];

/// `n` in English words ("twenty-one"); prose uses words for counts so the
/// validator never sees a number that no turn contains.
pub fn number_words(n: u64) -> String {
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

/// Whether `lower` (one lower-case word) is a number word: a cardinal
/// ("six", "twenty", "hundred"), an ordinal ("first", "tenth") or a
/// count word ("dozen", "twice"). Such a word names nobody ("Six, seven,
/// eight, nine, ten.").
pub fn is_number_word(lower: &str) -> bool {
    // Beyond the cardinals of `ONES` and `TENS`.
    const WORDS: &[&str] = &[
        "hundred",
        "thousand",
        "million",
        "billion",
        "first",
        "second",
        "third",
        "fourth",
        "fifth",
        "sixth",
        "seventh",
        "eighth",
        "ninth",
        "tenth",
        "eleventh",
        "twelfth",
        "hundredth",
        "thousandth",
        "dozen",
        "dozens",
        "once",
        "twice",
        "half",
        "quarter",
        "zeroth",
        "last",
    ];
    let lower = lower.trim_matches(|c: char| !c.is_alphanumeric());
    let cardinal = |w: &str| !w.is_empty() && (ONES.contains(&w) || TENS.contains(&w));
    cardinal(lower)
        || WORDS.contains(&lower)
        // "twenty-one", "thirty-second", "twentieth".
        || lower.split('-').count() == 2 && lower.split('-').all(is_number_word)
        || lower.ends_with("ieth") && cardinal(&format!("{}y", &lower[..lower.len() - 4]))
}
