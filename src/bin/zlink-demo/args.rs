//! The demo's command line: four flags, parsed by hand so that the binary
//! pulls in no argument-parsing crate (DESIGN: lean dependencies).

use std::fmt;

/// What the run does, from the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Simulated clients, one player each.
    pub clients: usize,
    /// MOVE requests per client, split around the replacement phase.
    pub rounds: usize,
    /// Client threads; each drives its share of the clients round-robin.
    pub threads: usize,
    /// Live relocations of players between the nodes while the clients
    /// play (0: none).
    pub relocations: usize,
    /// The seed of the movers' choices (printed; default from the clock).
    pub seed: u64,
}

/// The default load: a few hundred clients that finish in seconds on two
/// cores.
const DEFAULT_CLIENTS: usize = 300;
const DEFAULT_ROUNDS: usize = 20;
/// `--quick` (CI): few clients, still enough that every phase — remote and
/// local relays, pushes, replacements — happens at least a few times.
const QUICK_CLIENTS: usize = 24;
const QUICK_ROUNDS: usize = 8;
/// Relocations per run: enough that every client's player moves a few
/// times by default, and a few dozen in the quick run.
const DEFAULT_RELOCATIONS: usize = 600;
const QUICK_RELOCATIONS: usize = 40;
const MAX_RELOCATIONS: usize = 1_000_000;
/// Upper bounds that keep a typo from asking for a run that cannot finish
/// or cannot fit the machine's file descriptors.
const MAX_CLIENTS: usize = 5_000;
const MAX_ROUNDS: usize = 10_000;
const MAX_THREADS: usize = 64;

pub const USAGE: &str = "\
usage: zlink-demo [--clients N] [--rounds N] [--threads N] [--relocations N] [--seed S] [--quick]

Starts a local mesh of 3 zlink nodes on loopback sharing one embedded Location
Store, a small lobby game, and simulated clients that log in, MOVE, receive
pushes, get replaced by a second login, and disconnect, while their players
are relocated live between the nodes; then prints a report.

  --clients N   simulated clients, one player each (default 300)
  --rounds N    MOVE requests per client (default 20)
  --threads N   client threads driving the clients (default: 2 per core, 2..8)
  --relocations N
                live player relocations during the run (default 600; 0: none)
  --seed S      the seed of the relocations' choices (default: from the clock)
  --quick       a small run for CI (24 clients, 8 rounds, 40 relocations)
  -h, --help    this text
";

/// Why the command line was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum ArgsError {
    /// `--help`: not an error, but the run does not happen.
    Help,
    /// Anything else, with the sentence to print.
    Invalid(String),
}

impl fmt::Display for ArgsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgsError::Help => f.write_str(USAGE),
            ArgsError::Invalid(why) => write!(f, "zlink-demo: {why}\n\n{USAGE}"),
        }
    }
}

/// Parses the arguments after the program name. Explicit `--clients` or
/// `--rounds` win over `--quick`, whatever their order.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Options, ArgsError> {
    let mut quick = false;
    let mut clients = None;
    let mut rounds = None;
    let mut threads = None;
    let mut relocations = None;
    let mut seed = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
            None => (arg.clone(), None),
        };
        let mut value = |name: &str, min: u64, max: u64| -> Result<u64, ArgsError> {
            let text = inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| ArgsError::Invalid(format!("{name} needs a number")))?;
            let n: u64 = text.parse().map_err(|_| {
                ArgsError::Invalid(format!("{name} needs a whole number, not {text:?}"))
            })?;
            if n < min || n > max {
                return Err(ArgsError::Invalid(format!(
                    "{name} must be between {min} and {max}, not {n}"
                )));
            }
            Ok(n)
        };
        let mut count = |name: &str, min: usize, max: usize| -> Result<usize, ArgsError> {
            let n = value(name, min as u64, max as u64)?;
            // Bounded by `max`, a usize.
            Ok(usize::try_from(n).unwrap_or(max))
        };
        match flag.as_str() {
            "--clients" => clients = Some(count("--clients", 1, MAX_CLIENTS)?),
            "--rounds" => rounds = Some(count("--rounds", 1, MAX_ROUNDS)?),
            "--threads" => threads = Some(count("--threads", 1, MAX_THREADS)?),
            "--relocations" => relocations = Some(count("--relocations", 0, MAX_RELOCATIONS)?),
            "--seed" => seed = Some(value("--seed", 0, u64::MAX)?),
            "--quick" if inline.is_none() => quick = true,
            "-h" | "--help" => return Err(ArgsError::Help),
            _ => return Err(ArgsError::Invalid(format!("unknown argument {arg:?}"))),
        }
    }
    let (default_clients, default_rounds, default_relocations) = if quick {
        (QUICK_CLIENTS, QUICK_ROUNDS, QUICK_RELOCATIONS)
    } else {
        (DEFAULT_CLIENTS, DEFAULT_ROUNDS, DEFAULT_RELOCATIONS)
    };
    let clients = clients.unwrap_or(default_clients);
    let threads = threads.unwrap_or_else(default_threads).min(clients);
    Ok(Options {
        clients,
        rounds: rounds.unwrap_or(default_rounds),
        threads,
        relocations: relocations.unwrap_or(default_relocations),
        seed: seed.unwrap_or_else(clock_seed),
    })
}

/// A seed from the wall clock, when none is given.
fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}

/// Two client threads per core: each spends most of its time blocked on a
/// reply, so two per core keep the nodes busy without swamping them.
fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get() * 2)
        .unwrap_or(4)
        .clamp(2, 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(args: &[&str]) -> Result<Options, ArgsError> {
        parse(args.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn defaults_quick_and_overrides() {
        let d = parse_str(&[]).unwrap();
        assert_eq!((d.clients, d.rounds), (300, 20));
        let q = parse_str(&["--quick"]).unwrap();
        assert_eq!((q.clients, q.rounds), (24, 8));
        assert_eq!((d.relocations, q.relocations), (600, 40));
        let o = parse_str(&[
            "--clients",
            "7",
            "--quick",
            "--rounds=3",
            "--threads",
            "2",
            "--relocations",
            "0",
            "--seed=42",
        ])
        .unwrap();
        assert_eq!(
            o,
            Options {
                clients: 7,
                rounds: 3,
                threads: 2,
                relocations: 0,
                seed: 42,
            }
        );
    }

    #[test]
    fn bad_input_is_a_clear_error() {
        for bad in [
            &["--clients"][..],
            &["--clients", "x"],
            &["--clients", "0"],
            &["--rounds", "-1"],
            &["--threads", "1000"],
            &["--frobnicate"],
            &["--quick=1"],
            &["--seed", "-3"],
            &["--relocations", "x"],
        ] {
            assert!(
                matches!(parse_str(bad), Err(ArgsError::Invalid(_))),
                "{bad:?}"
            );
        }
        assert_eq!(parse_str(&["--help"]), Err(ArgsError::Help));
    }
}
