//! Startup checks: is io_uring permitted here, and does the kernel have what
//! the socket loop needs?
//!
//! Issue 3 item 1: where io_uring is demanded and not permitted, startup
//! fails at once with a configuration error that says so and how to fix it,
//! never a hang or a panic. Issue 8 item 2: [`probe_io_uring`] is what
//! `IoBackend::Auto` asks before it falls back to epoll. Every check runs
//! before the first socket exists.

use std::io;

use io_uring::{opcode, IoUring, Probe};

use crate::error::ErrorKind;

/// How to fix a denied io_uring, appended to every
/// [`ReactorError::IoUringUnavailable`] message.
const FIX: &str = "zlink's io_uring socket loop needs Linux >= 6.0. To enable io_uring: \
allow it with `sysctl -w kernel.io_uring_disabled=0` (or add the user to \
kernel.io_uring_group when it is 1); in a container, run with a seccomp \
profile that allows io_uring_setup, io_uring_enter and io_uring_register \
(default container profiles often block them); on an older kernel, upgrade. \
Or run on epoll: io_backend = IoBackend::Epoll (IoBackend::Auto falls back to it)";

/// Why a reactor could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReactorError {
    /// io_uring is denied here, or the kernel lacks a feature the loop uses.
    #[error("io_uring is not available: {why}. {FIX}")]
    IoUringUnavailable {
        /// What was refused or missing.
        why: String,
    },
    /// The reactor's configuration cannot be used as given.
    #[error("invalid reactor configuration: {0}")]
    InvalidConfig(&'static str),
    /// A setup step failed for a reason that is not a missing permission or
    /// feature (for example the locked-memory limit).
    #[error("reactor setup failed: {0}")]
    Setup(#[source] io::Error),
}

impl ReactorError {
    /// The public error kind: a denied io_uring and a bad configuration are
    /// both configuration errors at startup (DESIGN "Error kinds").
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::IoUringUnavailable { .. } | Self::InvalidConfig(_) => ErrorKind::Configuration,
            Self::Setup(_) => ErrorKind::Unavailable,
        }
    }
}

/// Ring entries of the probe: the smallest ring that answers the questions.
const PROBE_ENTRIES: u32 = 8;

/// Whether io_uring is permitted here and has every feature the loop uses:
/// sets up a small ring, checks it and drops it.
///
/// It runs on a thread of its own that ends with it: the kernel may queue
/// the ring's teardown work on the thread that created it, with a
/// notification that interrupts that thread's timed socket calls (EINTR),
/// and the caller of `NodeBuilder::start` is the application's thread.
pub(super) fn probe_io_uring() -> Result<(), ReactorError> {
    let probe = std::thread::Builder::new()
        .name("zlink-io-uring-probe".to_owned())
        .spawn(|| {
            let ring = IoUring::new(PROBE_ENTRIES).map_err(setup_error)?;
            check_features(&ring)
        })
        .map_err(ReactorError::Setup)?;
    probe.join().unwrap_or_else(|_| {
        Err(ReactorError::Setup(io::Error::other(
            "the io_uring probe panicked",
        )))
    })
}

/// Maps the error of `io_uring_setup(2)` to the startup error.
///
/// EPERM is what both `kernel.io_uring_disabled` and a seccomp filter return;
/// ENOSYS is a kernel built without io_uring (or a filter that pretends so).
pub(super) fn setup_error(err: io::Error) -> ReactorError {
    match err.raw_os_error() {
        Some(libc::EPERM) => ReactorError::IoUringUnavailable {
            why: "io_uring_setup was not permitted (EPERM: kernel.io_uring_disabled \
                  is set, or a seccomp profile denies it)"
                .to_owned(),
        },
        Some(libc::ENOSYS) => ReactorError::IoUringUnavailable {
            why: "io_uring_setup does not exist (ENOSYS: a kernel without io_uring, \
                  or a seccomp profile that hides it)"
                .to_owned(),
        },
        _ => ReactorError::Setup(err),
    }
}

/// Maps the error of registering the provided buffer ring: EINVAL there is
/// a kernel older than 5.19, which has no buffer rings.
pub(super) fn buf_ring_error(err: io::Error) -> ReactorError {
    match err.raw_os_error() {
        Some(libc::EINVAL) | Some(libc::EPERM) | Some(libc::ENOSYS) => {
            ReactorError::IoUringUnavailable {
                why: format!("registering a provided buffer ring failed ({err}); buffer rings need Linux >= 5.19"),
            }
        }
        _ => ReactorError::Setup(err),
    }
}

/// Checks that the ring has every opcode and feature the loop uses.
///
/// The probe has no flag for multishot receive (Linux 6.0); `SendZc` arrived
/// in the same release, so its presence stands for it.
pub(super) fn check_features(ring: &IoUring) -> Result<(), ReactorError> {
    let mut probe = Probe::new();
    ring.submitter().register_probe(&mut probe).map_err(|err| {
        ReactorError::IoUringUnavailable {
            why: format!("IORING_REGISTER_PROBE failed ({err}); the kernel is older than 5.6"),
        }
    })?;
    let needed = [
        (opcode::Accept::CODE, "accept"),
        (opcode::Recv::CODE, "recv"),
        (opcode::Send::CODE, "send"),
        (opcode::Connect::CODE, "connect"),
        (opcode::Close::CODE, "close"),
        (opcode::Read::CODE, "read"),
        (opcode::AsyncCancel::CODE, "async cancel"),
        (opcode::SendZc::CODE, "multishot recv (Linux 6.0)"),
    ];
    for (code, name) in needed {
        if !probe.is_supported(code) {
            return Err(ReactorError::IoUringUnavailable {
                why: format!("the kernel's io_uring lacks {name}"),
            });
        }
    }
    let params = ring.params();
    if !params.is_feature_ext_arg() || !params.is_feature_nodrop() {
        return Err(ReactorError::IoUringUnavailable {
            why: "the kernel's io_uring lacks EXT_ARG or NODROP (Linux 5.11)".to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message_for(errno: i32) -> String {
        setup_error(io::Error::from_raw_os_error(errno)).to_string()
    }

    #[test]
    fn eperm_says_io_uring_is_not_permitted_and_how_to_fix_it() {
        let message = message_for(libc::EPERM);
        assert!(message.contains("io_uring"), "{message}");
        assert!(message.contains("not permitted"), "{message}");
        assert!(
            message.contains("sysctl -w kernel.io_uring_disabled=0"),
            "{message}"
        );
        assert!(message.contains("seccomp"), "{message}");
        assert!(message.contains("io_uring_setup, io_uring_enter and io_uring_register"));
    }

    #[test]
    fn enosys_says_the_kernel_lacks_io_uring_and_how_to_fix_it() {
        let message = message_for(libc::ENOSYS);
        assert!(message.contains("kernel without io_uring"), "{message}");
        assert!(message.contains("Linux >= 6.0"), "{message}");
        assert!(message.contains("seccomp"), "{message}");
    }

    #[test]
    fn a_denied_io_uring_is_a_configuration_error() {
        assert_eq!(
            setup_error(io::Error::from_raw_os_error(libc::EPERM)).kind(),
            ErrorKind::Configuration
        );
        assert_eq!(
            buf_ring_error(io::Error::from_raw_os_error(libc::EINVAL)).kind(),
            ErrorKind::Configuration
        );
    }

    #[test]
    fn other_setup_errors_keep_their_cause() {
        let err = setup_error(io::Error::from_raw_os_error(libc::ENOMEM));
        assert!(matches!(err, ReactorError::Setup(_)), "{err}");
    }
}
