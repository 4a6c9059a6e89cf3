//! Fake servers: small listeners in the test process that answer as a test needs.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread;
use std::time::Duration;

use crate::client::find;

/// A fake server that answers every `get` with `END` after `delay`, and tells when it has a
/// request.
pub fn slow_server(delay: Duration) -> (String, std::sync::mpsc::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (told, tell) = std::sync::mpsc::channel();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let told = told.clone();
            thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while let Some(at) = find(&buf, b"\r\n") {
                        // memrelay's own health checks (`stats`, `version`) are not requests.
                        let health_check = buf.starts_with(b"stats") || buf.starts_with(b"version");
                        buf.drain(..at + 2);
                        if !health_check {
                            let _ = told.send(());
                        }
                        thread::sleep(delay);
                        if stream.write_all(b"END\r\n").is_err() {
                            return;
                        }
                    }
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    (addr, tell)
}
