//! The shard's task executor: runs application callbacks (futures) on the
//! shard thread, so that a callback may await a bind or a relay while the
//! shard's infrastructure work — bind terminals, replies, seals, disconnect
//! cleanup — goes on in the same loop (§10).
//!
//! Ground rules: tasks are `!Send` and never leave their shard; a waker may be
//! called from any thread (it pushes the task onto the ready queue, and from
//! another thread also wakes the shard's reactor); polling happens only in
//! [`Executor::run_ready`], with a budget, so one busy callback cannot starve
//! the socket loop.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::mem;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

/// Wakes the thread that runs the executor (the shard's reactor).
pub(crate) trait Unpark: Send + Sync + 'static {
    /// Makes a parked loop turn return.
    fn unpark(&self);
}

/// Names a task; never reused within one executor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct TaskId {
    index: u32,
    generation: u32,
}

type LocalFuture = Pin<Box<dyn Future<Output = ()>>>;

struct Slot {
    generation: u32,
    future: Option<LocalFuture>,
    /// Built once per task, so polling allocates nothing; kept after the
    /// task ends, so that the slot's next task takes it over instead of
    /// allocating its own when no stale clone of it is left
    /// ([`Executor::insert`]).
    waker: Option<Arc<TaskWaker>>,
}

impl Ready {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<TaskId>> {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn push(&self, id: TaskId) {
        self.lock().push_back(id);
    }

    fn pop(&self) -> Option<TaskId> {
        self.lock().pop_front()
    }

    fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

struct Ready {
    /// Woken tasks, in order. A locked deque rather than a lock-free
    /// segment queue: it keeps its capacity, so a warm shard allocates
    /// nothing per wake (a segment queue allocated a block every 31
    /// pushes, once per relayed message: docs/PERFORMANCE.md "Allocations
    /// per relayed message"); almost every wake comes from the shard's own
    /// thread, so the lock is uncontended.
    queue: Mutex<VecDeque<TaskId>>,
    unpark: Box<dyn Unpark>,
    /// Names this executor among every executor of the process (never
    /// reused, unlike an address), for [`HOME`].
    id: u64,
}

/// The executor ids are drawn from this counter.
static NEXT_EXECUTOR: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The executor whose tasks this thread polls (set by
    /// [`Executor::run_ready`]; 0: none yet).
    static HOME: Cell<u64> = const { Cell::new(0) };
}

impl Ready {
    /// Whether the caller runs on the thread that polls these tasks. Such a
    /// wake needs no unpark: the shard's loop reads
    /// [`Executor::has_ready`] before every wait and does not park while a
    /// task is ready. An unpark from there only marked the reactor woken,
    /// so that the next turn could not park: one more trip into the kernel
    /// per relayed message (epoll: a second `epoll_wait`; io_uring: the
    /// reply's send submitted alone, then the wait) — docs/PERFORMANCE.md
    /// "One wait per message".
    fn is_home(&self) -> bool {
        HOME.with(Cell::get) == self.id
    }
}

struct TaskWaker {
    id: TaskId,
    ready: Arc<Ready>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.ready.push(self.id);
        if !self.ready.is_home() {
            self.ready.unpark.unpark();
        }
    }
}

/// A handle that spawns onto the executor from inside a task.
#[derive(Clone)]
pub(crate) struct Spawner {
    spawned: Rc<RefCell<Vec<LocalFuture>>>,
}

impl Spawner {
    /// Queues `future` to start at the executor's next `run_ready`.
    pub(crate) fn spawn(&self, future: impl Future<Output = ()> + 'static) {
        self.spawned.borrow_mut().push(Box::pin(future));
    }

    /// Drops every task not yet started: at shutdown, so that no task keeps
    /// the shard alive through its handle.
    pub(crate) fn clear(&self) {
        self.spawned.borrow_mut().clear();
    }
}

/// Runs `future` unless `abort` ends first (its completer dropped or
/// completed): `None` when aborted. A session turn whose session ended is
/// dropped this way instead of leaking its lane.
pub(crate) async fn or_abort<F: Future>(future: F, abort: Completion<()>) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let mut abort = std::pin::pin!(abort);
    std::future::poll_fn(move |cx| {
        if abort.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        future.as_mut().poll(cx).map(Some)
    })
    .await
}

/// The shard's executor.
pub(crate) struct Executor {
    slots: Vec<Slot>,
    free: Vec<u32>,
    ready: Arc<Ready>,
    spawner: Spawner,
    /// The buffer `run_ready` moves the spawned futures through, kept
    /// (empty) between calls so that starting a task allocates no list.
    starting: Vec<LocalFuture>,
    live: usize,
}

impl Executor {
    pub(crate) fn new(unpark: impl Unpark) -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            ready: Arc::new(Ready {
                queue: Mutex::new(VecDeque::new()),
                unpark: Box::new(unpark),
                id: NEXT_EXECUTOR.fetch_add(1, Ordering::Relaxed),
            }),
            spawner: Spawner {
                spawned: Rc::new(RefCell::new(Vec::new())),
            },
            starting: Vec::new(),
            live: 0,
        }
    }

    /// A spawner for tasks to start more tasks.
    pub(crate) fn spawner(&self) -> Spawner {
        self.spawner.clone()
    }

    /// Starts a task; it is first polled by the next `run_ready`.
    #[cfg(test)]
    pub(crate) fn spawn(&mut self, future: impl Future<Output = ()> + 'static) -> TaskId {
        self.insert(Box::pin(future))
    }

    fn insert(&mut self, future: LocalFuture) -> TaskId {
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                let index = u32::try_from(self.slots.len()).unwrap_or(u32::MAX);
                assert!(index < u32::MAX, "task table is full");
                self.slots.push(Slot {
                    generation: 0,
                    future: None,
                    waker: None,
                });
                index
            }
        };
        let slot = &mut self.slots[index as usize];
        debug_assert!(slot.future.is_none());
        slot.generation = slot.generation.wrapping_add(1);
        slot.future = Some(future);
        self.live += 1;
        let id = TaskId {
            index,
            generation: slot.generation,
        };
        // The slot's last waker is taken over when nothing else holds it:
        // a clone still held somewhere (a stale wake, which the generation
        // check ignores) keeps its id, and the task gets a waker of its own.
        match slot.waker.as_mut().and_then(Arc::get_mut) {
            Some(waker) => waker.id = id,
            None => {
                slot.waker = Some(Arc::new(TaskWaker {
                    id,
                    ready: Arc::clone(&self.ready),
                }));
            }
        }
        self.ready.push(id);
        id
    }

    /// How many tasks are alive (started and not ended), for the
    /// `zlink_shard_tasks` gauge.
    pub(crate) fn live(&self) -> usize {
        self.live
    }

    /// Whether a task is ready to be polled.
    pub(crate) fn has_ready(&self) -> bool {
        !self.ready.is_empty() || !self.spawner.spawned.borrow().is_empty()
    }

    /// Polls up to `budget` ready tasks; returns how many were polled.
    pub(crate) fn run_ready(&mut self, budget: usize) -> usize {
        // Only the thread that polls the tasks gets here (they are not
        // `Send`): from now on its wakes need no unpark.
        HOME.with(|home| home.set(self.ready.id));
        let mut starting = mem::take(&mut self.starting);
        mem::swap(&mut starting, &mut *self.spawner.spawned.borrow_mut());
        for future in starting.drain(..) {
            self.insert(future);
        }
        self.starting = starting;
        let mut polled = 0;
        while polled < budget {
            let Some(id) = self.ready.pop() else {
                break;
            };
            let Some(slot) = self.slots.get_mut(id.index as usize) else {
                continue;
            };
            // A stale wake for a finished (or reused) slot is ignored.
            if slot.generation != id.generation {
                continue;
            }
            let (Some(mut future), Some(waker)) = (slot.future.take(), slot.waker.clone()) else {
                continue;
            };
            let waker = Waker::from(waker);
            polled += 1;
            let mut cx = Context::from_waker(&waker);
            match future.as_mut().poll(&mut cx) {
                Poll::Pending => self.slots[id.index as usize].future = Some(future),
                Poll::Ready(()) => {
                    self.live -= 1;
                    self.free.push(id.index);
                }
            }
        }
        polled
    }
}

/// A one-shot completion: the shard fills it, a task awaits it.
pub(crate) fn completion<T>() -> (Completer<T>, Completion<T>) {
    let shared = Rc::new(RefCell::new(Shared {
        value: None,
        waker: None,
        dropped: false,
    }));
    (
        Completer {
            shared: Rc::clone(&shared),
        },
        Completion { shared },
    )
}

struct Shared<T> {
    value: Option<T>,
    waker: Option<Waker>,
    dropped: bool,
}

/// The abort completions of session turns, used again once both their ends
/// are gone: a turn's abort was an allocation per relayed message on the
/// local path (docs/PERFORMANCE.md "Allocations per relayed message").
#[derive(Default)]
pub(crate) struct AbortPool {
    free: Vec<Rc<RefCell<Shared<()>>>>,
}

/// Gives a turn's abort back to its [`AbortPool`] ([`AbortPool::give`]).
pub(crate) struct AbortSlot(Rc<RefCell<Shared<()>>>);

impl AbortPool {
    /// At most this many are kept: the turns running at once, in practice.
    const KEEP: usize = 64;

    /// A fresh abort pair, from the pool when it has one.
    pub(crate) fn take(&mut self) -> (Completer<()>, Completion<()>, AbortSlot) {
        let shared = self.free.pop().unwrap_or_else(|| {
            Rc::new(RefCell::new(Shared {
                value: None,
                waker: None,
                dropped: false,
            }))
        });
        {
            let mut state = shared.borrow_mut();
            state.value = None;
            state.waker = None;
            state.dropped = false;
        }
        (
            Completer {
                shared: Rc::clone(&shared),
            },
            Completion {
                shared: Rc::clone(&shared),
            },
            AbortSlot(shared),
        )
    }

    /// Keeps the slot for the next turn if nothing else holds it any more
    /// (both its completer and its completion were dropped).
    pub(crate) fn give(&mut self, slot: AbortSlot) {
        if Rc::strong_count(&slot.0) == 1 && self.free.len() < Self::KEEP {
            self.free.push(slot.0);
        }
    }
}

/// Fills a [`Completion`].
pub(crate) struct Completer<T> {
    shared: Rc<RefCell<Shared<T>>>,
}

impl<T> Completer<T> {
    /// Completes the awaiting task with `value`.
    pub(crate) fn complete(self, value: T) {
        let waker = {
            let mut shared = self.shared.borrow_mut();
            shared.value = Some(value);
            shared.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> Drop for Completer<T> {
    fn drop(&mut self) {
        let waker = {
            let mut shared = self.shared.borrow_mut();
            shared.dropped = true;
            shared.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// Awaits the value of a [`Completer`]; `None` if the completer was dropped
/// without a value (the shard stopped).
pub(crate) struct Completion<T> {
    shared: Rc<RefCell<Shared<T>>>,
}

impl<T> Drop for Completion<T> {
    /// Nobody awaits the value any more: the waker the last poll left is
    /// let go, so that a later completion or drop of the completer wakes
    /// no task. A session turn's abort is dropped so, then its completer
    /// as the turn ends: that wake queued the finished task once more per
    /// message (a ready-queue push and an unpark, and a loop turn that did
    /// not park) for a poll the executor then skipped.
    fn drop(&mut self) {
        if let Ok(mut shared) = self.shared.try_borrow_mut() {
            shared.waker = None;
        }
    }
}

impl<T> Future for Completion<T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut shared = self.shared.borrow_mut();
        if let Some(value) = shared.value.take() {
            return Poll::Ready(Some(value));
        }
        if shared.dropped {
            return Poll::Ready(None);
        }
        shared.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct CountUnparks(Arc<AtomicUsize>);

    impl Unpark for CountUnparks {
        fn unpark(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_task_waits_for_its_completion_and_others_run_meanwhile() {
        let unparks = Arc::new(AtomicUsize::new(0));
        let mut executor = Executor::new(CountUnparks(Arc::clone(&unparks)));
        let (completer, completion) = completion::<u32>();
        let got = Rc::new(RefCell::new(Vec::new()));
        let g = Rc::clone(&got);
        executor.spawn(async move {
            let v = completion.await;
            g.borrow_mut().push(v);
        });
        let g = Rc::clone(&got);
        executor.spawn(async move { g.borrow_mut().push(Some(0)) });
        assert_eq!(executor.run_ready(16), 2);
        assert_eq!(*got.borrow(), vec![Some(0)]);
        assert_eq!(executor.live(), 1);
        assert!(!executor.has_ready());
        completer.complete(7);
        assert!(executor.has_ready());
        executor.run_ready(16);
        assert_eq!(*got.borrow(), vec![Some(0), Some(7)]);
        assert_eq!(executor.live(), 0);
    }

    /// A wake on the executor's own thread only queues the task: the
    /// shard's loop reads `has_ready` before it parks, so an unpark would
    /// only cost its next turn a trip into the kernel. A wake from another
    /// thread (a store worker's answer) must unpark, or the loop could sleep
    /// through it.
    #[test]
    fn only_a_wake_from_another_thread_unparks_the_loop() {
        let unparks = Arc::new(AtomicUsize::new(0));
        let mut executor = Executor::new(CountUnparks(Arc::clone(&unparks)));
        let waker = Arc::new(Mutex::new(None::<Waker>));
        let (w, polls) = (Arc::clone(&waker), Rc::new(Cell::new(0)));
        let p = Rc::clone(&polls);
        executor.spawn(std::future::poll_fn(move |cx| {
            p.set(p.get() + 1);
            *w.lock().unwrap() = Some(cx.waker().clone());
            Poll::<()>::Pending
        }));
        assert_eq!(executor.run_ready(16), 1);
        let take = || waker.lock().unwrap().take().unwrap();
        take().wake();
        assert!(executor.has_ready(), "a home wake queues the task");
        assert_eq!(unparks.load(Ordering::SeqCst), 0, "and unparks nothing");
        assert_eq!(executor.run_ready(16), 1);
        let from_elsewhere = take();
        std::thread::spawn(move || from_elsewhere.wake())
            .join()
            .unwrap();
        assert_eq!(
            unparks.load(Ordering::SeqCst),
            1,
            "a wake from another thread unparks"
        );
        assert!(executor.has_ready());
        assert_eq!(executor.run_ready(16), 1);
        assert_eq!(polls.get(), 3);
    }

    /// A slot's next task takes over its waker only when no clone of it
    /// is left: a waker kept past its task's end still names that task,
    /// and its wake polls nothing.
    #[test]
    fn a_stale_waker_does_not_wake_the_next_task_of_its_slot() {
        let mut executor = Executor::new(CountUnparks(Arc::new(AtomicUsize::new(0))));
        let kept = Rc::new(RefCell::new(None));
        let k = Rc::clone(&kept);
        executor.spawn(std::future::poll_fn(move |cx| {
            *k.borrow_mut() = Some(cx.waker().clone());
            Poll::Ready(())
        }));
        assert_eq!(executor.run_ready(16), 1);
        let polls = Rc::new(RefCell::new(0));
        let p = Rc::clone(&polls);
        executor.spawn(std::future::poll_fn(move |_| {
            *p.borrow_mut() += 1;
            Poll::<()>::Pending
        }));
        assert_eq!(executor.run_ready(16), 1, "the new task's first poll");
        kept.borrow_mut()
            .take()
            .expect("the first task's waker")
            .wake();
        assert_eq!(executor.run_ready(16), 0, "the stale wake polled a task");
        assert_eq!(*polls.borrow(), 1);
    }

    /// A turn that ended before its abort leaves no waker behind: dropping
    /// the abort's completer afterwards queues nothing.
    #[test]
    fn a_completer_dropped_after_its_task_ended_wakes_nothing() {
        let mut executor = Executor::new(CountUnparks(Arc::new(AtomicUsize::new(0))));
        let (abort, aborted) = completion::<()>();
        executor.spawn(async move {
            assert_eq!(or_abort(async { 7 }, aborted).await, Some(7));
        });
        assert_eq!(executor.run_ready(16), 1);
        assert!(!executor.has_ready());
        drop(abort);
        assert!(!executor.has_ready(), "the ended task was queued again");
    }

    #[test]
    fn a_dropped_completer_ends_the_wait_with_none_and_budget_is_kept() {
        let mut executor = Executor::new(CountUnparks(Arc::new(AtomicUsize::new(0))));
        let (completer, completion) = completion::<u32>();
        let got = Rc::new(RefCell::new(None));
        let g = Rc::clone(&got);
        executor.spawn(async move { *g.borrow_mut() = Some(completion.await) });
        for _ in 0..5 {
            executor.spawn(async {});
        }
        assert_eq!(executor.run_ready(3), 3);
        assert_eq!(executor.run_ready(16), 3);
        drop(completer);
        executor.run_ready(16);
        assert_eq!(*got.borrow(), Some(None));
        assert_eq!(executor.live(), 0);
    }

    #[test]
    fn a_pooled_abort_is_used_again_only_once_both_ends_are_gone_and_starts_unaborted() {
        let mut executor = Executor::new(CountUnparks(Arc::new(AtomicUsize::new(0))));
        let mut pool = AbortPool::default();
        // A turn aborted: its completion still held by the task, so the slot
        // is not kept.
        let (abort, aborted, slot) = pool.take();
        drop(abort);
        pool.give(slot);
        assert!(pool.free.is_empty(), "kept while its completion lives");
        drop(aborted);
        // A turn that ended: both ends dropped, the slot is kept and the
        // next turn's abort starts fresh (not dropped, no value).
        let (abort, aborted, slot) = pool.take();
        executor.spawn(async move {
            assert_eq!(or_abort(async { 1 }, aborted).await, Some(1));
        });
        executor.run_ready(16);
        drop(abort);
        pool.give(slot);
        assert_eq!(pool.free.len(), 1);
        let (abort, aborted, _slot) = pool.take();
        let got = Rc::new(RefCell::new(None));
        let g = Rc::clone(&got);
        executor.spawn(async move {
            *g.borrow_mut() = or_abort(std::future::pending::<u8>(), aborted).await;
        });
        executor.run_ready(16);
        assert_eq!(executor.live(), 1, "a fresh abort does not end the turn");
        drop(abort);
        executor.run_ready(16);
        assert_eq!((*got.borrow(), executor.live()), (None, 0));
    }
}
