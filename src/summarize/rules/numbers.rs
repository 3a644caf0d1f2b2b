//! Numbers in words (prose must not contain digits it cannot cite).
//! Pure functions of their input; they return slices of it, never new text.

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
