//! The table the load generator prints: one markdown row per run.

use crate::{Args, RunResult, Source};

/// The table's header.
pub(crate) const HEADER: &str = "| runtime | S | K | M | rate | events delivered/s | p50 | p99 | p99.9 | server CPU per event | peak RSS | durable lost | streaming dropped | deltas from |";

/// The line under the header.
pub(crate) const SEPARATOR: &str =
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|";

/// The pace column: deltas per second per session, or `max` (saturated).
fn pace(rate: Option<f64>) -> String {
    match rate {
        Some(r) => format!("{r}/s"),
        None => "max".to_owned(),
    }
}

/// The source column.
fn source(source: Source) -> &'static str {
    match source {
        Source::Scripted => "scripted agent",
        Source::Model => "model (fake endpoint)",
        Source::Ahp => "scripted agent, to AHP clients",
    }
}

/// The row of a run that failed.
pub(crate) fn failed_row(
    runtime: &str,
    args: &Args,
    k: usize,
    m: u64,
    from: Source,
    error: &str,
) -> String {
    format!(
        "| {runtime} | {} | {k} | {m} | {} | failed: {error} | | | | | | | | {} |",
        args.sessions,
        pace(args.rate),
        source(from)
    )
}

pub(crate) fn row(r: &RunResult) -> String {
    let secs = r.elapsed.as_secs_f64().max(1e-9);
    let rate = r.events as f64 / secs;
    let rss = match r.peak_rss_kib {
        Some(kib) => format!("{:.1} MiB", kib as f64 / 1024.0),
        None => "n/a".to_owned(),
    };
    let cpu = match r.server_cpu_secs {
        Some(cpu) => format!("{:.2} µs ({cpu:.2} s)", cpu * 1e6 / r.events.max(1) as f64),
        None => "n/a".to_owned(),
    };
    let lost = if r.durable_mismatch > 0 {
        format!(
            "{} ({} clients out of order)",
            r.durable_lost, r.durable_mismatch
        )
    } else {
        r.durable_lost.to_string()
    };
    let total = r.deltas * (r.clients * r.sessions) as u64;
    let dropped = format!(
        "{} of {} ({:.1} %, {} reported)",
        r.deltas_dropped,
        total,
        100.0 * r.deltas_dropped as f64 / total.max(1) as f64,
        r.drops_reported
    );
    format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        r.runtime,
        r.sessions,
        r.clients,
        r.deltas,
        pace(r.rate),
        human_rate(rate),
        percentile(&r.latencies, 50.0),
        percentile(&r.latencies, 99.0),
        percentile(&r.latencies, 99.9),
        cpu,
        rss,
        lost,
        dropped,
        source(r.source)
    )
}

fn human_rate(rate: f64) -> String {
    if rate >= 1e6 {
        format!("{:.2} M", rate / 1e6)
    } else if rate >= 1e3 {
        format!("{:.0} k", rate / 1e3)
    } else {
        format!("{rate:.0}")
    }
}

/// The `p`th percentile of sorted nanosecond samples, formatted.
pub(crate) fn percentile(sorted: &[u64], p: f64) -> String {
    if sorted.is_empty() {
        return "n/a".to_owned();
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let ns = sorted[rank.clamp(1, sorted.len()) - 1];
    if ns >= 1_000_000 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else {
        format!("{:.0} µs", ns as f64 / 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let samples: Vec<u64> = (1..=100).map(|i| i * 1_000).collect();
        assert_eq!(percentile(&samples, 50.0), "50 µs");
        assert_eq!(percentile(&samples, 99.0), "99 µs");
        assert_eq!(percentile(&samples, 99.9), "100 µs");
        assert_eq!(percentile(&[2_500_000], 99.0), "2.5 ms");
        assert_eq!(percentile(&[], 50.0), "n/a");
    }
}
