//! A node out of descriptors (issue 20 item 3), with the real binary: a
//! listener whose accept fails with EMFILE pauses and backs off instead of
//! retrying at once, logs at most one line a second with the count, and
//! the node serves its established sessions throughout; once descriptors
//! free, it accepts again.
//!
//! Sessions cannot take the last descriptors any more (zlink-node keeps
//! `max_sessions` below the descriptor limit, docs/operations.md
//! "Descriptors"), so the flood goes to the peer port: a connection there
//! holds a descriptor until its link handshake ends (at its deadline).

mod bound;
mod node_support;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use node_support::*;
use zlink::client::Client;

/// The descriptor limit the node runs under: its own (ring, eventfds,
/// listeners, logs), what it keeps back (136 of 160) and a few dozen
/// sessions (24).
const NOFILE: u64 = 160;

#[test]
fn a_full_descriptor_table_pauses_accepting_logs_once_a_second_and_serves_on() {
    out_of_descriptors("io_uring");
}

/// The same on epoll. Its accept readiness is an edge, so even without the
/// pause it retried only on a new connection: this run checks that the
/// epoll backend serves on and accepts again under EMFILE, not the pause.
#[test]
fn a_full_descriptor_table_on_epoll_keeps_serving_and_accepts_again() {
    out_of_descriptors("epoll");
}

fn out_of_descriptors(backend: &str) {
    let dir = temp_dir(&format!("nofile-{backend}"));
    let text = config(1, "embedded", "nofile", &Peers::Static(Vec::new()))
        .replace("[node]\n", &format!("[node]\nio_backend = \"{backend}\"\n"));
    let path = write_config(&dir, "node-1.toml", &text);
    let mut node = NodeProcess::start_with_nofile(1, &path, NOFILE);
    // Given a session logged in and playing,
    let mut client = Client::connect(node.stream).expect("the node accepts a client");
    login(&mut client, "p").expect("login");
    // when far more connections arrive at the peer port than descriptors
    // are left (the kernel completes them into the backlog; accept fails
    // with EMFILE),
    let peer = node.peer.expect("the node takes links");
    let flood: Vec<TcpStream> = (0..2 * NOFILE)
        .filter_map(|_| TcpStream::connect(peer).ok())
        .collect();
    assert!(
        flood.len() as u64 > NOFILE,
        "{} connections made",
        flood.len()
    );
    // then for two seconds the established session is served all along,
    let started = Instant::now();
    let mut moves = 0;
    while started.elapsed() < Duration::from_secs(2) {
        step(&mut client, "p").expect("a MOVE of the established session");
        moves += 1;
    }
    let window = started.elapsed();
    // and the failures were logged at most once a second (plus the first),
    // each line with its count: the console's answer is a later marker, so
    // every line the window produced has been read by then.
    node.control("counters");
    let lines = node.lines_with("accept failed");
    eprintln!(
        "{moves} MOVEs in {window:?}; {} accept-failure lines: {lines:#?}",
        lines.len()
    );
    assert!(!lines.is_empty(), "no accept failure was logged");
    let allowed = window.as_secs() as usize + 2;
    assert!(
        lines.len() <= allowed,
        "{} accept-failure lines in {window:?}",
        lines.len()
    );
    assert!(lines.iter().all(|(_, line)| line.contains("failures=")));
    // Once the flood is gone, descriptors free and a new client gets in.
    drop(flood);
    let deadline = Instant::now() + WAIT;
    let mut again = loop {
        assert!(
            Instant::now() < deadline,
            "no client accepted after the flood"
        );
        if let Ok(mut fresh) = Client::connect(node.stream) {
            if login(&mut fresh, "q").is_ok() {
                break fresh;
            }
        }
    };
    assert_eq!(step(&mut again, "q").unwrap(), 1);
    let (report, status) = node.terminate();
    assert!(status.success(), "{report}");
}
