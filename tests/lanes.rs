//! CONTRACT W3 (§11) on the core's lane types (`pub` with the `testing`
//! feature): the lane policy types cannot express a combination missing
//! from the §11 table. The compile-fail half compiles small programs
//! against the built `zlink` library with the same rustc; the other half
//! drives every state that does exist through `LaneEngine` and checks it
//! does what its §11 row says.

use std::path::{Path, PathBuf};
use std::process::Command;

use zlink::core::lane::{
    ActorDeliveryLane, ActorDeliveryState, LaneEngine, LanePolicy, Ordinary, PolicyRefusal,
    SessionClass, SessionLane, SessionState, SpotLane, SpotState,
};

/// Each line names a state (or a lane/state pairing) the §11 table does not
/// give; each must be refused by the compiler with the given error code.
const MISSING: &[(&str, &str)] = &[
    ("let _ = SessionState::MoveSealing;", "E0599"),
    ("let _ = SessionState::ReturnWait;", "E0599"),
    ("let _ = SpotState::Closed;", "E0599"),
    ("let _ = ActorDeliveryState::ReturnWait;", "E0599"),
    ("let _ = ActorDeliveryState::MoveSealing;", "E0599"),
    ("let _ = ActorDeliveryState::Closed;", "E0599"),
    (
        "let mut l: LaneEngine<SessionLane, u32> = LaneEngine::new(); \
         let id = l.add_lane(8); l.set_state(id, SpotState::MoveSealing);",
        "E0308",
    ),
    (
        "let mut l: LaneEngine<ActorDeliveryLane, u32> = LaneEngine::new(); \
         let id = l.add_lane(8); l.set_state(id, SessionState::Closed);",
        "E0308",
    ),
];

/// The same paths with the states that do exist: must compile, so that the
/// only reason a MISSING line fails is the missing state.
const PRESENT: &[&str] = &[
    "let _ = (SessionState::Open, SessionState::Closed);",
    "let _ = (SpotState::Open, SpotState::ReturnWait, SpotState::MoveSealing);",
    "let _ = ActorDeliveryState::Open;",
    "let mut l: LaneEngine<SpotLane, u32> = LaneEngine::new(); \
     let id = l.add_lane(8); l.set_state(id, SpotState::MoveSealing);",
    "let mut l: LaneEngine<SessionLane, u32> = LaneEngine::new(); \
     let id = l.add_lane(8); l.set_state(id, SessionState::Closed);",
];

/// The directory holding this test binary, `libzlink-*.rlib` and its
/// dependencies (target/<profile>/deps).
fn deps_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent().expect("the deps directory").to_path_buf()
}

/// The `libzlink-*.rlib` files in `deps`, newest first. The newest with
/// the `testing` feature is the build this test was made with; one without
/// it (tests/layering.rs builds the library as an embedder gets it, into
/// the same directory) may be newer, and is told apart by [`check`], which
/// takes the first the PRESENT program compiles against.
fn zlink_rlibs(deps: &Path) -> Vec<PathBuf> {
    let mut rlibs: Vec<PathBuf> = std::fs::read_dir(deps)
        .expect("deps is readable")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libzlink-") && n.ends_with(".rlib"))
        })
        .collect();
    rlibs.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    rlibs.reverse();
    assert!(!rlibs.is_empty(), "no zlink rlib next to the test binary");
    rlibs
}

/// Type-checks a program whose functions are `bodies`, one function per
/// line of the file (function i is on line i + 2), against `rlib`; returns
/// rustc's stderr and whether it succeeded.
fn check_against(rlib: &Path, name: &str, bodies: &[&str]) -> (bool, String) {
    let deps = deps_dir();
    let dir = std::env::temp_dir().join(format!("zlink-w3-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut source = String::from(
        "#![allow(unused)] use zlink::core::lane::{ActorDeliveryLane, ActorDeliveryState, \
         LaneEngine, SessionLane, SessionState, SpotLane, SpotState};\n\n",
    );
    for (i, body) in bodies.iter().enumerate() {
        source.push_str(&format!("fn case_{i}() {{ {body} }}\n"));
    }
    source.push_str("fn main() {}\n");
    let file = dir.join("main.rs");
    std::fs::write(&file, source).unwrap();
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let out = Command::new(rustc)
        .args([
            "--edition",
            "2021",
            "--crate-type",
            "bin",
            "--emit=metadata",
        ])
        .args(["--error-format", "short", "-o"])
        .arg(dir.join("out.rmeta"))
        .arg("-L")
        .arg(format!("dependency={}", deps.display()))
        .arg("--extern")
        .arg(format!("zlink={}", rlib.display()))
        .arg(&file)
        .output()
        .expect("rustc runs");
    let _ = std::fs::remove_dir_all(&dir);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// [`check_against`] the newest rlib the PRESENT program compiles against:
/// the build with the lane types.
fn check(name: &str, bodies: &[&str]) -> (bool, String) {
    let mut refused = String::new();
    for rlib in zlink_rlibs(&deps_dir()) {
        let (ok, stderr) = check_against(&rlib, "present", PRESENT);
        if ok {
            return check_against(&rlib, name, bodies);
        }
        refused.push_str(&format!("{}:\n{stderr}\n", rlib.display()));
    }
    panic!("no zlink rlib has the lane types (built with `testing`):\n{refused}");
}

#[test]
fn w3_the_lane_policy_types_cannot_express_a_state_missing_from_the_11_table() {
    let (ok, stderr) = check("present", PRESENT);
    assert!(ok, "the states the table gives must compile:\n{stderr}");

    let bodies: Vec<&str> = MISSING.iter().map(|(body, _)| *body).collect();
    let (ok, stderr) = check("missing", &bodies);
    assert!(!ok, "a missing state compiled");
    for (i, (body, code)) in MISSING.iter().enumerate() {
        // rustc's short format: "main.rs:LINE:COL: error[CODE]: ...".
        let at = format!("main.rs:{}:", i + 3);
        assert!(
            stderr
                .lines()
                .any(|l| l.contains(&at) && l.contains(&format!("error[{code}]"))),
            "`{body}` was not refused with {code}:\n{stderr}"
        );
    }
}

#[test]
fn w3_each_state_the_table_gives_behaves_as_its_row_says() {
    // The sets are exactly the table's "states it has" column (plus Open),
    // matched without a wildcard: a new variant stops this compiling.
    for state in SpotState::ALL {
        match state {
            SpotState::Open | SpotState::ReturnWait | SpotState::MoveSealing => {}
        }
    }
    for state in SessionState::ALL {
        match state {
            SessionState::Open | SessionState::Closed => {}
        }
    }
    match ActorDeliveryLane::OPEN {
        ActorDeliveryState::Open => {}
    }
    assert_eq!(
        SpotLane::TABLE_STATES,
        &[SpotState::ReturnWait, SpotState::MoveSealing]
    );
    assert_eq!(SessionLane::TABLE_STATES, &[SessionState::Closed]);
    assert!(ActorDeliveryLane::TABLE_STATES.is_empty());

    // Spot lane: return-wait and move sealing admit and hold, in order.
    for held in [SpotState::ReturnWait, SpotState::MoveSealing] {
        let mut spots: LaneEngine<SpotLane, u32> = LaneEngine::new();
        let id = spots.add_lane(8);
        spots.set_state(id, held);
        assert!(spots.submit(id, Ordinary, 1).is_ok());
        assert!(spots.submit(id, Ordinary, 2).is_ok());
        assert_eq!(spots.next_turn(), None);
        spots.set_state(id, SpotState::Open);
        assert_eq!(spots.next_turn(), Some((id, 1)));
        spots.finish_turn(id);
        assert_eq!(spots.next_turn(), Some((id, 2)));
    }

    // Session lane: connection closed refuses application work, admits
    // lifecycle work, and still runs what was admitted.
    let mut sessions: LaneEngine<SessionLane, u32> = LaneEngine::new();
    let id = sessions.add_lane(8);
    assert!(sessions.submit(id, SessionClass::Application, 1).is_ok());
    sessions.set_state(id, SessionState::Closed);
    let refused = sessions
        .submit(id, SessionClass::Application, 2)
        .unwrap_err();
    assert_eq!(
        refused.reason,
        zlink::core::lane::LaneRefusal::Policy(PolicyRefusal::ConnectionClosed)
    );
    assert!(sessions.submit(id, SessionClass::Lifecycle, 3).is_ok());
    assert_eq!(sessions.next_turn(), Some((id, 1)));
    sessions.finish_turn(id);
    assert_eq!(sessions.next_turn(), Some((id, 3)));

    // Actor-delivery lane: only open, every item admitted and dispatched.
    let mut deliveries: LaneEngine<ActorDeliveryLane, u32> = LaneEngine::new();
    let id = deliveries.add_lane(8);
    assert!(deliveries.submit(id, Ordinary, 7).is_ok());
    assert_eq!(deliveries.next_turn(), Some((id, 7)));
}
