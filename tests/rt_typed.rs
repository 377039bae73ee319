//! Typed messages and application errors over real sockets (issue 21 item
//! 4; docs/wire.md "Typed payloads", docs/actors.md "Typed messages"): a
//! typed request reaches a typed session handler or is relayed to an Actor
//! on another node and its typed reply comes back to `Client::call`; the
//! game's own error (`Error::app`) reaches the client as kind Application
//! with its code and detail, from a handler, from an Actor across a link and
//! between two Actors; a payload that does not decode is a typed error that
//! names the type and leaves the session working; a framework error names
//! the Actor, type or key it is about, and never a node.

mod bound;
mod runtime_support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use runtime_support::*;
use serde::{Deserialize, Serialize};
use zlink::prelude::*;
use zlink::store::CountingStore;

/// Typed LOGIN, answered by the session handler itself: binds the warrior
/// it names (created where its home node is, here node 2).
#[derive(Debug, Serialize, Deserialize)]
struct Enter {
    warrior: String,
}
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Welcome {
    warrior: String,
    health: u32,
}
impl Message for Enter {
    const KEY: PacketKey = PacketKey(40);
    type Reply = Welcome;
}

/// Relayed to the bound warrior, which answers with the health it has left.
#[derive(Debug, Serialize, Deserialize)]
struct Strike {
    warrior: String,
    damage: u32,
}
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Health {
    left: u32,
}
impl Message for Strike {
    const KEY: PacketKey = PacketKey(41);
    type Reply = Health;
}

/// Relayed to the bound warrior `warrior`, which asks the warrior `ally`
/// for a cheer (a typed request between Actors) and pushes the outcome to
/// its client as a [`Rallied`].
#[derive(Debug, Serialize, Deserialize)]
struct Rally {
    warrior: String,
    ally: String,
}
impl Message for Rally {
    const KEY: PacketKey = PacketKey(42);
    type Reply = ();
}

/// Between Actors: one warrior asks another for a cheer.
#[derive(Debug, Serialize, Deserialize)]
struct Cheer {
    from: String,
}
impl Message for Cheer {
    const KEY: PacketKey = PacketKey(43);
    type Reply = String;
}

/// Pushed by a warrior when its [`Cheer`] request ended: the reply, or the
/// error's kind, code and detail as the warrior's `on_reply` saw them.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
enum Rallied {
    Cheered(String),
    Refused {
        application: bool,
        code: u32,
        detail: String,
    },
}
impl Message for Rallied {
    const KEY: PacketKey = PacketKey(44);
    type Reply = ();
}

/// The game's own error codes.
const STRIKE_TOO_HARD: u32 = 1001;
const NO_NAME: u32 = 400;
const TOO_TIRED: u32 = 429;

/// A warrior: its health; a warrior named "tired-…" refuses to cheer.
struct Warrior {
    name: String,
    health: u32,
}

impl Actor for Warrior {
    fn handle(
        &mut self,
        ctx: &mut dyn ActorContext,
        m: ActorMessage,
    ) -> Option<Result<Bytes, Error>> {
        match m.key {
            Strike::KEY => m.answer(|strike: Strike| {
                if strike.damage > 100 {
                    return Err(Error::app(
                        STRIKE_TOO_HARD,
                        format!("a strike of {} is more than 100", strike.damage),
                    ));
                }
                self.health = self.health.saturating_sub(strike.damage);
                Ok(Health { left: self.health })
            }),
            Rally::KEY => m.answer(|rally: Rally| {
                let ally = ActorId::new(&rally.ally).map_err(|_| Error::app(NO_NAME, "no ally"))?;
                let cheer = Cheer {
                    from: self.name.clone(),
                };
                ctx.request_typed(&ally, &cheer, WAIT).map(|_| ())
            }),
            Cheer::KEY => m.answer(|cheer: Cheer| {
                if self.name.starts_with("tired") {
                    return Err(Error::app(TOO_TIRED, format!("{} is too tired", self.name)));
                }
                Ok(format!("{} cheers {}", self.name, cheer.from))
            }),
            _ => Some(Err(Reason::NoPacketHandler.into())),
        }
    }

    fn on_reply(&mut self, ctx: &mut dyn ActorContext, _: CallId, outcome: Result<Bytes, Error>) {
        let rallied = match typed::decode_reply::<Cheer>(outcome) {
            Ok(cheer) => Rallied::Cheered(cheer),
            Err(e) => Rallied::Refused {
                application: e.kind() == ErrorKind::Application,
                code: e.code(),
                detail: e.detail().to_owned(),
            },
        };
        ctx.push_typed(&rallied)
            .expect("the warrior's session is bound");
    }
}

struct Camp;
impl Spot for Camp {
    fn on_disconnect_actor(&self, _: &ActorId) -> Result<(), Error> {
        Ok(())
    }
}

/// Adds the typed game to a test node: the "warrior" type, the typed
/// ENTER handler and the relays of STRIKE and RALLY.
fn typed_game(builder: NodeBuilder) -> NodeBuilder {
    builder
        .actor_type("warrior", Arc::new(Camp), |id| {
            Box::new(Warrior {
                name: id.as_str().to_owned(),
                health: 100,
            })
        })
        .on_message(|session: Session, enter: Enter| async move {
            let id =
                ActorId::new(&enter.warrior).map_err(|_| Error::app(NO_NAME, "a name, please"))?;
            let warrior = session.actor("warrior", &id).await?;
            session.actors().bind(warrior).await?;
            Ok(Welcome {
                warrior: enter.warrior,
                health: 100,
            })
        })
        .on_packet(Strike::KEY, |session, packet| async move {
            // Read the packet's type here, relay it whole: the warrior
            // decodes it again and answers the client directly (§5).
            let strike = packet.decode::<Strike>()?;
            relay_to(&session, &strike.warrior, packet)
        })
        .on_packet(Rally::KEY, |session, packet| async move {
            let rally = packet.decode::<Rally>()?;
            relay_to(&session, &rally.warrior, packet)
        })
}

fn relay_to(session: &Session, warrior: &str, packet: Packet) -> Result<(), Error> {
    let id = ActorId::new(warrior).map_err(|_| Error::app(NO_NAME, "a name, please"))?;
    let bound = session.actors().find(&id);
    bound
        .ok_or(Error::new(Reason::SessionNotBound))?
        .relay(packet)
}

/// Nodes 1 and 2 on one store, linked, each with the typed game.
fn typed_mesh() -> Vec<Game> {
    let store = Arc::new(CountingStore::new(EmbeddedStore::new(
        MonotonicClock::new(),
        Duration::from_secs(60),
    )));
    // With `configure` the node lists its peers itself: node 2 takes node
    // 1's link, node 1 dials node 2.
    let options = |accept: Option<u64>| GameOptions {
        configure: Some(Arc::new(move |builder: NodeBuilder| {
            let builder = typed_game(builder);
            match accept {
                Some(rid) => builder.accept_peer(rid),
                None => builder,
            }
        })),
        ..GameOptions::default()
    };
    let two = start_node(2, Arc::clone(&store), options(Some(1)), &[]);
    let peer = [(2, two.node.peer_addr().unwrap())];
    let one = start_node(1, store, options(None), &peer);
    assert!(one.node.wait_linked(2, WAIT), "link 1 -> 2 did not come up");
    assert!(two.node.wait_linked(1, WAIT), "link 2 -> 1 did not come up");
    vec![one, two]
}

/// The typed error a call ended with.
fn remote<T: std::fmt::Debug>(outcome: Result<T, ClientError>) -> Error {
    match outcome {
        Err(ClientError::Remote(error)) => error,
        other => panic!("expected a typed error from the server, got {other:?}"),
    }
}

/// Logs `warrior` in on `game` (a client there), the warrior hosted on
/// `home`.
fn enter(game: &Game, home: &Game, warrior: &str) -> Client {
    home.node.create_actor("warrior", &id(warrior)).unwrap();
    let mut client = game.client();
    let welcome = client
        .call(
            &Enter {
                warrior: warrior.to_owned(),
            },
            WAIT,
        )
        .unwrap();
    assert_eq!(
        welcome,
        Welcome {
            warrior: warrior.to_owned(),
            health: 100
        }
    );
    client
}

#[test]
fn e1_a_typed_request_crosses_a_link_and_an_application_error_reaches_the_client_with_its_code_and_detail(
) {
    let mesh = typed_mesh();
    // Given a client on node 1 whose warrior lives on node 2,
    let mut client = enter(&mesh[0], &mesh[1], "ann");

    // when it strikes, the typed request is relayed across the link and the
    // typed reply comes back;
    let strike = |damage| Strike {
        warrior: "ann".to_owned(),
        damage,
    };
    assert_eq!(client.call(&strike(30), WAIT).unwrap(), Health { left: 70 });
    assert_eq!(client.call(&strike(30), WAIT).unwrap(), Health { left: 40 });

    // when the warrior refuses with the game's own error, it reaches the
    // client as its own kind, with its code and detail, across the link;
    let error = remote(client.call(&strike(500), WAIT));
    assert_eq!(error.kind(), ErrorKind::Application, "{error}");
    assert_eq!(error.reason(), Reason::Application);
    assert_eq!(error.code(), STRIKE_TOO_HARD);
    assert_eq!(error.detail(), "a strike of 500 is more than 100");
    assert_eq!(
        error.to_string(),
        "application error 1001: a strike of 500 is more than 100"
    );

    // and so does one from a session's typed handler (no warrior named).
    let error = remote(client.call(
        &Enter {
            warrior: String::new(),
        },
        WAIT,
    ));
    assert_eq!(
        (error.kind(), error.code()),
        (ErrorKind::Application, NO_NAME)
    );
    assert_eq!(error.detail(), "a name, please");

    // The refused strike changed nothing: the session still works.
    assert_eq!(client.call(&strike(10), WAIT).unwrap(), Health { left: 30 });
}

#[test]
fn e1_typed_requests_between_actors_carry_the_reply_and_the_application_error() {
    let mesh = typed_mesh();
    // Given ann on node 2, bound to a client on node 1, and two allies on
    // node 1: one cheers, one is too tired to.
    let mut client = enter(&mesh[0], &mesh[1], "ann");
    mesh[0].node.create_actor("warrior", &id("bob")).unwrap();
    mesh[0]
        .node
        .create_actor("warrior", &id("tired-cy"))
        .unwrap();

    // When ann rallies each (a typed request from ann to the ally, across
    // the link), each outcome comes back to ann's on_reply, which pushes it
    // typed to her client.
    let mut rallied = Vec::new();
    for ally in ["bob", "tired-cy"] {
        let rally = Rally {
            warrior: "ann".to_owned(),
            ally: ally.to_owned(),
        };
        client.call(&rally, WAIT).unwrap();
        loop {
            match client
                .next_event(WAIT)
                .unwrap()
                .expect("a push within the wait")
            {
                ClientEvent::Push { key, payload } if key == Rallied::KEY => {
                    rallied.push(typed::decode::<Rallied>(&payload).unwrap());
                    break;
                }
                ClientEvent::Closed(reason) => panic!("closed: {reason:?}"),
                _ => {}
            }
        }
    }

    // Then the reply is the ally's typed reply, and the refusal is the
    // ally's own error: kind Application, its code and detail.
    assert_eq!(
        rallied,
        vec![
            Rallied::Cheered("bob cheers ann".to_owned()),
            Rallied::Refused {
                application: true,
                code: TOO_TIRED,
                detail: "tired-cy is too tired".to_owned()
            }
        ]
    );
}

#[test]
fn a_payload_that_does_not_decode_is_a_typed_error_naming_the_type() {
    let mesh = typed_mesh();
    let mut client = enter(&mesh[0], &mesh[1], "ann");
    let garbage = || Bytes::from_static(b"\x01\xc1");

    // Bytes that are not an Enter, to the typed session handler: a typed
    // error naming Enter; the handler never ran.
    let error = remote(client.request(Enter::KEY, garbage(), WAIT));
    assert_eq!(error.kind(), ErrorKind::InvalidOperation, "{error}");
    assert_eq!(error.reason(), Reason::MalformedPayload);
    assert!(error.detail().starts_with("type "), "{error}");
    assert!(error.detail().contains("Enter"), "{error}");

    // Bytes that are a Strike for the session's handler but not for the
    // Actor — a map missing "damage" — are refused by the session handler
    // before any relay, naming Strike.
    let no_damage = typed::encode(&BTreeMap::from([("warrior", "ann")])).unwrap();
    let error = remote(client.request(Strike::KEY, no_damage, WAIT));
    assert_eq!(error.reason(), Reason::MalformedPayload, "{error}");
    assert!(error.detail().contains("Strike"), "{error}");
    assert!(error.detail().contains("damage"), "{error}");

    // A reply that is not the reply type is the client's own typed error.
    #[derive(Debug, Serialize, Deserialize)]
    struct StrikeForText {
        warrior: String,
        damage: u32,
    }
    impl Message for StrikeForText {
        const KEY: PacketKey = Strike::KEY;
        type Reply = String;
    }
    let wrong = client.call(
        &StrikeForText {
            warrior: "ann".to_owned(),
            damage: 1,
        },
        WAIT,
    );
    match wrong {
        Err(ClientError::Payload(e)) => {
            assert_eq!(e.reason(), Reason::MalformedPayload);
            assert!(e.detail().contains("String"), "{e}");
        }
        other => panic!("expected the client's payload error, got {other:?}"),
    }

    // The session is still open and served.
    let strike = Strike {
        warrior: "ann".to_owned(),
        damage: 10,
    };
    assert_eq!(client.call(&strike, WAIT).unwrap(), Health { left: 89 });
}

#[test]
fn e1_a_framework_error_names_what_it_is_about_and_never_a_node() {
    let mesh = typed_mesh();
    let mut client = enter(&mesh[0], &mesh[1], "ann");
    let mut details = Vec::new();

    // A key no handler takes names the key.
    let error = remote(client.request(PacketKey(99), Bytes::new(), WAIT));
    assert_eq!(error.reason(), Reason::NoPacketHandler);
    assert_eq!(error.detail(), "packet key 99");
    details.push(error);

    // A relayed request that the Actor's owner refuses — ann was destroyed
    // on node 2 — comes back naming the Actor.
    mesh[1].node.destroy_actor(&id("ann")).unwrap();
    let strike = Strike {
        warrior: "ann".to_owned(),
        damage: 1,
    };
    let error = remote(client.call(&strike, WAIT));
    assert_eq!(error.reason(), Reason::StaleLocation, "{error}");
    assert_eq!(error.detail(), "actor ann", "{error}");
    details.push(error);

    // An Actor type no node has a factory for names the type.
    let error = mesh[0].node.create_actor("ghost", &id("boo")).unwrap_err();
    assert_eq!(error.reason(), Reason::NoActorFactory);
    assert_eq!(error.detail(), "type ghost");
    details.push(error);

    // No detail carries a node: not its RID, its NodeGeneration or its
    // addresses (§1) — each is one of the words above.
    for game in &mesh {
        let addrs = [game.addr(), game.node.peer_addr().unwrap()];
        for error in &details {
            for addr in addrs {
                assert!(!error.detail().contains(&addr.to_string()), "{error}");
                assert!(
                    !error.detail().contains(&addr.port().to_string()),
                    "{error}"
                );
            }
        }
    }
    for error in &details {
        let about = ["actor ", "type ", "packet key "];
        assert!(
            about.iter().any(|w| error.detail().starts_with(w)),
            "{error}"
        );
    }
}
