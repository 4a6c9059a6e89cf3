//! The stats thread: merges the windows every recording thread ships, and writes the outputs.
//!
//! - `windows.jsonl`: one line per window once every thread has shipped it (or it is two
//!   windows overdue: a thread stuck on a server does not hold the file back; what it ships
//!   late is added to the oldest window not yet written, so windows always add up to the
//!   summary).
//! - `summary.json` at the end, written to a temporary file and renamed, so it is never seen
//!   half-written.
//! - `requests.csv`: the sampled requests with their six timestamps.
//!
//! It also publishes running totals for the `stats` command.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use hdrhistogram::Histogram;
use serde_json::{json, Value};

use crate::measure::clock::WindowClock;
use crate::measure::in_system::InSystem;
use crate::measure::live::LiveTotals;
use crate::measure::metrics::{micros, Kind, KindStats, Sample, Window};
use crate::settings::Settings;
use crate::settings::VERSION;
use crate::upstream::registry::Registry;

/// Width of the summary's response-time histogram buckets (seed 000 section 1.9.2).
const HISTOGRAM_BUCKET_US: u64 = 100;

/// What the stats thread shares with the rest of memrelay.
pub struct Shared {
    /// Running totals it publishes.
    pub live: Arc<LiveTotals>,
    /// Server names by id.
    pub registry: Arc<Registry>,
    /// The requests inside memrelay it samples.
    pub in_system: Arc<InSystem>,
}

pub struct StatsThread {
    settings: Arc<Settings>,
    clock: WindowClock,
    started_unix: f64,
    incoming: Receiver<Box<Window>>,
    recycle: Sender<Box<Window>>,
    live: Arc<LiveTotals>,
    /// Per recording thread: every window before this index has arrived.
    frontier: Vec<u64>,
    pending: BTreeMap<u64, Window>,
    /// Windows before this index are written.
    written_upto: u64,
    totals: Window,
    windows_out: Option<BufWriter<File>>,
    requests_out: Option<BufWriter<File>>,
    /// Server names by id.
    registry: Arc<Registry>,
    in_system: Arc<InSystem>,
    /// memrelay's CPU seconds by thread role over the windows written.
    cpu_totals: Vec<(String, f64)>,
}

/// The window's response times over every request type, as HdrHistogram's standard compressed
/// form (V2, deflate, base64; the bench's encoding): the lab trims warm-up and merges windows
/// exactly instead of reading percentiles off whole-run 100 µs buckets.
fn response_hdr(window: &Window) -> Option<String> {
    use base64::Engine;
    use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
    let mut all = crate::measure::metrics::Latencies::default();
    for kind in &window.kinds {
        all.add(&kind.response);
    }
    if all.is_empty() {
        return None;
    }
    let all = all.histogram();
    let mut bytes = Vec::new();
    V2DeflateSerializer::new().serialize(all, &mut bytes).ok()?;
    Some(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// CPU seconds by role as a JSON object.
fn by_role(roles: &[(String, f64)]) -> Value {
    Value::Object(roles.iter().map(|(role, seconds)| (role.clone(), json!(seconds))).collect())
}

impl StatsThread {
    pub fn new(
        settings: Arc<Settings>,
        clock: WindowClock,
        recorders: usize,
        incoming: Receiver<Box<Window>>,
        recycle: Sender<Box<Window>>,
        shared: Shared,
    ) -> io::Result<StatsThread> {
        let Shared { live, registry, in_system } = shared;
        let mut windows_out = None;
        let mut requests_out = None;
        if let Some(dir) = &settings.measurement.stats_dir {
            fs::create_dir_all(dir)?;
            windows_out = Some(BufWriter::new(File::create(dir.join("windows.jsonl"))?));
            if settings.measurement.request_log_sample.is_some() {
                let mut out = BufWriter::new(File::create(dir.join("requests.csv"))?);
                writeln!(
                    out,
                    "thread,type,keys,hits,misses,error,servers,arrival_us,enqueue_us,dequeue_us,\
                     first_send_us,last_reply_us,reply_written_us,response_us,queue_us,service_us"
                )?;
                requests_out = Some(out);
            }
        }
        let servers = settings.all_servers().count();
        Ok(StatsThread {
            started_unix: unix_now(),
            clock,
            incoming,
            recycle,
            live,
            frontier: vec![clock.index(Instant::now()); recorders],
            pending: BTreeMap::new(),
            written_upto: clock.index(Instant::now()),
            totals: Window::new(servers),
            windows_out,
            requests_out,
            settings,
            registry,
            in_system,
            cpu_totals: Vec::new(),
        })
    }

    /// Runs until every recorder is gone (or `stop` is set: a recorder's thread is stuck), then
    /// writes the summary.
    pub fn run(mut self, stop: Arc<AtomicBool>) -> io::Result<()> {
        let tick = self.clock.length.min(Duration::from_millis(100));
        loop {
            match self.incoming.recv_timeout(tick) {
                Ok(window) => self.take(window)?,
                Err(RecvTimeoutError::Timeout) if stop.load(Ordering::Acquire) => {
                    while let Ok(window) = self.incoming.try_recv() {
                        self.take(window)?;
                    }
                    break;
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            self.write_ready(false)?;
        }
        self.write_ready(true)?;
        if let Some(out) = self.windows_out.as_mut() {
            out.flush()?;
        }
        if let Some(out) = self.requests_out.as_mut() {
            out.flush()?;
        }
        if let Some(dir) = self.settings.measurement.stats_dir.clone() {
            write_atomically(&dir.join("summary.json"), &self.summary())?;
        }
        Ok(())
    }

    fn take(&mut self, window: Box<Window>) -> io::Result<()> {
        if let Some(frontier) = self.frontier.get_mut(usize::from(window.thread)) {
            *frontier = (*frontier).max(window.next);
        }
        self.totals.add(&window);
        self.live.add(&window);
        self.log_samples(&window.samples)?;
        let index = window.index.max(self.written_upto);
        let servers = self.settings.all_servers().count();
        self.pending.entry(index).or_insert_with(|| {
            let mut fresh = Window::new(servers);
            fresh.index = index;
            fresh
        });
        self.pending.get_mut(&index).expect("inserted above").add(&window);
        let _ = self.recycle.try_send(window);
        Ok(())
    }

    /// Writes the windows every thread has shipped, or that are long overdue (or all, at the end).
    fn write_ready(&mut self, all: bool) -> io::Result<()> {
        let complete_before = self.frontier.iter().copied().min().unwrap_or(0);
        let overdue_before = self.clock.index(Instant::now()).saturating_sub(2);
        let ready_before = if all { u64::MAX } else { complete_before.max(overdue_before) };
        while let Some(entry) = self.pending.first_entry() {
            if *entry.key() >= ready_before {
                break;
            }
            let window = entry.remove();
            self.written_upto = window.index + 1;
            self.write_window(&window)?;
        }
        if !all {
            self.written_upto = self.written_upto.max(ready_before.min(self.clock.index(Instant::now())));
        }
        Ok(())
    }

    fn write_window(&mut self, window: &Window) -> io::Result<()> {
        let length = self.clock.length.as_secs_f64();
        // The sampler's figures for this window: requests inside memrelay (and, below, processor
        // time by thread role).
        let (in_system_sum, in_system_samples) = self.in_system.samples_of(window.index);
        // memrelay's processor time in this window, by thread role (the sampler read it).
        let cpu = self.in_system.cpu_of(window.index);
        for (role, seconds) in cpu.iter().flatten() {
            match self.cpu_totals.iter_mut().find(|(r, _)| r == role) {
                Some((_, total)) => *total += seconds,
                None => self.cpu_totals.push((role.clone(), *seconds)),
            }
        }
        let mut types = serde_json::Map::new();
        for kind in Kind::ALL {
            let stats = &window.kinds[kind as usize];
            types.insert(
                kind.name().into(),
                json!({
                    "count": stats.count,
                    "throughput": stats.count as f64 / length,
                    "response_us_mean": mean(stats.response_us_sum, stats.count),
                    "queue_us_mean": mean(stats.queue_us_sum, stats.count),
                    "service_us_mean": mean(stats.service_us_sum, stats.count),
                    "hits": stats.hits,
                    "misses": stats.misses,
                    "keys": stats.keys,
                    "errors": stats.errors,
                }),
            );
        }
        let count: u64 = window.kinds.iter().map(|k| k.count).sum();
        let line = json!({
            "window": window.index,
            "start_s": window.index as f64 * length,
            "length_s": length,
            "start_unix": self.started_unix + window.index as f64 * length,
            "count": count,
            "throughput": count as f64 / length,
            "types": types,
            "queue_length_mean": mean(window.queue_len_sum, window.queue_len_samples),
            "queue_length_max": window.queue_len_max,
            "in_system_mean": mean(in_system_sum, in_system_samples),
            "cpu_s": cpu.as_ref().map(|roles| by_role(roles)),
            "response_hdr": response_hdr(window),
            "in_system_samples": in_system_samples,
            "per_server_requests": window.per_server,
            "per_server_failures": window.per_server_failures,
        });
        if let Some(out) = self.windows_out.as_mut() {
            serde_json::to_writer(&mut *out, &line)?;
            out.write_all(b"\n")?;
            out.flush()?;
        }
        if self.settings.measurement.verbose {
            eprintln!(
                "memrelay: window {:>5}: {:>9.0} req/s  response {:>7.1} µs  queue {:>7.1} µs  service {:>7.1} µs  queue length {:.2}  errors {}",
                window.index,
                count as f64 / length,
                mean_all(window, |k| k.response_us_sum),
                mean_all(window, |k| k.queue_us_sum),
                mean_all(window, |k| k.service_us_sum),
                mean(window.queue_len_sum, window.queue_len_samples),
                window.kinds.iter().map(|k| k.errors).sum::<u64>(),
            );
        }
        Ok(())
    }

    fn log_samples(&mut self, samples: &[Sample]) -> io::Result<()> {
        let Some(out) = self.requests_out.as_mut() else { return Ok(()) };
        let origin = self.clock.start;
        let at = |t: Instant| micros(t.saturating_duration_since(origin));
        for s in samples {
            let t = &s.times;
            writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                s.thread,
                s.kind.name(),
                s.outcome.keys,
                s.outcome.hits,
                s.outcome.misses,
                u8::from(s.outcome.error),
                s.servers,
                at(t.arrival),
                at(t.enqueue),
                at(t.dequeue),
                at(t.first_send),
                at(t.last_reply),
                at(t.reply_written),
                micros(t.response()),
                micros(t.queue()),
                micros(t.service()),
            )?;
        }
        Ok(())
    }

    fn summary(&self) -> Value {
        let (in_system_sum, in_system_samples) = self.in_system.all_samples();
        let duration = (unix_now() - self.started_unix).max(1e-9);
        let mut types = serde_json::Map::new();
        for kind in Kind::ALL {
            types.insert(kind.name().into(), kind_summary(&self.totals.kinds[kind as usize], duration));
        }
        let all = |f: fn(&KindStats) -> u64| self.totals.kinds.iter().map(f).sum::<u64>();
        // By server id: the servers memrelay started with, then those reloads added.
        let servers: Vec<Value> = self
            .registry
            .names()
            .into_iter()
            .enumerate()
            .map(|(i, name)| {
                json!({
                    "address": name,
                    "requests": self.totals.per_server.get(i).copied().unwrap_or(0),
                    "failures": self.totals.per_server_failures.get(i).copied().unwrap_or(0),
                })
            })
            .collect();
        json!({
            "memrelay_version": VERSION,
            "config": self.settings.describe(),
            "started_unix": self.started_unix,
            "duration_s": duration,
            "totals": {
                "count": all(|k| k.count),
                "throughput": all(|k| k.count) as f64 / duration,
                "keys": all(|k| k.keys),
                "hits": all(|k| k.hits),
                "misses": all(|k| k.misses),
                "errors": all(|k| k.errors),
            },
            "types": types,
            "servers": servers,
            "queue_length": {
                "mean": mean(self.totals.queue_len_sum, self.totals.queue_len_samples),
                "max": self.totals.queue_len_max,
                "samples": self.totals.queue_len_samples,
            },
            "in_system": {
                "mean": mean(in_system_sum, in_system_samples),
                "samples": in_system_samples,
                "missed": self.in_system.missed(),
            },
            "cpu_s": by_role(&self.cpu_totals),
        })
    }
}

fn kind_summary(stats: &KindStats, duration: f64) -> Value {
    json!({
        "count": stats.count,
        "throughput": stats.count as f64 / duration,
        "keys": stats.keys,
        "hits": stats.hits,
        "misses": stats.misses,
        "errors": stats.errors,
        "response_us": distribution(stats.response.histogram(), stats.response_us_sum, stats.count),
        "queue_us": distribution(stats.queue.histogram(), stats.queue_us_sum, stats.count),
        "service_us": distribution(stats.service.histogram(), stats.service_us_sum, stats.count),
        "response_histogram": buckets(stats.response.histogram()),
    })
}

/// Mean (exact, from the sum) and percentiles (from the histogram) of one time.
fn distribution(histogram: &Histogram<u64>, sum_us: u64, count: u64) -> Value {
    let q = |quantile: f64| if count == 0 { 0 } else { histogram.value_at_quantile(quantile) };
    json!({
        "mean": mean(sum_us, count),
        "p50": q(0.50),
        "p90": q(0.90),
        "p99": q(0.99),
        "p999": q(0.999),
        "max": if count == 0 { 0 } else { histogram.max() },
    })
}

/// The histogram in fixed 100 µs buckets, as `[lower_bound_us, count]` pairs for the non-empty
/// buckets (a sparse list: a long tail would otherwise be thousands of zeros).
fn buckets(histogram: &Histogram<u64>) -> Value {
    let mut pairs = Vec::new();
    if !histogram.is_empty() {
        for step in histogram.iter_linear(HISTOGRAM_BUCKET_US) {
            let count = step.count_since_last_iteration();
            if count > 0 {
                let lower = step.value_iterated_to() / HISTOGRAM_BUCKET_US * HISTOGRAM_BUCKET_US;
                pairs.push(json!([lower, count]));
            }
        }
    }
    json!({ "bucket_us": HISTOGRAM_BUCKET_US, "buckets": pairs })
}

fn mean(sum: u64, count: u64) -> f64 {
    if count == 0 {
        0.0
    } else {
        sum as f64 / count as f64
    }
}

fn mean_all(window: &Window, field: fn(&KindStats) -> u64) -> f64 {
    let count: u64 = window.kinds.iter().map(|k| k.count).sum();
    mean(window.kinds.iter().map(field).sum(), count)
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

fn write_atomically(path: &Path, value: &Value) -> io::Result<()> {
    let tmp: PathBuf = path.with_extension("json.tmp");
    {
        let mut out = BufWriter::new(File::create(&tmp)?);
        serde_json::to_writer_pretty(&mut out, value)?;
        out.write_all(b"\n")?;
        out.flush()?;
        out.get_ref().sync_all()?;
    }
    fs::rename(&tmp, path)
}
