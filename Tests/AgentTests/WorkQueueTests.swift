import Dispatch
import Glibc
import POSIX
import Synchronization
import Testing

@testable import Agent

/// The queues between the agent's threads hold frames of several MB each: whatever they hand
/// out must be theirs no longer, or a long run pins every frame that passed through.
@Suite struct WorkQueueTests {
    final class Payload: Sendable {}

    /// Sees whether a payload still exists, without holding it.
    final class Watch {
        weak var payload: Payload?
    }

    /// Pushes a new payload that nothing but the queue holds, and watches it.
    static func pushWatched(_ queue: WorkQueue<Payload>) -> Watch {
        let watch = Watch()
        let payload = Payload()
        watch.payload = payload
        queue.push(payload)
        return watch
    }

    @Test func aPoppedElementIsNotKeptByTheQueue() {
        let queue = WorkQueue<Payload>(capacity: 8)
        let released = Self.pushWatched(queue)
        queue.push(Payload())
        #expect(released.payload != nil)
        _ = queue.pop()
        #expect(released.payload == nil, "the queue still holds an element it has handed out")
        #expect(queue.count == 1)
    }

    @Test func dropOldestFreesWhatItDrops() {
        let queue = WorkQueue<Payload>(capacity: 8)
        let dropped = Self.pushWatched(queue)
        _ = queue.dropOldest { _ in true }
        #expect(dropped.payload == nil)
        #expect(queue.count == 0 && queue.load == 0)
    }

    /// Many pushes and pops (past the batch in which popped slots are cut off) keep order and cost.
    @Test func orderAndLoadSurviveCompaction() {
        let queue = WorkQueue<Int>(capacity: 1000)
        var next = 0
        for round in 0..<50 {
            for i in 0..<7 { queue.push(round * 7 + i, cost: 3) }
            for _ in 0..<(round % 2 == 0 ? 5 : 9) where queue.count > 0 {
                #expect(queue.pop() == next)
                next += 1
            }
        }
        #expect(queue.load == queue.count * 3)
        queue.close()
        while let v = queue.pop() {
            #expect(v == next)
            next += 1
        }
        #expect(next == 350)
    }

    /// A file source's reader blocked on a full queue is woken only once the queue has drained
    /// to half, and refills it: every element still arrives, in order, and nobody waits for ever.
    @Test func aBlockedProducerRefillsTheQueueAndNothingIsLost() {
        let queue = WorkQueue<Int>(capacity: 4)
        let producer = startThread("test-producer") {
            for i in 0..<200 { queue.pushWaiting(i) }
            queue.close()
        }
        var received: [Int] = []
        loop: while true {
            switch queue.pop(waitingAtMost: 5) {
            case .element(let v): received.append(v)
            case .closed: break loop
            case .timedOut:
                Issue.record("the consumer waited 5 s while the producer was blocked on the queue")
                break loop
            }
        }
        #expect(producer.join(timeout: 5))
        #expect(received == Array(0..<200))
    }

    /// The writer is left asleep for the frames of a GOP: they arrive, in order, with the next
    /// push that wakes it, or when the queue is closed.
    @Test func elementsPushedWithoutWakingArriveWithTheNextWake() {
        let queue = WorkQueue<Int>(capacity: .max)
        let received = Mutex<[Int]>([])
        let three = DispatchSemaphore(value: 0)
        let consumer = startThread("test-consumer") {
            while let v = queue.pop() {
                if received.withLock({
                    $0.append(v)
                    return $0.count
                }) == 3 {
                    three.signal()
                }
            }
        }
        while queue.consumersWaiting == 0 { sched_yield() }  // the consumer waits on the empty queue
        queue.push(1, wake: false)
        queue.push(2, wake: false)
        queue.push(3)
        #expect(three.wait(timeout: .now() + 5) == .success)
        #expect(received.withLock { $0 } == [1, 2, 3])
        queue.push(4, wake: false)
        queue.close()
        #expect(consumer.join(timeout: 5))
        #expect(received.withLock { $0 } == [1, 2, 3, 4])
    }
}
