//! The WebSocket side of a shard's client connections (docs/wire.md
//! "WebSocket"): the upgrade under its deadline, then one client frame per
//! binary message into the same path a TCP client's frames take
//! ([`ShardState::client_frame`]), and every frame to the client as one
//! binary message. The protocol is tungstenite's, sans IO
//! (`runtime/websocket.rs`); the bytes are the reactor's, as for TCP.
//!
//! A connection is a session only once upgraded: the upgrade opens it
//! through [`ShardState::accepted`], as a TCP accept does, so the session
//! limit, a drain and the callbacks treat both alike. Until then it is in
//! `ws` alone, bounded by the handshake deadline and tungstenite's 64 KiB
//! request limit.

use super::ShardState;
use crate::core::trace::FlowTrace;
use crate::net::ConnId;
use crate::runtime::websocket::{close_code, Handshake, WsConn, WsRead};
use crate::wire::client::{ClientFrame, CloseReason};
use tungstenite::protocol::frame::coding::CloseCode;

impl ShardState {
    /// Whether `conn` came through the WebSocket listener (cheap while the
    /// shard has no WebSocket connection).
    pub(super) fn is_websocket(&self, conn: ConnId) -> bool {
        !self.ws.is_empty() && self.ws.contains_key(&conn)
    }

    /// A connection on the WebSocket listener: its upgrade must finish
    /// within the handshake deadline.
    pub(super) fn ws_accepted(&mut self, conn: ConnId) {
        let Some(policy) = &self.node.websocket else {
            self.reactor.close(conn);
            return;
        };
        // Before its upgrade a connection is no session, so `max_sessions`
        // does not bound it; this does, with what each may buffer. A
        // client's request usually arrives with its connection, so even a
        // burst of reconnecting browsers keeps few in progress at once.
        if self.ws_handshakes.armed() >= self.node.settings.websocket_upgrades_max {
            tracing::debug!(
                ?conn,
                "websocket upgrades in progress at their bound: closing"
            );
            self.core.trace(FlowTrace::WebSocketUpgradesFull);
            self.reactor.abort(conn);
            return;
        }
        self.ws.insert(conn, WsConn::accept(policy));
        self.ws_handshakes.arm(conn, self.wall);
    }

    /// Bytes on a WebSocket connection: the upgrade first, then messages,
    /// each one client frame.
    pub(super) fn ws_received(&mut self, conn: ConnId) {
        let Some(ws) = self.ws.get_mut(&conn) else {
            return;
        };
        if let Some(inbound) = self.reactor.inbound(conn) {
            ws.feed(inbound.split());
        }
        if !ws.is_open() {
            match ws.handshake() {
                Handshake::Pending => return self.ws_flush(conn),
                Handshake::Upgraded => {
                    self.ws_handshakes.disarm(conn);
                    self.ws_flush(conn);
                    // The session opens now, as a TCP one at its accept.
                    self.accepted(conn);
                }
                Handshake::Refused { origin, detail } => {
                    tracing::debug!(?conn, origin, %detail, "websocket upgrade refused");
                    self.core.trace(if origin {
                        FlowTrace::WebSocketOriginRefused
                    } else {
                        FlowTrace::WebSocketUpgradeRefused
                    });
                    self.ws_handshakes.disarm(conn);
                    self.ws_flush(conn);
                    self.ws.remove(&conn);
                    self.reactor.close(conn);
                    return;
                }
            }
        }
        self.ws_messages(conn);
        self.ws_flush(conn);
        // Answers tungstenite wrote on its own (a pong for every ping) go
        // out as frames do: a client that pings and never reads is cut at
        // the same bound (docs/threading.md "Slow readers").
        self.ws_bound(conn);
    }

    /// Reads every whole message of an upgraded connection into the
    /// session, until none is left or the connection closed.
    fn ws_messages(&mut self, conn: ConnId) {
        let limits = self.node.settings.decode_limits;
        loop {
            // A session closed meanwhile (or refused at the upgrade) reads
            // no further.
            let Some(&rid) = self.conns.get(&conn) else {
                return;
            };
            let Some(ws) = self.ws.get_mut(&conn) else {
                return;
            };
            match ws.next_message() {
                WsRead::Binary(message) => match ClientFrame::decode_message(message, &limits) {
                    Ok(frame) => {
                        if !self.client_frame(rid, conn, frame) {
                            return;
                        }
                    }
                    Err(error) => {
                        tracing::debug!(?rid, %error, "malformed client frame in a websocket message");
                        return self.close_with(rid, conn, CloseReason::ProtocolError);
                    }
                },
                // A message begun and not whole is a partial TCP frame.
                WsRead::Pending { begun } => return self.frame_pending(rid, begun),
                WsRead::Closed => {
                    // The client closed: its close frame is answered (in the
                    // output), then the connection ends as a TCP one does
                    // when the client closes it.
                    self.ws_flush(conn);
                    self.ws.remove(&conn);
                    self.reactor.close(conn);
                    self.conns.remove(&conn);
                    let now = self.now();
                    self.core.sessions(now).connection_lost(rid);
                    return;
                }
                WsRead::TooLarge(detail) => {
                    tracing::debug!(?rid, %detail, "websocket message over the client frame limit");
                    self.core.trace(FlowTrace::WebSocketMessageTooLarge);
                    self.write_frame(
                        conn,
                        &ClientFrame::Close {
                            reason: CloseReason::ProtocolError,
                        },
                    );
                    self.ws_close_with_code(conn, CloseCode::Size, "message over the frame limit");
                    return self.close_with(rid, conn, CloseReason::ProtocolError);
                }
                WsRead::Protocol { text, detail } => {
                    tracing::debug!(?rid, %detail, "websocket protocol error");
                    self.core.trace(FlowTrace::WebSocketProtocolError);
                    let (code, why) = if text {
                        (CloseCode::Unsupported, "client frames are binary messages")
                    } else {
                        (CloseCode::Protocol, "websocket protocol error")
                    };
                    self.write_frame(
                        conn,
                        &ClientFrame::Close {
                            reason: CloseReason::ProtocolError,
                        },
                    );
                    self.ws_close_with_code(conn, code, why);
                    return self.close_with(rid, conn, CloseReason::ProtocolError);
                }
            }
        }
    }

    /// One frame to a WebSocket client, as one binary message; a client
    /// that lets its outbound bytes grow past the bound is disconnected, as
    /// a TCP one.
    pub(super) fn ws_write_frame(&mut self, conn: ConnId, frame: &ClientFrame) {
        let Some(ws) = self.ws.get_mut(&conn) else {
            return;
        };
        if !ws.send_frame(frame, &mut self.ws_scratch) {
            return;
        }
        self.ws_flush(conn);
        self.ws_bound(conn);
    }

    /// A WebSocket client whose outbound bytes grew past the bound is
    /// disconnected, counted, as a TCP one.
    fn ws_bound(&mut self, conn: ConnId) {
        if self.ws.contains_key(&conn) && self.cut_over_bound(conn) {
            self.ws.remove(&conn);
        }
    }

    /// Before the connection closes: the close frame that says why (the
    /// Close client frame went first, as a message). Nothing is written to
    /// the connection after it.
    pub(super) fn ws_close(&mut self, conn: ConnId, reason: CloseReason) {
        self.ws_close_with_code(conn, close_code(reason), &format!("{reason:?}"));
        self.ws.remove(&conn);
        self.ws_handshakes.disarm(conn);
    }

    fn ws_close_with_code(&mut self, conn: ConnId, code: CloseCode, why: &str) {
        if let Some(ws) = self.ws.get_mut(&conn) {
            ws.close(code, why);
        }
        self.ws_flush(conn);
    }

    /// The connection ended (the reactor's `Closed`): its protocol state
    /// and any upgrade deadline go with it.
    pub(super) fn ws_closed(&mut self, conn: ConnId) {
        if self.ws.remove(&conn).is_some() {
            self.ws_handshakes.disarm(conn);
        }
    }

    /// Moves what tungstenite wrote (the 101 or a refusal, messages, close
    /// frames, answers to pings) into the connection's outbound buffer.
    fn ws_flush(&mut self, conn: ConnId) {
        let (Some(ws), Some(outbound)) = (self.ws.get_mut(&conn), self.reactor.outbound(conn))
        else {
            return;
        };
        ws.drain_output(outbound);
    }

    /// Closes every connection whose upgrade did not finish by its
    /// deadline, counted (docs/threading.md "Timeouts on the edges").
    pub(super) fn expire_ws_handshakes(&mut self) {
        for conn in self.ws_handshakes.expire(self.wall) {
            if self.ws.remove(&conn).is_some() {
                tracing::debug!(?conn, "websocket upgrade not finished by its deadline");
                self.core.trace(FlowTrace::WebSocketHandshakeTimeout);
                self.reactor.close(conn);
            }
        }
    }
}
