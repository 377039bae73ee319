//! Two nodes in one process: a gateway that takes clients and hosts no
//! Actors, and a game server that hosts them. A client connected to the
//! gateway reaches an Actor on the game server by its ActorId alone; so
//! does node code on the gateway. Nothing in the game names a node.
//!
//! ```sh
//! cargo run --example two_nodes
//! ```
//!
//! It exits 0 when every check below held, and 1 with the reason when one
//! did not (or when something did not happen within its deadline).

use std::error::Error as StdError;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use zlink::prelude::*;

/// Every wait in this example is bounded by this: a hang is a failure with
/// a message, never a stuck CI step.
const WAIT: Duration = Duration::from_secs(5);

/// GREET: asks the greeter for a greeting. The reply says how many
/// greetings the greeter gave so far, wherever they came from.
#[derive(Serialize, Deserialize)]
struct Greet {
    name: String,
}
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Greeting {
    text: String,
    count: u64,
}
impl Message for Greet {
    const KEY: PacketKey = PacketKey(1);
    type Reply = Greeting;
}

/// The game's own error code: a greeting needs a name.
const NO_NAME: u32 = 400;

/// The one Actor of this example. It lives on the game server (node 2).
#[derive(Default)]
struct Greeter {
    count: u64,
}

impl Actor for Greeter {
    fn handle(
        &mut self,
        _: &mut dyn ActorContext,
        m: ActorMessage,
    ) -> Option<Result<Bytes, Error>> {
        match m.key {
            Greet::KEY => m.answer(|greet: Greet| {
                if greet.name.is_empty() {
                    // Reaches the client as kind Application, code 400,
                    // across the link like any reply.
                    return Err(Error::app(NO_NAME, "a greeting needs a name"));
                }
                self.count += 1;
                Ok(Greeting {
                    text: format!("hello, {}", greet.name),
                    count: self.count,
                })
            }),
            _ => Some(Err(Reason::NoPacketHandler.into())),
        }
    }
}

/// Every Actor belongs to a Spot, which hears when a session bound to one
/// of its Actors goes away (§7). The greeter has nothing to clean up.
struct Hall;
impl Spot for Hall {
    fn on_disconnect_actor(&self, _: &ActorId) -> Result<(), Error> {
        Ok(())
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => {
            println!("two_nodes: every check held");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("two_nodes: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn StdError>> {
    // Both nodes must agree on where every Actor is: one Location Store.
    // The embedded one lives in this process, so two nodes share it
    // through an Arc; nodes in separate processes would share a Redis.
    let store = Arc::new(EmbeddedStore::new(
        MonotonicClock::new(),
        Duration::from_secs(10),
    ));
    // Links between nodes authenticate with a secret every node of the
    // cluster holds (in production: from a file or the environment).
    let secret = ClusterSecret::new(b"two-nodes-example-secret".to_vec())?;
    // Two nodes share this process's cores: one shard each, not pinned.
    let settings = NodeSettings {
        shards: 1,
        pin_cores: false,
        ..NodeSettings::default()
    };

    // Node 2, the game server, hosts the greeter. Of two linked nodes the
    // one with the lower RID dials, so node 2 only accepts node 1's link
    // and is started first, to have a peer address to give node 1.
    let game_server = NodeBuilder::new(2)
        .listen("127.0.0.1:0".parse()?)
        .peer_listen("127.0.0.1:0".parse()?)
        .cluster_secret(secret.clone())
        .accept_peer(1)
        .object_role(ObjectRole::Server)
        .location_store(store.clone())
        .enable_actor_dispatch()
        .actor_type("greeter", Arc::new(Hall), |_| Box::<Greeter>::default())
        .settings(settings.clone())
        .start()?;
    let peer_addr = game_server
        .peer_addr()
        .ok_or("node 2 has no peer address")?;

    let greeter = ActorId::new("greeter")?;
    let greeter_id = greeter.clone();

    // Node 1, the gateway: clients connect here, and it hosts no Actors
    // (ObjectRole::Client), so every request it takes crosses the link.
    let gateway = NodeBuilder::new(1)
        .listen("127.0.0.1:0".parse()?)
        .peer(2, peer_addr)
        .cluster_secret(secret)
        .object_role(ObjectRole::Client)
        .location_store(store)
        .enable_actor_dispatch()
        .settings(settings)
        .on_packet(Greet::KEY, move |session, packet| {
            let id = greeter_id.clone();
            async move {
                // The first GREET of a session binds it to the greeter: the
                // look-up finds the greeter's row in the store, wherever it
                // lives. Later ones reuse the binding and read no store.
                let greeter = match session.actors().find(&id) {
                    Some(bound) => bound,
                    None => {
                        let found = session.actor("greeter", &id).await?;
                        session.actors().bind(found).await?
                    }
                };
                // Relayed as it is: the greeter decodes it and its reply
                // goes straight back to this client (§5).
                greeter.relay(packet)
            }
        })
        .start()?;
    if !gateway.wait_linked(2, WAIT) {
        return Err("the link from node 1 to node 2 did not come up".into());
    }

    game_server.create_actor("greeter", &greeter)?;

    // A client on node 1 greets the Actor on node 2.
    let mut client = Client::connect(gateway.stream_addr().ok_or("node 1 has no address")?)?;
    let ann = client.call(&Greet { name: "ann".into() }, WAIT)?;
    expect(
        ann.text == "hello, ann" && ann.count == 1,
        "ann's greeting",
        &ann,
    )?;

    // Node code on node 1 (a service thread, an admin endpoint) reaches the
    // same Actor through the node's caller; `wait` blocks this thread, which
    // is fine here: it is not one of the node's shards.
    let payload = typed::encode(&Greet { name: "ops".into() })?;
    let reply = gateway
        .caller()
        .request(&greeter, Greet::KEY, payload, WAIT);
    let ops = typed::decode_reply::<Greet>(reply.wait())?;
    expect(ops.count == 2, "the node code's greeting", &ops)?;

    // The game's own error comes back across the link with its code.
    match client.call(
        &Greet {
            name: String::new(),
        },
        WAIT,
    ) {
        Err(ClientError::Remote(e)) if e.kind() == ErrorKind::Application => {
            expect(e.code() == NO_NAME, "the error's code", &e)?
        }
        other => return Err(format!("an empty name gave {other:?}").into()),
    }

    // The greeter kept its count across both paths: one Actor, on node 2.
    let ann = client.call(&Greet { name: "ann".into() }, WAIT)?;
    expect(ann.count == 3, "ann's second greeting", &ann)?;
    let hosted = (gateway.actor_count(), game_server.actor_count());
    expect(
        hosted == (0, 1),
        "Actors hosted on (node 1, node 2)",
        &hosted,
    )?;
    println!("greeted {} times through node 1, all on node 2", ann.count);

    drop(client);
    gateway.shutdown();
    game_server.shutdown();
    Ok(())
}

/// A check: `Err` naming `what` and the value seen when `holds` is false.
fn expect(holds: bool, what: &str, seen: &dyn std::fmt::Debug) -> Result<(), Box<dyn StdError>> {
    if holds {
        Ok(())
    } else {
        Err(format!("{what}: unexpected {seen:?}").into())
    }
}
