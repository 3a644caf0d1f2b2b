//! Small inline SVG bar charts, drawn on the server: no chart library, no
//! script. Labels are escaped like every other value.

use maud::{html, Markup};

/// Most bars one chart draws.
pub const MAX_BARS: usize = 60;

const WIDTH: u64 = 720;
const HEIGHT: u64 = 160;
const TOP: u64 = 14;
const BOTTOM: u64 = 16;

/// One bar per `(label, value)`, in order; hovering a bar shows its label
/// and value.
pub fn bars(values: &[(String, u64)], unit: &str) -> Markup {
    let pairs: Vec<(String, u64, Option<u64>)> =
        values.iter().map(|(l, v)| (l.clone(), *v, None)).collect();
    draw(&pairs, unit, None)
}

/// Two bars per label: `(label, first, second)`, e.g. a transcript's
/// tokens beside its summary's.
pub fn pairs(values: &[(String, u64, u64)], first: &str, second: &str) -> Markup {
    let pairs: Vec<(String, u64, Option<u64>)> = values
        .iter()
        .map(|(l, a, b)| (l.clone(), *a, Some(*b)))
        .collect();
    draw(&pairs, first, Some(second))
}

fn draw(values: &[(String, u64, Option<u64>)], first: &str, second: Option<&str>) -> Markup {
    let values = &values[values.len().saturating_sub(MAX_BARS)..];
    let max = values
        .iter()
        .map(|(_, a, b)| (*a).max(b.unwrap_or(0)))
        .max()
        .unwrap_or(0)
        .max(1);
    let n = values.len().max(1) as u64;
    let slot = (WIDTH - 40) / n;
    let bar = if second.is_some() { slot / 2 } else { slot }
        .saturating_sub(1)
        .max(1);
    let plot = HEIGHT - TOP - BOTTOM;
    let y = |v: u64| TOP + plot - v * plot / max;
    html! {
        svg.chart viewBox={"0 0 " (WIDTH) " " (HEIGHT)} width=(WIDTH) height=(HEIGHT) role="img" {
            title { (first) @if let Some(s) = second { " and " (s) } }
            text x="2" y="10" { (max) " " (first) }
            line x1="38" y1=(TOP + plot) x2=(WIDTH) y2=(TOP + plot) stroke="#b8c0cf" {}
            @for (i, (label, a, b)) in values.iter().enumerate() {
                @let x = 40 + i as u64 * slot;
                rect.bar x=(x) y=(y(*a)) width=(bar) height=(TOP + plot - y(*a)) {
                    title { (label) ": " (a) " " (first) }
                }
                @if let (Some(b), Some(s)) = (b, second) {
                    rect.bar2 x=(x + bar) y=(y(*b)) width=(bar) height=(TOP + plot - y(*b)) {
                        title { (label) ": " (b) " " (s) }
                    }
                }
            }
            @if let Some(s) = second {
                rect.bar x="40" y=(HEIGHT - 10) width="8" height="8" {}
                text x="52" y=(HEIGHT - 2) { (first) }
                rect.bar2 x="160" y=(HEIGHT - 10) width="8" height="8" {}
                text x="172" y=(HEIGHT - 2) { (s) }
            }
        }
    }
}
