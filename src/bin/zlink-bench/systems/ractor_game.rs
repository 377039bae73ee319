//! `ractor`: the game on the ractor actor framework (issue 5 item 2): an
//! actor per player, found in a `HashMap` behind a mutex; the session side
//! is [`super::game_server`] (ractor runs on the same tokio runtime).

use std::collections::HashMap;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::Mutex;

use super::game_server::{self, Directory, PlayerState, ToPlayer};
use super::Running;
use crate::client::LoadSpec;

/// The player actor; its state is the shared [`PlayerState`].
struct Player;

impl Actor for Player {
    type Msg = ToPlayer;
    type State = PlayerState;
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        _args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(PlayerState::default())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.handle(message).await;
        Ok(())
    }
}

/// The players by name; a tokio mutex, since spawning an actor awaits.
#[derive(Default)]
struct Players {
    by_name: Mutex<HashMap<String, ActorRef<ToPlayer>>>,
}

impl Directory for Players {
    type Player = ActorRef<ToPlayer>;

    async fn find_or_spawn(&self, name: &str) -> Result<Self::Player, String> {
        let mut by_name = self.by_name.lock().await;
        if let Some(player) = by_name.get(name) {
            return Ok(player.clone());
        }
        let (player, _handle) = Actor::spawn(None, Player, ())
            .await
            .map_err(|e| format!("spawning player {name}: {e}"))?;
        by_name.insert(name.to_owned(), player.clone());
        Ok(player)
    }

    fn hosted(&self) -> Option<usize> {
        self.by_name.try_lock().ok().map(|by_name| by_name.len())
    }

    async fn deliver(player: &Self::Player, message: ToPlayer) -> Result<(), String> {
        player
            .send_message(message)
            .map_err(|e| format!("the player actor ended: {e}"))
    }
}

pub fn start(spec: &LoadSpec) -> Result<Box<dyn Running>, String> {
    game_server::start("ractor-game", Players::default(), spec)
}
