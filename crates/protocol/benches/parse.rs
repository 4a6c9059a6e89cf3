//! Parser throughput: requests and replies of the seeds' workloads (1 KiB values, multi-gets).
//! `cargo bench -p memrelay-protocol`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use memrelay_protocol::{compose, parse_request, Command, Expect, Limits, Parse, ReplyParser};

fn requests(c: &mut Criterion) {
    let limits = Limits::default();
    let mut set = Vec::new();
    compose::storage(&mut set, Command::Set, b"memtier-1234567", 0, 0, &[b'x'; 1024], 0, false);
    let mut multiget = Vec::new();
    let keys: Vec<Vec<u8>> = (0..10).map(|i| format!("memtier-{i:07}").into_bytes()).collect();
    compose::retrieval(&mut multiget, Command::Get, keys.iter().map(Vec::as_slice));
    let mut group = c.benchmark_group("parse_request");
    for (name, bytes) in [("get", &b"get memtier-1234567\r\n"[..]), ("set_1k", &set), ("multiget_10", &multiget)] {
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_function(name, |b| {
            b.iter(|| match parse_request(std::hint::black_box(bytes), &limits) {
                Parse::Complete(r) => r.consumed,
                _ => unreachable!(),
            })
        });
    }
    group.finish();
}

fn replies(c: &mut Criterion) {
    let mut reply = Vec::new();
    for i in 0..10 {
        compose::value(&mut reply, format!("memtier-{i:07}").as_bytes(), 0, &[b'x'; 1024], None);
    }
    reply.extend_from_slice(compose::END);
    let mut group = c.benchmark_group("parse_reply");
    group.throughput(Throughput::Bytes(reply.len() as u64));
    group.bench_function("values_10x1k", |b| {
        let mut parser = ReplyParser::new(Expect::Values);
        b.iter(|| {
            parser.reset(Expect::Values);
            match parser.parse(std::hint::black_box(&reply)) {
                Parse::Complete(r) => r.items,
                _ => unreachable!(),
            }
        })
    });
    group.finish();
}

criterion_group!(benches, requests, replies);
criterion_main!(benches);
