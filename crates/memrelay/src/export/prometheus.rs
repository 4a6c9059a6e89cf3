//! memrelay's metrics in the OpenMetrics text format Prometheus scrapes, rendered on each scrape
//! (a `prometheus-client` [`Collector`]) from what is already kept: the request totals the stats
//! thread publishes (they lag by at most one measurement window), per-server health, the
//! connection counts, and each thread's CPU time read from `/proc`. Latency histograms are
//! converted from the HdrHistograms the recorders keep, into buckets from 50 µs to 5 s.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use hdrhistogram::Histogram;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::generation::Current;
use crate::measure::live::LiveTotals;
use crate::measure::metrics::{Kind, Window};
use crate::upstream::health::Health;
use crate::upstream::registry::Registry as ServerRegistry;

/// Upper bounds of the latency buckets, in seconds (microseconds to seconds).
pub const BUCKETS_S: [f64; 16] =
    [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0];

/// What a scrape reads.
pub struct Sources {
    pub live: Arc<LiveTotals>,
    pub health: Arc<Health>,
    pub registry: Arc<ServerRegistry>,
    /// The configuration in force (its generation: 1 for the one memrelay started with).
    pub current: Arc<Current>,
}

impl fmt::Debug for Sources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("memrelay metrics")
    }
}

/// The registry a scrape encodes.
pub fn registry(sources: Sources) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(sources));
    registry
}

/// The text of one scrape.
pub fn render(registry: &Registry) -> String {
    let mut text = String::with_capacity(16 * 1024);
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, registry);
    text
}

impl Collector for Sources {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let live = &self.live;
        one_gauge(
            &mut encoder,
            "memrelay_config_generation",
            "the configuration's generation",
            self.current.number() as f64,
        )?;
        one_gauge(
            &mut encoder,
            "memrelay_client_connections",
            "clients connected now",
            live.current_connections.load(Ordering::Relaxed) as f64,
        )?;
        one_counter(
            &mut encoder,
            "memrelay_client_connections_accepted",
            "clients accepted since start",
            live.total_connections.load(Ordering::Relaxed),
        )?;
        one_counter(
            &mut encoder,
            "memrelay_client_errors",
            "requests refused as malformed or too large",
            live.client_errors.load(Ordering::Relaxed),
        )?;
        let denied: Vec<(Vec<(&str, &str)>, u64)> = crate::access::Reason::ALL
            .iter()
            .map(|&reason| (vec![("reason", reason.name())], crate::access::denied(reason)))
            .collect();
        counter(
            &mut encoder,
            "memrelay_access_denied",
            "requests refused by access control and limits, by reason",
            &denied,
        )?;
        one_counter(
            &mut encoder,
            "memrelay_logins",
            "successful logins (ASCII authentication)",
            crate::access::logins(),
        )?;
        let failures = crate::access::throttle::LOGINS.failures_by_peer();
        let failures: Vec<(Vec<(&str, &str)>, u64)> =
            failures.iter().map(|(peer, n)| (vec![("peer", peer.as_str())], *n)).collect();
        counter(
            &mut encoder,
            "memrelay_login_failures",
            "failed logins (ASCII authentication) by peer address failing lately; `other`: the rest since start",
            &failures,
        )?;
        one_counter(
            &mut encoder,
            "memrelay_logins_throttled",
            "logins refused unchecked: their address had failed too often",
            crate::access::throttle::LOGINS.throttled(),
        )?;
        one_counter(
            &mut encoder,
            "memrelay_scrapes_throttled",
            "scrapes of /metrics answered 429 unchecked: their address had failed basic authentication too often",
            crate::access::throttle::SCRAPES.throttled(),
        )?;
        one_counter(
            &mut encoder,
            "memrelay_gutter_requests",
            "requests sent to a gutter pool because the server they would go to was down or failed them",
            crate::relay::gutter::diverted(),
        )?;
        one_counter(
            &mut encoder,
            "memrelay_client_budget_pauses",
            "times a client's requests stopped being read because it held more than its byte budget",
            crate::client::budget::pauses(),
        )?;
        one_counter(
            &mut encoder,
            "memrelay_clients_cut_off",
            "clients cut off for holding more than their budget and one value (or never taking a paused reply)",
            crate::client::budget::cut_off(),
        )?;
        one_gauge(
            &mut encoder,
            "memrelay_client_bytes_held",
            "bytes memrelay holds for its clients now (replies waiting, merges, requests being read)",
            crate::client::budget::held() as f64,
        )?;
        self.encode_requests(&mut encoder)?;
        self.encode_servers(&mut encoder)?;
        self.encode_pools(&mut encoder)?;
        encode_cpu(&mut encoder)
    }
}

impl Sources {
    fn encode_requests(&self, encoder: &mut DescriptorEncoder) -> fmt::Result {
        let Some(totals) = self.live.totals() else { return Ok(()) };
        let totals: &Window = &totals;
        let mut requests = Vec::new();
        let (mut keys, mut hits, mut misses) = (Vec::new(), Vec::new(), Vec::new());
        for kind in Kind::ALL {
            let k = &totals.kinds[kind as usize];
            let name = kind.name();
            requests.push((vec![("type", name), ("result", "ok")], k.count - k.errors));
            requests.push((vec![("type", name), ("result", "error")], k.errors));
            keys.push((vec![("type", name)], k.keys));
            hits.push((vec![("type", name)], k.hits));
            misses.push((vec![("type", name)], k.misses));
        }
        counter(encoder, "memrelay_requests", "requests answered, by type and result", &requests)?;
        counter(encoder, "memrelay_keys", "keys asked for, by request type", &keys)?;
        counter(encoder, "memrelay_hits", "keys found", &hits)?;
        counter(encoder, "memrelay_misses", "keys not found", &misses)?;
        let mut family = encoder.encode_descriptor(
            "memrelay_response_seconds",
            "time from a request's first byte to its reply written, by type",
            None,
            MetricType::Histogram,
        )?;
        for kind in Kind::ALL {
            let k = &totals.kinds[kind as usize];
            let labels = [("type", kind.name())];
            histogram(&mut family.encode_family(&labels)?, k.response.histogram(), k.response_us_sum)?;
        }
        one_counter(
            encoder,
            "memrelay_queue_length_samples",
            "queue length samples (one per request enqueued)",
            totals.queue_len_samples,
        )?;
        one_counter(
            encoder,
            "memrelay_queue_length_sampled",
            "sum of the sampled queue lengths (divide by the samples for the mean)",
            totals.queue_len_sum,
        )?;
        one_gauge(encoder, "memrelay_queue_length_max", "longest queue sampled", totals.queue_len_max as f64)
    }

    fn encode_servers(&self, encoder: &mut DescriptorEncoder) -> fmt::Result {
        let health = &self.health;
        // Every server by id, those a reload retired too: their counters must not vanish.
        let names = self.registry.names();
        let totals = self.live.totals();
        let per = |values: &dyn Fn(usize) -> u64| -> Vec<(Vec<(&str, &str)>, u64)> {
            names.iter().enumerate().map(|(s, name)| (vec![("server", name.as_str())], values(s))).collect()
        };
        if let Some(totals) = &totals {
            counter(
                encoder,
                "memrelay_server_requests",
                "requests sent to each server",
                &per(&|s| totals.per_server.get(s).copied().unwrap_or(0)),
            )?;
            counter(
                encoder,
                "memrelay_server_failures",
                "failed exchanges with each server (refused, reset, timeout, bad reply, down)",
                &per(&|s| totals.per_server_failures.get(s).copied().unwrap_or(0)),
            )?;
        }
        let up: Vec<(Vec<(&str, &str)>, f64)> =
            per(&|s| u64::from(!health.is_down(s))).into_iter().map(|(labels, v)| (labels, v as f64)).collect();
        gauge(encoder, "memrelay_server_up", "1 while the server is up, 0 while it is down", &up)?;
        counter(encoder, "memrelay_server_downs", "times each server went down", &per(&|s| health.downs(s)))?;
        counter(encoder, "memrelay_server_restarts", "restarts seen of each server", &per(&|s| health.restarts(s)))?;
        let cold: Vec<(Vec<(&str, &str)>, f64)> =
            per(&|s| u64::from(health.is_cold(s))).into_iter().map(|(labels, v)| (labels, v as f64)).collect();
        gauge(encoder, "memrelay_server_cold", "1 while a restarted server is being warmed", &cold)?;
        let repair = health.repair();
        let repairing = as_gauge(per(&|s| u64::from(repair.is_repairing(s))));
        gauge(
            encoder,
            "memrelay_server_repairing",
            "1 while the server is being repaired (reads avoid it)",
            &repairing,
        )?;
        let pending = as_gauge(per(&|s| repair.counts(s).pending));
        gauge(encoder, "memrelay_server_repair_pending", "keys waiting in each server's repair set", &pending)?;
        let queued = per(&|s| repair.counts(s).queued);
        counter(encoder, "memrelay_server_repair_queued", "keys put in each server's repair set", &queued)?;
        let repaired = per(&|s| repair.counts(s).repaired);
        counter(encoder, "memrelay_server_repaired", "keys brought up to date on each server", &repaired)?;
        let dropped = per(&|s| repair.counts(s).dropped);
        counter(
            encoder,
            "memrelay_server_repair_dropped",
            "keys beyond the repair bound (each a flush and resync)",
            &dropped,
        )?;
        let resyncs = per(&|s| repair.counts(s).resyncs);
        counter(encoder, "memrelay_server_resyncs", "full resyncs of each server", &resyncs)?;
        if let Some(totals) = &totals {
            let mut family = encoder.encode_descriptor(
                "memrelay_server_latency_seconds",
                "time from a request queued for a server to its reply read, per server",
                None,
                MetricType::Histogram,
            )?;
            for (s, name) in names.iter().enumerate() {
                let labels = [("server", name.as_str())];
                let (Some(latency), Some(&sum)) =
                    (totals.per_server_latency.get(s), totals.per_server_latency_us_sum.get(s))
                else {
                    continue;
                };
                histogram(&mut family.encode_family(&labels)?, latency.histogram(), sum)?;
            }
        }
        Ok(())
    }
}

impl Sources {
    /// Per pool of the configuration in force (label `pool`): requests sent to its servers,
    /// failed exchanges, servers up, and the servers' latency merged; the sums of its servers'
    /// own series.
    fn encode_pools(&self, encoder: &mut DescriptorEncoder) -> fmt::Result {
        let generation = self.current.get();
        let router = &generation.router;
        let pools: Vec<(&str, &[usize])> =
            router.pool_names().iter().enumerate().map(|(i, name)| (name.as_str(), router.pool_servers(i))).collect();
        let per = |values: &dyn Fn(usize) -> u64| -> Vec<(Vec<(&str, &str)>, u64)> {
            pools
                .iter()
                .map(|(name, servers)| (vec![("pool", *name)], servers.iter().map(|&s| values(s)).sum()))
                .collect()
        };
        let up = as_gauge(per(&|s| u64::from(!self.health.is_down(s))));
        gauge(encoder, "memrelay_pool_servers_up", "servers of each pool that are up", &up)?;
        let Some(totals) = self.live.totals() else { return Ok(()) };
        let requests = per(&|s| totals.per_server.get(s).copied().unwrap_or(0));
        counter(encoder, "memrelay_pool_requests", "requests sent to each pool's servers", &requests)?;
        let failures = per(&|s| totals.per_server_failures.get(s).copied().unwrap_or(0));
        counter(encoder, "memrelay_pool_failures", "failed exchanges with each pool's servers", &failures)?;
        let mut family = encoder.encode_descriptor(
            "memrelay_pool_latency_seconds",
            "time from a request queued for a server to its reply read, over each pool's servers",
            None,
            MetricType::Histogram,
        )?;
        for (name, servers) in &pools {
            let mut merged = crate::measure::metrics::Latencies::default();
            let mut sum = 0;
            for &s in *servers {
                if let (Some(latency), Some(&us)) =
                    (totals.per_server_latency.get(s), totals.per_server_latency_us_sum.get(s))
                {
                    merged.add(latency);
                    sum += us;
                }
            }
            histogram(&mut family.encode_family(&[("pool", *name)])?, merged.histogram(), sum)?;
        }
        Ok(())
    }
}

/// Counts as gauge values.
fn as_gauge<L>(values: Vec<(L, u64)>) -> Vec<(L, f64)> {
    values.into_iter().map(|(labels, v)| (labels, v as f64)).collect()
}

/// CPU seconds per thread role, from `/proc` ([`crate::measure::cpu`]).
fn encode_cpu(encoder: &mut DescriptorEncoder) -> fmt::Result {
    let roles = crate::measure::cpu::seconds_by_role();
    let mut family = encoder.encode_descriptor(
        "memrelay_cpu_seconds",
        "CPU time (user and system) of memrelay's live threads, by role",
        None,
        MetricType::Counter,
    )?;
    for (role, seconds) in &roles {
        ConstCounter::new(*seconds).encode(family.encode_family(&[("role", role.as_str())])?)?;
    }
    Ok(())
}

/// A counter without labels.
fn one_counter(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: u64) -> fmt::Result {
    ConstCounter::new(value).encode(encoder.encode_descriptor(name, help, None, MetricType::Counter)?)
}

/// A gauge without labels.
fn one_gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: f64) -> fmt::Result {
    ConstGauge::new(value).encode(encoder.encode_descriptor(name, help, None, MetricType::Gauge)?)
}

/// A counter family: one value per label set.
fn counter<L: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    values: &[(L, u64)],
) -> fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in values {
        ConstCounter::new(*value).encode(family.encode_family(labels)?)?;
    }
    Ok(())
}

/// A gauge family: one value per label set.
fn gauge<L: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    values: &[(L, f64)],
) -> fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in values {
        ConstGauge::new(*value).encode(family.encode_family(labels)?)?;
    }
    Ok(())
}

/// One histogram in [`BUCKETS_S`] from an HdrHistogram of µs and the exact sum of its values.
fn histogram(
    metric: &mut prometheus_client::encoding::MetricEncoder,
    hist: &Histogram<u64>,
    sum_us: u64,
) -> fmt::Result {
    let buckets = buckets(hist);
    metric.encode_histogram::<NoLabelSet>(sum_us as f64 / 1e6, hist.len(), &buckets, None)
}

/// Per-bucket counts (not cumulative; the encoder accumulates), `+Inf` last.
pub fn buckets(hist: &Histogram<u64>) -> Vec<(f64, u64)> {
    let mut counts = vec![0u64; BUCKETS_S.len() + 1];
    for value in hist.iter_recorded() {
        let seconds = value.value_iterated_to() as f64 / 1e6;
        let bucket = BUCKETS_S.iter().position(|&bound| seconds <= bound).unwrap_or(BUCKETS_S.len());
        counts[bucket] += value.count_at_value();
    }
    BUCKETS_S.iter().copied().chain([f64::INFINITY]).zip(counts).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::metrics::new_histogram;

    #[test]
    fn buckets_place_each_value_under_its_bound() {
        let mut hist = new_histogram();
        for us in [10, 50, 51, 900, 1_000, 7_000_000] {
            hist.record(us).unwrap();
        }
        let b = buckets(&hist);
        assert_eq!(b.len(), BUCKETS_S.len() + 1);
        let count = |bound: f64| b.iter().find(|(u, _)| *u == bound).unwrap().1;
        assert_eq!(count(0.00005), 2); // 10 and 50 µs
        assert_eq!(count(0.0001), 1); // 51 µs
        assert_eq!(count(0.001), 2); // 900 µs and 1 ms
        assert_eq!(count(f64::INFINITY), 1); // 7 s
        assert_eq!(b.iter().map(|(_, n)| n).sum::<u64>(), 6);
    }
}
