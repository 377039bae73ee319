//! `tokio`: the game on plain tokio as a user would write it (issue 5 item
//! 2): each player is a task draining a bounded mpsc mailbox, found in a
//! `HashMap` behind a mutex; the session side is [`super::game_server`].

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::mpsc;

use super::game_server::{self, Directory, PlayerState, ToPlayer};
use super::Running;
use crate::client::LoadSpec;

/// Messages queued for one player; a full mailbox makes the session wait.
const MAILBOX_MAX: usize = 1_024;

#[derive(Default)]
struct Players {
    by_name: Mutex<HashMap<String, mpsc::Sender<ToPlayer>>>,
}

impl Directory for Players {
    type Player = mpsc::Sender<ToPlayer>;

    async fn find_or_spawn(&self, name: &str) -> Result<Self::Player, String> {
        let mut by_name = self.by_name.lock().map_err(|_| "players lock poisoned")?;
        if let Some(player) = by_name.get(name) {
            return Ok(player.clone());
        }
        let (tx, mut rx) = mpsc::channel(MAILBOX_MAX);
        tokio::spawn(async move {
            let mut state = PlayerState::default();
            while let Some(message) = rx.recv().await {
                state.handle(message).await;
            }
        });
        by_name.insert(name.to_owned(), tx.clone());
        Ok(tx)
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
    game_server::start("tokio-game", Players::default(), spec)
}
