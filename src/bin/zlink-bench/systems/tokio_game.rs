//! `tokio`: the game on plain tokio as a user would write it (issue 5 item
//! 2): each player is a task draining a bounded mpsc mailbox, found in a
//! `HashMap` behind a mutex; the session side is [`super::game_server`].
//! A `mixed` room is such a task too, which also ticks: its loop selects
//! between its mailbox and its own `Interval`, the tokio way to give a
//! task a periodic job.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::mpsc;

use super::game_server::{self, room_interval, Directory, PlayerState, RoomClock, ToPlayer};
use super::Running;
use crate::client::LoadSpec;

/// Messages queued for one player; a full mailbox makes the session wait.
const MAILBOX_MAX: usize = 1_024;

struct Players {
    by_name: Mutex<HashMap<String, mpsc::Sender<ToPlayer>>>,
    /// `mixed`: each room's tick period and push payload bytes.
    tick: Duration,
    payload_len: usize,
}

impl Players {
    /// `name`'s mailbox, or a new task for it that `spawn` starts with
    /// the receiving end.
    fn find_or(
        &self,
        name: &str,
        spawn: impl FnOnce(mpsc::Receiver<ToPlayer>) -> Result<(), String>,
    ) -> Result<mpsc::Sender<ToPlayer>, String> {
        let mut by_name = self.by_name.lock().map_err(|_| "players lock poisoned")?;
        if let Some(player) = by_name.get(name) {
            return Ok(player.clone());
        }
        let (tx, rx) = mpsc::channel(MAILBOX_MAX);
        spawn(rx)?;
        by_name.insert(name.to_owned(), tx.clone());
        Ok(tx)
    }
}

impl Directory for Players {
    type Player = mpsc::Sender<ToPlayer>;

    async fn find_or_spawn(&self, name: &str) -> Result<Self::Player, String> {
        self.find_or(name, |mut rx| {
            tokio::spawn(async move {
                let mut state = PlayerState::default();
                while let Some(message) = rx.recv().await {
                    state.handle(message).await;
                }
            });
            Ok(())
        })
    }

    async fn find_or_spawn_room(&self, name: &str) -> Result<Self::Player, String> {
        self.find_or(name, |mut rx| {
            let clock = RoomClock::new(name, self.tick, self.payload_len)?;
            let mut ticks = room_interval(clock.first(), self.tick);
            tokio::spawn(async move {
                let mut state = PlayerState::room(clock);
                loop {
                    let message = tokio::select! {
                        message = rx.recv() => match message {
                            Some(message) => message,
                            None => return,
                        },
                        _ = ticks.tick() => ToPlayer::Tick,
                    };
                    state.handle(message).await;
                }
            });
            Ok(())
        })
    }

    fn hosted(&self) -> Option<usize> {
        self.by_name.lock().ok().map(|by_name| by_name.len())
    }

    async fn deliver(player: &Self::Player, message: ToPlayer) -> Result<(), String> {
        player
            .send(message)
            .await
            .map_err(|_| "the player task ended".to_owned())
    }
}

pub fn start(spec: &LoadSpec) -> Result<Box<dyn Running>, String> {
    let players = Players {
        by_name: Mutex::new(HashMap::new()),
        tick: spec.tick,
        payload_len: spec.payload_len,
    };
    game_server::start("tokio-game", players, spec)
}
