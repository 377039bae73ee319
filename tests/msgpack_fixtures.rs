//! The MessagePack fixtures of the TypeScript client (issue 22 item 2):
//! bytes that rmp-serde writes through `zlink::typed::encode` for the shapes
//! a game sends — structs as maps of their fields by name, enums, `Option`,
//! `Vec`, `String`, every integer width, floats, bytes, maps — committed in
//! `clients/ts/test/fixtures/msgpack.txt`, which
//! `clients/ts/test/msgpack.test.mjs` decodes and encodes byte for byte.
//!
//! `committed_fixtures_are_what_rmp_serde_writes` fails when the committed
//! file and rmp-serde disagree (an rmp-serde upgrade that changed its
//! bytes, or a fixture edited by hand); `write_fixtures` rewrites the file
//! (`cargo test --test msgpack_fixtures -- --ignored`), and the TS test
//! then says whether the client still reads and writes them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize, Serializer};
use zlink::typed;

const PATH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/clients/ts/test/fixtures/msgpack.txt"
);

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Login {
    player: String,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Move {
    dx: i64,
    dy: i64,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Position {
    x: i64,
    y: i64,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Ints {
    pos_fix: u8,
    u8_128: u8,
    u8_max: u8,
    u16_max: u16,
    u32_max: u32,
    u64_max: u64,
    neg_fix: i8,
    neg_33: i8,
    i8_min: i8,
    i16_min: i16,
    i32_min: i32,
    i64_min: i64,
    i64_max: i64,
    safe_max: i64,
    unsafe_min: i64,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Floats {
    half: f64,
    whole: f64,
    negative: f64,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Single {
    small: f32,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Profile {
    name: Option<String>,
    score: Option<u32>,
    online: bool,
    banned: bool,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Member {
    player: String,
    at: Position,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Team {
    name: String,
    members: Vec<Member>,
    tags: Vec<String>,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
enum Dir {
    Left,
    Right,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
enum Command {
    Stop,
    Say(String),
    Go { dx: i64, dy: i64 },
    Pair(u8, u8),
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Empty {}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Score(u32);

/// Bytes as MessagePack bin (what `serde_bytes` does), not as an array.
struct Bin(Vec<u8>);

impl Serialize for Bin {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

/// Every fixture: its name and its bytes. The TS test has one expected value
/// per name.
fn fixtures() -> Vec<(&'static str, Vec<u8>)> {
    fn enc<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
        typed::encode(value).expect("encodes").to_vec()
    }
    let sixteen: BTreeMap<String, u8> = (0..16u8).map(|i| (format!("k{i:02}"), i)).collect();
    vec![
        (
            "login",
            enc(&Login {
                player: "ann".into(),
            }),
        ),
        (
            "login_unicode",
            enc(&Login {
                player: "zoë-🎮".into(),
            }),
        ),
        ("move", enc(&Move { dx: 1, dy: -1 })),
        (
            "move_far",
            enc(&Move {
                dx: 1000,
                dy: -40_000,
            }),
        ),
        ("position", enc(&Position { x: 3, y: 1 })),
        (
            "position_extremes",
            enc(&Position {
                x: i64::MIN,
                y: i64::MAX,
            }),
        ),
        (
            "ints",
            enc(&Ints {
                pos_fix: 127,
                u8_128: 128,
                u8_max: u8::MAX,
                u16_max: u16::MAX,
                u32_max: u32::MAX,
                u64_max: u64::MAX,
                neg_fix: -32,
                neg_33: -33,
                i8_min: i8::MIN,
                i16_min: i16::MIN,
                i32_min: i32::MIN,
                i64_min: i64::MIN,
                i64_max: i64::MAX,
                safe_max: (1 << 53) - 1,
                unsafe_min: -(1 << 53) - 1,
            }),
        ),
        (
            "floats",
            enc(&Floats {
                half: 0.5,
                whole: 1.0,
                negative: -2.25,
            }),
        ),
        ("float32", enc(&Single { small: 1.5 })),
        (
            "profile_none",
            enc(&Profile {
                name: None,
                score: Some(7),
                online: true,
                banned: false,
            }),
        ),
        (
            "profile_some",
            enc(&Profile {
                name: Some("ann".into()),
                score: None,
                online: false,
                banned: true,
            }),
        ),
        (
            "team",
            enc(&Team {
                name: "red".into(),
                members: vec![
                    Member {
                        player: "ann".into(),
                        at: Position { x: 0, y: 0 },
                    },
                    Member {
                        player: "bob".into(),
                        at: Position { x: -5, y: 300 },
                    },
                ],
                tags: vec![],
            }),
        ),
        ("vec_i64", enc(&vec![1i64, -1, 300, -300, 70_000])),
        ("vec_16", enc(&(0..16u8).collect::<Vec<u8>>())),
        ("enum_unit", enc(&Dir::Left)),
        ("enum_units", enc(&vec![Dir::Left, Dir::Right])),
        ("enum_unit_of_many", enc(&Command::Stop)),
        ("enum_newtype", enc(&Command::Say("hi".into()))),
        ("enum_struct", enc(&Command::Go { dx: 2, dy: -3 })),
        ("enum_tuple", enc(&Command::Pair(1, 2))),
        ("unit", enc(&())),
        ("empty_struct", enc(&Empty {})),
        ("newtype_struct", enc(&Score(250))),
        ("tuple", enc(&(1u8, "x", true))),
        ("str_31", enc(&"a".repeat(31))),
        ("str_32", enc(&"b".repeat(32))),
        ("str_300", enc(&"c".repeat(300))),
        ("str_empty", enc("")),
        ("bin", enc(&Bin(vec![0, 1, 2, 255]))),
        (
            "bin_300",
            enc(&Bin((0..300).map(|i| (i % 256) as u8).collect())),
        ),
        (
            "map_int_keys",
            enc(&BTreeMap::from([(1u32, "a"), (300, "b")])),
        ),
        ("map_16", enc(&sixteen)),
        ("array_of_options", enc(&vec![Some(1u8), None, Some(3)])),
    ]
}

fn render() -> String {
    let mut out = String::from(
        "# MessagePack bytes written by rmp-serde (zlink::typed::encode), one fixture a line:\n\
         # <name> <hex>. Written by tests/msgpack_fixtures.rs (cargo test --test\n\
         # msgpack_fixtures -- --ignored); read by clients/ts/test/msgpack.test.mjs.\n",
    );
    for (name, bytes) in fixtures() {
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        out.push_str(&format!("{name} {hex}\n"));
    }
    out
}

#[test]
fn committed_fixtures_are_what_rmp_serde_writes() {
    let committed = std::fs::read_to_string(PATH).unwrap_or_else(|e| {
        panic!("{PATH}: {e} (write it: cargo test --test msgpack_fixtures -- --ignored)")
    });
    let now = render();
    for (line, (was, is)) in committed.lines().zip(now.lines()).enumerate() {
        assert_eq!(
            was,
            is,
            "{PATH} line {}: rmp-serde now writes other bytes; rewrite the file with \
             `cargo test --test msgpack_fixtures -- --ignored` and run the TS tests",
            line + 1
        );
    }
    assert_eq!(
        committed.lines().count(),
        now.lines().count(),
        "{PATH}: fixtures added or removed"
    );
}

#[test]
fn fixtures_decode_to_their_values() {
    // The fixtures are what zlink's own decoder reads back: the bytes a TS
    // client writes for them reach a Rust handler as the same values.
    let get = |name: &str| fixtures().into_iter().find(|(n, _)| *n == name).unwrap().1;
    assert_eq!(
        typed::decode::<Login>(&get("login")).unwrap(),
        Login {
            player: "ann".into()
        }
    );
    assert_eq!(
        typed::decode::<Move>(&get("move")).unwrap(),
        Move { dx: 1, dy: -1 }
    );
    assert_eq!(
        typed::decode::<Command>(&get("enum_struct")).unwrap(),
        Command::Go { dx: 2, dy: -3 }
    );
    assert_eq!(
        typed::decode::<Command>(&get("enum_unit_of_many")).unwrap(),
        Command::Stop
    );
    assert_eq!(
        typed::decode::<Profile>(&get("profile_none")).unwrap(),
        Profile {
            name: None,
            score: Some(7),
            online: true,
            banned: false
        }
    );
    // An Option field left out (what the TS client writes for `undefined`)
    // reads as None.
    let without_name = typed::encode(&BTreeMap::from([("score", 7u32)])).unwrap();
    #[derive(Deserialize, Debug, PartialEq)]
    struct Partial {
        name: Option<String>,
        score: u32,
    }
    assert_eq!(
        typed::decode::<Partial>(&without_name).unwrap(),
        Partial {
            name: None,
            score: 7
        }
    );
    // A whole number where an f64 is expected reads (a JS client writes 1.0 as 1).
    assert_eq!(typed::decode::<f64>(&[0x01]).unwrap(), 1.0);
}

#[test]
#[ignore = "writes clients/ts/test/fixtures/msgpack.txt; run by hand"]
fn write_fixtures() {
    std::fs::create_dir_all(std::path::Path::new(PATH).parent().unwrap()).unwrap();
    std::fs::write(PATH, render()).unwrap();
}
