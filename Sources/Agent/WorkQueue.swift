import Capture
import Media
import POSIX
import Synchronization

/// A queue between two threads of the pipeline, with its bound and drop policy explicit:
///
/// - `push(_:cost:)` never waits: the caller checks `load` and applies its own drop policy
///   first (capture drops the oldest frame; the pipeline drops whole GOPs);
/// - `pushWaiting(_:cost:)` waits while the queue is at its bound (a file source read as fast
///   as the pipeline allows: nothing is dropped, the reader simply waits);
/// - `pop()` waits for an element, and returns nil once the queue is closed and empty.
///
/// Threads are woken only when it helps, since every wake-up is a context switch or two per
/// frame: a waiting consumer by a push (unless the pusher says it can wait, as the writer can
/// for sound until the next GOP), a producer blocked in `pushWaiting` once the queue has
/// drained to half its bound, so that it refills it in a batch.
///
/// `@unchecked Sendable`: every stored property is read and written only while holding `condition`
/// (`loadNow`, an atomic copy of `totalCost` written there, is read without it).
final class WorkQueue<Element>: @unchecked Sendable {
    private let condition = Condition()
    /// Elements from `head` on are queued; the slots before it are emptied as they are popped,
    /// so the queue holds nothing it has handed out (a popped frame goes back to its pool as
    /// soon as the consumer drops it) and are cut off in batches.
    private var items: [(element: Element?, cost: Int)] = []
    private var head = 0
    private var totalCost = 0 {
        didSet { loadNow.store(totalCost, ordering: .relaxed) }
    }
    /// `totalCost` as last set: what `load` reads, with no lock (the pipeline asks at every step).
    private let loadNow = Atomic<Int>(0)
    private var closed = false
    /// Threads waiting in `pop` and in `pushWaiting`.
    private var waitingConsumers = 0
    private var waitingProducers = 0
    /// The bound in cost units (frames, bytes).
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    /// The sum of the costs queued.
    var load: Int { loadNow.load(ordering: .relaxed) }
    /// Threads waiting in `pop` now.
    var consumersWaiting: Int { condition.withLock { waitingConsumers } }
    var count: Int { condition.withLock { items.count - head } }

    /// Queues `element`; `wake: false` leaves a waiting consumer asleep until a later push
    /// wakes it (or `close`): for elements that need no action before the next one.
    func push(_ element: Element, cost: Int = 1, wake: Bool = true) {
        condition.withLock {
            guard !closed else { return }
            items.append((element, cost))
            totalCost += cost
            if wake && waitingConsumers > 0 { condition.broadcast() }
        }
    }

    /// Waits while the queue holds `capacity` or more; false when closed meanwhile.
    @discardableResult
    func pushWaiting(_ element: Element, cost: Int = 1) -> Bool {
        condition.withLock {
            while !closed && totalCost >= capacity {
                waitingProducers += 1
                condition.wait()
                waitingProducers -= 1
            }
            guard !closed else { return false }
            items.append((element, cost))
            totalCost += cost
            if waitingConsumers > 0 { condition.broadcast() }
            return true
        }
    }

    /// Removes the oldest element that `where` accepts (the capture queue's drop policy).
    func dropOldest(where accept: (Element) -> Bool) -> Element? {
        condition.withLock {
            guard let i = items[head...].firstIndex(where: { $0.element.map(accept) ?? false }) else { return nil }
            let removed = items.remove(at: i)
            totalCost -= removed.cost
            if waitingProducers > 0 { condition.broadcast() }
            return removed.element
        }
    }

    func pop() -> Element? {
        switch pop(waitingAtMost: nil) {
        case .element(let element): element
        case .closed, .timedOut: nil
        }
    }

    enum Popped {
        case element(Element)
        /// Nothing came within the time allowed.
        case timedOut
        /// Closed and empty.
        case closed
    }

    /// A wait step that overran by more than this was time the process did not run.
    static var overrunAllowance: Double { 1.0 }

    /// Waits for an element, at most `seconds` (for ever when nil) of time the process runs:
    /// a stop (SIGSTOP, a paused VM, a host too busy to schedule it) moves the deadline on, so
    /// that the producer — stopped as long — is not taken for silent.
    func pop(waitingAtMost seconds: Double?) -> Popped {
        var deadline = seconds.map { Clock.monotonic.now() + Timestamp.Duration(seconds: $0) }
        return condition.withLock {
            waitingConsumers += 1
            defer { waitingConsumers -= 1 }
            while head == items.count && !closed {
                if let end = deadline {
                    let before = Clock.monotonic.now()
                    let remaining = (end - before).seconds
                    if remaining <= 0 { return .timedOut }
                    // In short steps against the monotonic clock: the wall clock may jump (a
                    // board without a clock battery sets it from the network after booting).
                    let step = min(remaining, 0.25)
                    condition.wait(seconds: step)
                    let overrun = (Clock.monotonic.now() - before).seconds - step
                    if overrun > WorkQueue.overrunAllowance { deadline = end + Timestamp.Duration(seconds: overrun) }
                } else {
                    condition.wait()
                }
            }
            guard head < items.count else { return .closed }
            let (element, cost) = items[head]
            items[head].element = nil
            head += 1
            totalCost -= cost
            if head > 64 && head * 2 > items.count {
                items.removeFirst(head)
                head = 0
            }
            if waitingProducers > 0 && totalCost <= capacity / 2 { condition.broadcast() }
            return element.map(Popped.element) ?? .closed
        }
    }

    /// No more pushes; `pop` drains what is queued, then returns nil.
    func close() {
        condition.withLock {
            closed = true
            condition.broadcast()
        }
    }
}
