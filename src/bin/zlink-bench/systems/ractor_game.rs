//! `ractor`: the game on the ractor actor framework (issue 5 item 2): an
//! actor per player, found in a `HashMap` behind a mutex; the session side
//! is [`super::game_server`] (ractor runs on the same tokio runtime). A
//! `mixed` room is an actor too, ticked by a task of its own that sends it
//! a tick message on an `Interval` (ractor's `send_interval` does the same
//! but queues every tick, even one due while the last is still queued;
//! this ticker skips it instead, zlink's rule, so that both run one tick
//! semantics).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::Mutex;

use super::game_server::{self, room_interval, Directory, PlayerState, RoomClock, ToPlayer};
use super::Running;
use crate::client::LoadSpec;

/// The player (or room) actor; its state is the shared [`PlayerState`],
/// given at spawn.
struct Player;

impl Actor for Player {
    type Msg = ToPlayer;
    type State = PlayerState;
    type Arguments = PlayerState;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(state)
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
struct Players {
    by_name: Mutex<HashMap<String, ActorRef<ToPlayer>>>,
    /// `mixed`: each room's tick period and push payload bytes.
    tick: Duration,
    payload_len: usize,
}

impl Players {
    /// `name`'s actor, or a new one started with `state`.
    async fn find_or(
        &self,
        name: &str,
        state: impl FnOnce() -> Result<PlayerState, String>,
    ) -> Result<(ActorRef<ToPlayer>, bool), String> {
        let mut by_name = self.by_name.lock().await;
        if let Some(player) = by_name.get(name) {
            return Ok((player.clone(), false));
        }
        let (player, _handle) = Actor::spawn(None, Player, state()?)
            .await
            .map_err(|e| format!("spawning {name}: {e}"))?;
        by_name.insert(name.to_owned(), player.clone());
        Ok((player, true))
    }
}

impl Directory for Players {
    type Player = ActorRef<ToPlayer>;

    async fn find_or_spawn(&self, name: &str) -> Result<Self::Player, String> {
        let (player, _) = self.find_or(name, || Ok(PlayerState::default())).await?;
        Ok(player)
    }

    async fn find_or_spawn_room(&self, name: &str) -> Result<Self::Player, String> {
        let mut ticker = None;
        let (room, spawned) = self
            .find_or(name, || {
                let mut clock = RoomClock::new(name, self.tick, self.payload_len)?;
                ticker = Some((room_interval(clock.first(), self.tick), clock.pending()));
                Ok(PlayerState::room(clock))
            })
            .await?;
        if let (true, Some((mut ticks, pending))) = (spawned, ticker) {
            let actor = room.clone();
            tokio::spawn(async move {
                loop {
                    ticks.tick().await;
                    if pending.swap(true, Ordering::AcqRel) {
                        // The last tick is still queued or running: skip.
                        continue;
                    }
                    if actor.send_message(ToPlayer::Tick).is_err() {
                        return;
                    }
                }
            });
        }
        Ok(room)
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
    let players = Players {
        by_name: Mutex::new(HashMap::new()),
        tick: spec.tick,
        payload_len: spec.payload_len,
    };
    game_server::start("ractor-game", players, spec)
}
